"""Our request bodies and the sim's replies, checked by the vendors' own SDK types.

Our providers and our sim are written from the same reading of each API's documentation; where
that reading is wrong, both agree and every test passes. The official SDKs (``openai``,
``anthropic``, ``google-genai``) are generated from the vendors' API specifications, so a field
name, a nesting or an enum value they do not know fails here. Request bodies are validated by
pydantic over the SDKs' request TypedDicts with every TypedDict closed (an unknown key is an
error, which pydantic does not do by default), Gemini's against the SDK's pydantic models (closed
already); responses are parsed with the SDKs' response models and any field they do not declare
is reported.

Where an SDK's types and the live API reference disagree, the API reference wins and the
exception is written down here, once (docs/providers.md lists them):

- Chat Completions: vLLM's sampling extensions (``top_k``, ``min_p``, ...) are top-level keys the
  OpenAI SDK sends through ``extra_body``; images in a ``tool`` message are a vLLM extension
  (OpenAI's own API refuses them; our ``tool_result_images`` capability is off for it), and so is
  a ``tool`` message's ``name`` (vLLM's message type has it for every role; chat templates and
  VisualToolBench's reference send it).
- Responses API: the SDK marks ``parameters`` and ``strict`` of a function tool required (the
  API takes them omitted, and normalises an omitted ``strict`` into strict mode: we always send
  it) and allows ``input_text`` in an id-less assistant message (the API refuses it; we send
  assistant text as a plain string).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import orjson
import pydantic
from pydantic_core import SchemaValidator, ValidationError

WIRES = ("chat", "anthropic", "gemini", "responses")

CHAT_EXTENSIONS = frozenset({"top_k", "min_p", "repetition_penalty", "chat_template_kwargs", "skip_special_tokens",
                             "include_stop_str_in_output", "guided_json", "guided_regex", "guided_choice",
                             "mm_processor_kwargs", "length_penalty", "min_tokens", "ignore_eos"})
"""Top-level keys of vLLM/SGLang's OpenAI-compatible servers (``extra_body`` for the SDK)."""


def _closed(schema: Any) -> Any:
    """The core schema with every TypedDict (and model) forbidding keys it does not declare, and every
    ``Iterable[...]`` (a lazy generator to pydantic, whose items would go unchecked) a list."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if out.get("type") in ("typed-dict", "model-fields"):  # models: the SDKs' response types in unions
            out["extra_behavior"] = "forbid"
        elif out.get("type") == "generator":
            out = {"type": "list", "items_schema": out.get("items_schema", {"type": "any"})}
        return out
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


def _closed_validator(tp: Any) -> SchemaValidator:
    return SchemaValidator(_closed(copy.deepcopy(pydantic.TypeAdapter(tp).core_schema)))


@functools.cache
def _request_validator(wire: str) -> Callable[[bytes], None]:
    if wire == "chat":
        from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
        v = _closed_validator(CompletionCreateParamsNonStreaming)
        return lambda raw: v.validate_json(raw)
    if wire == "anthropic":
        from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
        v = _closed_validator(MessageCreateParamsNonStreaming)
        return lambda raw: v.validate_json(raw)
    if wire == "responses":
        from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
        v = _closed_validator(ResponseCreateParamsNonStreaming)
        return lambda raw: v.validate_json(raw)
    if wire == "gemini":
        request = _gemini_request_model()
        return lambda raw: request.model_validate_json(raw) and None
    raise ValueError(f"unknown wire {wire!r}")


def _gemini_request_model() -> type[pydantic.BaseModel]:
    """``GenerateContentRequest`` as the REST API takes it, built from the SDK's own part types
    (the SDK splits it into ``contents`` and a flattened config; the wire nests them)."""
    from google.genai import types

    return pydantic.create_model(
        "GenerateContentRequest",
        __config__=pydantic.ConfigDict(extra="forbid"),
        contents=(list[types.Content], ...),
        systemInstruction=(types.Content | None, None),
        tools=(list[types.Tool] | None, None),
        toolConfig=(types.ToolConfig | None, None),
        generationConfig=(types.GenerationConfig | None, None),
        safetySettings=(list[types.SafetySetting] | None, None),
        cachedContent=(str | None, None),
    )


def _chat_extensions(raw: bytes) -> bytes:
    """A Chat Completions body without the documented vLLM extensions (see the module docstring)."""
    body = orjson.loads(raw)
    if not isinstance(body, dict):
        return raw
    for key in CHAT_EXTENSIONS & set(body):
        del body[key]
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "tool":
            m.pop("name", None)
        if isinstance(m, dict) and m.get("role") == "tool" and isinstance(m.get("content"), list):
            images = [p for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url"]
            if images:  # checked as user content parts, which is what vLLM makes of them
                _request_validator("chat")(orjson.dumps({"model": "m", "messages": [
                    {"role": "user", "content": images}]}))
                m["content"] = [p for p in m["content"] if p not in images] or ""
    return orjson.dumps(body)


def request_problems(wire: str, raw: bytes) -> list[str]:
    """What the SDK's request types find wrong with a request body (empty when none)."""
    try:
        if wire == "chat":
            raw = _chat_extensions(raw)
        _request_validator(wire)(raw)
    except (ValidationError, pydantic.ValidationError) as e:
        return [f"{wire} request: {p}" for p in _errors(e)]
    return []


def _errors(e: ValidationError | pydantic.ValidationError) -> list[str]:
    """A few readable errors. In a union every member reports: a member whose ``type`` or ``role``
    does not match is not what the body meant, so only that mismatch is kept of it; a key no
    member knows says most, then the deepest errors (the most specific)."""
    all_errs = e.errors()
    wrong = {tuple(err["loc"][:-1]) for err in all_errs
             if err["type"] == "literal_error" and err["loc"] and err["loc"][-1] in ("type", "role")}

    def meant(err: Any) -> bool:
        loc = tuple(err["loc"])
        return err["type"] == "literal_error" or not any(loc[:len(w)] == w for w in wrong)

    errs = sorted([err for err in all_errs if meant(err)] or all_errs,
                  key=lambda err: (err["type"] != "extra_forbidden", -len(err["loc"])))
    out = []
    for err in errs[:5]:
        loc = ".".join(str(p) if len(str(p)) < 40 else "<union>" for p in err["loc"])
        got = f" (got {err['input']!r:.40})" if err["type"] == "literal_error" else ""
        out.append(f"{err['type']} at {loc}: {err['msg']}{got}")
    return out


@functools.cache
def _response_model(wire: str) -> type[pydantic.BaseModel]:
    if wire == "chat":
        from openai.types.chat import ChatCompletion
        return ChatCompletion
    if wire == "anthropic":
        from anthropic.types import Message
        return Message
    if wire == "responses":
        from openai.types.responses import Response
        return Response
    if wire == "gemini":
        from google.genai import types
        return types.GenerateContentResponse
    raise ValueError(f"unknown wire {wire!r}")


def _undeclared(obj: Any, where: str) -> list[str]:
    """Fields a parsed SDK model holds that its type does not declare (openai/anthropic allow extras)."""
    out: list[str] = []
    if isinstance(obj, pydantic.BaseModel):
        for key in (obj.__pydantic_extra__ or {}):
            out.append(f"{where}.{key}: not a field of {type(obj).__name__}")
        for name in type(obj).model_fields:
            out += _undeclared(getattr(obj, name), f"{where}.{name}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _undeclared(v, f"{where}[{i}]")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out += _undeclared(v, f"{where}.{k}")
    return out


def response_problems(wire: str, raw: bytes) -> list[str]:
    """What the SDK's response model finds wrong with a 200 reply body (empty when none)."""
    try:
        parsed = _response_model(wire).model_validate_json(raw)
    except pydantic.ValidationError as e:
        return [f"{wire} response: {p}" for p in _errors(e)]
    return [f"{wire} response: {p}" for p in _undeclared(parsed, "")]


def assert_valid_request(wire: str, raw: bytes | dict[str, Any]) -> None:
    problems = request_problems(wire, raw if isinstance(raw, bytes) else orjson.dumps(raw))
    assert not problems, problems


def assert_valid_response(wire: str, raw: bytes | dict[str, Any]) -> None:
    problems = response_problems(wire, raw if isinstance(raw, bytes) else orjson.dumps(raw))
    assert not problems, problems


def wire_of(path: str) -> str | None:
    """Which wire a sim route speaks."""
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/v1/messages"):
        return "anthropic"
    if path.endswith("/v1/responses"):
        return "responses"
    if path.startswith("/v1beta/models/") and path.endswith(":generateContent"):
        return "gemini"
    return None


class SdkCheck:
    """Checks every request a sim accepts and every reply it gives with the SDK types.

    Installed for every test (tests/conftest.py) as an aiohttp middleware on each SimServer the
    test starts: a sim-backed test of any wire fails when a body one of our providers built, or a
    reply the sim sent, is something the vendor's SDK does not know. Only exchanges the sim
    answered with 200 are checked (a rejected request is what a test of a rejection sends).
    """

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.checked = 0

    def install(self, monkeypatch: Any) -> None:
        from aiohttp import web

        from providers.sim.server import SimServer

        original = SimServer.app

        @web.middleware
        async def check(request: web.Request, handler: Any) -> web.StreamResponse:
            resp: web.StreamResponse = await handler(request)
            wire = wire_of(request.path)
            if wire is None or resp.status != 200 or not isinstance(resp, web.Response) or \
                    not isinstance(resp.body, bytes):
                return resp
            try:
                orjson.loads(resp.body)
            except orjson.JSONDecodeError:
                return resp  # an injected malformed reply
            self.checked += 1
            self.problems += request_problems(wire, await request.read())
            self.problems += response_problems(wire, resp.body)
            return resp

        def app(server: SimServer) -> web.Application:
            application = original(server)
            application.middlewares.append(check)
            return application

        monkeypatch.setattr(SimServer, "app", app)

    def assert_clean(self) -> None:
        assert not self.problems, f"{len(self.problems)} SDK type problems: {sorted(set(self.problems))[:8]}"
