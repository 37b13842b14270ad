"""OpenAI's Responses API, natively: ``POST {base_url}/responses``.

OpenAI's reasoning models (o3, o4-mini, the gpt-5 family) keep their reasoning between tool
calls only here: over Chat Completions it is dropped after every round. Requests are stateless
(``store: false``) and ask for ``reasoning.encrypted_content``; every output item of a round
(reasoning, message, function_call) is kept on ``ChatResponse.native`` and sent back verbatim,
so the next round continues the same chain of thought (the API refuses a ``function_call``
that comes back with its id but without its reasoning item).

Translation from our OpenAI-chat trajectories: system text becomes ``instructions``; user turns
are ``message`` items of ``input_text``/``input_image``; assistant tool calls ``function_call``
items and tool results ``function_call_output`` items matched by ``call_id``, a tool's images
inside ``output`` as ``input_image`` parts (the ``tool_result_images`` capability; off, they
follow in a user message). Tools go out with an explicit ``strict`` (an omitted one is strict
mode). Errors map onto the retry taxonomy with ``Retry-After`` and ``x-ratelimit-reset-*``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

import orjson

from fasteval.core.types import Message, Usage
from providers.base import Capabilities, ChatRequest, ChatResponse, Provider, ProviderError, ToolCallRequest
from providers.http_json import JsonEndpoint, Timeouts, env_key, openai_retry_after
from providers.openai_compat import ImageResolver
from providers.retry import classify_status
from providers.wire_images import ImageParts, split_data_url

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
NATIVE = "openai-responses"
"""``native.provider`` of the assistant turns this provider keeps (output items, verbatim)."""

_PASS_THROUGH = frozenset({"tool_choice", "parallel_tool_calls", "metadata", "service_tier", "truncation",
                           "prompt_cache_key", "safety_identifier", "user", "text", "top_logprobs", "max_tool_calls"})
_SAMPLING = frozenset({"temperature", "top_p"})
_RENAMED = {"max_tokens": "max_output_tokens", "max_completion_tokens": "max_output_tokens",
            "max_output_tokens": "max_output_tokens"}
_REASONING_MODEL = re.compile(r"^(o\d|gpt-5|codex)")
"""Model ids that refuse ``temperature``/``top_p`` by default (the ``sampling`` capability)."""
_IMAGE_CODES = ("invalid_image", "image_", "invalid_base64", "unsupported_image", "empty_image",
                "failed_to_download_image")


def _build_image_part(url: str) -> dict[str, Any]:
    split_data_url(url, "openai-responses")  # a media type the API takes, or a readable bad_input
    return {"type": "input_image", "image_url": url, "detail": "auto"}


class OpenAIResponsesProvider(Provider):
    """An OpenAI model through the Responses API."""

    def __init__(self, model: str, *, base_url: str = DEFAULT_BASE_URL, api_key_env: str | None = "OPENAI_API_KEY",
                 api_key: str | None = None, timeouts: Timeouts | None = None,
                 image_resolver: ImageResolver | None = None, reasoning_effort: str | None = None,
                 reasoning_summary: str | None = "auto", strict_tools: bool = False,
                 extra_body: dict[str, Any] | None = None, endpoint_name: str | None = None,
                 max_connections: int = 1024) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self._fixed_key = api_key  # only for the embedded sim
        self.image_resolver = image_resolver
        self.reasoning_effort = reasoning_effort
        self.reasoning_summary = reasoning_summary
        self.strict_tools = strict_tools
        self.extra_body = dict(extra_body or {})
        self._endpoint_name = endpoint_name
        self._url = f"{self.base_url}/responses"
        self.timeouts = timeouts or Timeouts()
        self._reasons = False
        """Seen to reason although neither its id nor ``reasoning_effort`` said so (``_learn_reasoning``)."""
        self._http = JsonEndpoint(self._headers, self.timeouts, self.base_url, max_connections)
        self._images = ImageParts(_build_image_part)

    def endpoint_id(self) -> str:
        return self._endpoint_name or f"{self.base_url}#responses#{self.model}"

    def default_capabilities(self) -> Capabilities:
        reasoning = self.reasoning_effort is not None or self._reasons or bool(_REASONING_MODEL.match(self.model))
        return Capabilities(tool_result_images=True, parallel_tool_calls=True, seed=False, thinking=reasoning,
                            sampling=not reasoning)

    def _headers(self) -> dict[str, str]:
        key = self._fixed_key or env_key(self.api_key_env, "openai") or ""
        return {"content-type": "application/json", "authorization": f"Bearer {key}"}

    async def _image(self, ref: str, profile: str) -> dict[str, Any]:
        return await self._images.get(self.image_resolver, ref, profile)

    async def _parts(self, content: Any, profile: str) -> list[dict[str, Any]]:
        if content is None:
            return []
        if isinstance(content, str):
            return [{"type": "input_text", "text": content}] if content else []
        parts: list[dict[str, Any]] = []
        for p in content:
            if p.get("type") == "text" and p.get("text"):
                parts.append({"type": "input_text", "text": p["text"]})
            elif p.get("type") == "image":
                parts.append(await self._image(p["image"], profile))
        return parts

    async def translate(self, messages: list[Message], profile: str) -> tuple[str | None, list[dict[str, Any]]]:
        """``(instructions, input items)``."""
        system: list[str] = []
        items: list[dict[str, Any]] = []
        for m in messages:
            role = m.get("role")
            if role == "system":
                parts = await self._parts(m.get("content"), profile)
                if any(p["type"] != "input_text" for p in parts):
                    raise ProviderError("bad_input", "the Responses API takes text only in instructions (a system "
                                        "message holds an image)")
                system.extend(p["text"] for p in parts)
            elif role == "user":
                parts = await self._parts(m.get("content"), profile)
                if parts:
                    items.append({"type": "message", "role": "user", "content": parts})
            elif role == "assistant":
                native = m.get("native")
                if isinstance(native, dict) and native.get("provider") == NATIVE:
                    items.extend(replayable(native["items"]))  # reasoning included: the chain of thought goes on
                    continue
                text = _text(m.get("content"))
                if text:  # a plain string: the API refuses input_text parts from the assistant
                    items.append({"type": "message", "role": "assistant", "content": text})
                for tc in m.get("tool_calls") or []:
                    fn = tc.get("function") or {}
                    items.append({"type": "function_call", "call_id": tc["id"], "name": fn.get("name", ""),
                                  "arguments": fn.get("arguments", "") or "{}"})
            elif role == "tool":
                content = m.get("content")
                parts = await self._parts(content, profile)
                output: str | list[dict[str, Any]]
                if any(p["type"] == "input_image" for p in parts):
                    output = parts
                else:
                    output = "".join(p.get("text", "") for p in parts)
                items.append({"type": "function_call_output", "call_id": str(m.get("tool_call_id")), "output": output})
        return ("\n\n".join(system) if system else None), items

    def _settings(self, params: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        sampling = self.capabilities().sampling
        effort = params.get("reasoning_effort", self.reasoning_effort)
        for key, value in params.items():
            if key in _PASS_THROUGH:
                out[key] = value
            elif key in _RENAMED:
                out[_RENAMED[key]] = value
            elif key in _SAMPLING and sampling:
                out[key] = value
            elif key == "reasoning" and isinstance(value, dict):
                out["reasoning"] = dict(value)
        if self.capabilities().thinking:
            reasoning = out.setdefault("reasoning", {})
            if effort is not None:
                reasoning.setdefault("effort", effort)
            if self.reasoning_summary and self.reasoning_summary != "none":  # "none": an org not verified for them
                reasoning.setdefault("summary", self.reasoning_summary)
            out["include"] = ["reasoning.encrypted_content"]
        return out

    async def build_payload(self, request: ChatRequest) -> dict[str, Any]:
        instructions, items = await self.translate(request.messages, request.image_profile)
        payload: dict[str, Any] = {"model": self.model, "input": items, "store": False}
        if instructions:
            payload["instructions"] = instructions
        if request.tools:
            payload["tools"] = [self._tool(t) for t in request.tools]
        payload.update(self._settings({**self.extra_body, **request.params}))
        return payload

    def _tool(self, spec: dict[str, Any]) -> dict[str, Any]:
        fn = spec.get("function", spec)
        out: dict[str, Any] = {"type": "function", "name": fn["name"],
                               "parameters": fn.get("parameters") or {"type": "object", "properties": {}},
                               "strict": self.strict_tools}
        if fn.get("description"):
            out["description"] = fn["description"]
        return out

    async def chat(self, request: ChatRequest) -> ChatResponse:
        payload = await self.build_payload(request)
        status, headers, raw = await self._http.post(self._url, orjson.dumps(payload))
        reasoning = payload.get("reasoning")
        if status == 400 and isinstance(reasoning, dict) and reasoning.get("summary") and summary_refused(raw):
            self._drop_summaries()  # requests in flight meanwhile come here too: each is sent again once
            del reasoning["summary"]
            status, headers, raw = await self._http.post(self._url, orjson.dumps(payload))
        if status != 200:
            raise classify_responses_error(status, raw, headers)
        resp = parse_responses_response(raw)
        self._learn_reasoning(resp)
        return resp

    def _learn_reasoning(self, resp: ChatResponse) -> None:
        """A model whose id we do not know as a reasoning model may reason all the same: its reasoning
        items then come without encrypted content (we did not ask), which ``store: false`` cannot send
        back. From here on it is asked for the content (and sampling parameters are left out); the
        rounds already answered go back without those items (``replayable``). Said once."""
        if self._reasons or self.capabilities().thinking or resp.native is None:
            return
        if any(i.get("type") == "reasoning" for i in resp.native.get("items") or [] if isinstance(i, dict)):
            self._reasons = True
            self.__dict__.pop("_capabilities", None)
            log.warning("model %s reasons but its id is not one we know as a reasoning model: asking for its "
                        "encrypted reasoning from now on (set reasoning_effort on the entry to say so up front)",
                        self._endpoint_name or self.model)

    def _drop_summaries(self) -> None:
        """An organisation not verified for reasoning summaries gets a 400 on every request that asks
        for one; the answer does not depend on it, so the run goes on without them (said once)."""
        if self.reasoning_summary:
            log.warning("model %s: OpenAI refuses reasoning summaries for this organisation (not verified); "
                        "going on without them (set reasoning_summary: none to skip the refused request)",
                        self._endpoint_name or self.model)
            self.reasoning_summary = None

    async def close(self) -> None:
        await self._http.close()


def replayable(output: list[Any]) -> list[Any]:
    """A round's output items as the next request may send them with ``store: false``: a reasoning
    item without its encrypted content cannot be resent (the API keeps nothing), so it is left out
    and the items after it lose their ids (an id would name the reasoning item they follow)."""
    if all(not isinstance(i, dict) or i.get("type") != "reasoning" or i.get("encrypted_content") is not None
           for i in output):
        return output
    out: list[Any] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "reasoning":
            if item.get("encrypted_content") is not None:
                out.append(item)
            continue
        out.append({k: v for k, v in item.items() if k != "id"})
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text")


def parse_responses_response(raw: bytes) -> ChatResponse:
    """A Response object as a ChatResponse; a malformed one is a retryable bad_response."""
    try:
        data = orjson.loads(raw)
        output = data["output"]
        if not isinstance(output, list):
            raise TypeError("output is not a list")
    except (orjson.JSONDecodeError, KeyError, TypeError) as e:
        raise ProviderError("bad_response", f"malformed Responses API body ({e!r}): {raw[:200]!r}") from None
    if data.get("status") == "failed":
        err = data.get("error") or {}
        raise _error_kind(0, str(err.get("code") or ""), str(err.get("message") or "the response failed"), None)
    texts: list[str] = []
    refusals: list[str] = []
    summary: list[str] = []
    calls: list[ToolCallRequest] = []
    for item in output:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    texts.append(str(part.get("text", "")))
                elif part.get("type") == "refusal":
                    refusals.append(str(part.get("refusal", "")))
        elif kind == "function_call":
            calls.append(ToolCallRequest(id=str(item.get("call_id")), name=str(item.get("name", "")),
                                         arguments=str(item.get("arguments") or "{}")))
        elif kind == "reasoning":
            summary.extend(str(s.get("text", "")) for s in item.get("summary") or [] if isinstance(s, dict))
    u = data.get("usage") or {}
    reasoning_tokens = int((u.get("output_tokens_details") or {}).get("reasoning_tokens") or 0)
    # output_tokens already counts the reasoning tokens: they are billed once, as output
    usage = Usage(prompt_tokens=int(u.get("input_tokens") or 0), completion_tokens=int(u.get("output_tokens") or 0),
                  cache_read_tokens=int((u.get("input_tokens_details") or {}).get("cached_tokens") or 0),
                  reasoning_tokens=reasoning_tokens)
    reason = (data.get("incomplete_details") or {}).get("reason") if data.get("status") == "incomplete" else None
    if reason == "max_output_tokens":
        finish = "length"
    elif reason == "content_filter" or (refusals and not calls):
        finish = "refusal"
    else:
        finish = "tool_calls" if calls else "stop"
    content = "".join(texts) if texts else ("".join(refusals) if refusals else None)
    reasoning = any(isinstance(i, dict) and i.get("type") == "reasoning" for i in output)
    native: dict[str, Any] | None = None
    if reasoning:
        native = {"provider": NATIVE, "items": output, "summary": "\n\n".join(s for s in summary if s) or None,
                  "reasoning_tokens": reasoning_tokens}
    return ChatResponse(content=content, tool_calls=calls, finish_reason=finish, usage=usage, native=native)


def _error_kind(status: int, code: str, message: str, retry_after: float | None) -> ProviderError:
    text = f"{code}: {message}" if code else message or f"HTTP {status}"
    low = message.lower()
    where = {"status": status} if status else {}
    if code == "insufficient_quota":  # a 429 that waiting does not fix: the account is out of credit
        return ProviderError("fatal", text, **where)
    if code == "context_length_exceeded" or "context window" in low or "maximum context length" in low:
        return ProviderError("context_overflow", text, **where)
    if code.startswith(_IMAGE_CODES):
        return ProviderError("bad_input", text, **where)
    if code in ("rate_limit_exceeded",) or status == 429:
        return ProviderError("rate_limit", text, retry_after=retry_after, **where)
    if code in ("invalid_api_key", "unsupported_country_region_territory") or status in (401, 403):
        return ProviderError("auth", text, **where)
    if code in ("server_error", "slow_down") or status >= 500 or (not status and not code):
        return ProviderError("transient", text, retry_after=retry_after, **where)
    kind = classify_status(status) if status else "fatal"
    return ProviderError(kind, text, retry_after=retry_after if kind == "transient" else None,  # type: ignore[arg-type]
                         **where)


def summary_refused(body: bytes) -> bool:
    """The 400 an unverified organisation gets for ``reasoning.summary`` (param and code as OpenAI sends)."""
    try:
        err = orjson.loads(body).get("error") or {}
    except (orjson.JSONDecodeError, AttributeError):
        return False
    return isinstance(err, dict) and err.get("param") == "reasoning.summary" and err.get("code") == "unsupported_value"


def classify_responses_error(status: int, body: bytes, headers: Mapping[str, str]) -> ProviderError:
    """Map a Responses API error (``error.code``/``type`` and the HTTP status) onto the retry taxonomy."""
    try:
        err = orjson.loads(body).get("error") or {}
        code, message = str(err.get("code") or ""), str(err.get("message") or "")
    except (orjson.JSONDecodeError, AttributeError):
        code, message = "", " ".join(body[:300].decode("utf-8", "replace").split())
    return _error_kind(status, code, message, openai_retry_after(headers))
