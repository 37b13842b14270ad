"""Google's Gemini API, natively: ``POST {base_url}/v1beta/models/{model}:generateContent``.

Translation from our OpenAI-format trajectories: system text becomes ``systemInstruction``;
roles become ``user``/``model`` with ``parts`` of ``text``, ``inlineData``, ``functionCall`` and
``functionResponse``; images a tool returned follow its ``functionResponse`` as ``inlineData``
parts in the same user turn. Tool schemas are cut down to the OpenAPI subset the API accepts.
A ``functionCall.id`` the API set is kept as the call's id and sent back as the
``functionResponse.id`` of its answer, so several calls in one turn are matched by id (calls
without one are numbered by us and matched by name). Parts carrying ``thoughtSignature`` come
back on ``ChatResponse.native`` and are sent back verbatim (the API needs them to continue a
function-calling turn with thinking).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from fasteval.core.types import Message, Usage
from providers.base import Capabilities, ChatRequest, ChatResponse, Provider, ProviderError, ToolCallRequest
from providers.http_json import JsonEndpoint, Timeouts, env_key, retry_after_header
from providers.openai_compat import ImageResolver
from providers.wire_images import ImageParts, object_args, split_data_url

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
NATIVE = "gemini"
"""``native.provider`` of the assistant turns this provider keeps (its own blocks, verbatim)."""

SCHEMA_KEYS = frozenset({"type", "format", "description", "nullable", "enum", "properties", "required", "items",
                         "minItems", "maxItems", "minimum", "maximum", "anyOf", "propertyOrdering", "title",
                         "minLength", "maxLength", "pattern", "default"})
"""The OpenAPI subset ``functionDeclarations[].parameters`` accepts; other keys are dropped."""

_GENERATION = {"temperature": "temperature", "top_p": "topP", "top_k": "topK", "max_tokens": "maxOutputTokens",
               "max_completion_tokens": "maxOutputTokens", "stop": "stopSequences", "seed": "seed",
               "presence_penalty": "presencePenalty", "frequency_penalty": "frequencyPenalty",
               "candidate_count": "candidateCount", "response_mime_type": "responseMimeType"}
_REFUSALS = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
                       "LANGUAGE"})
_OVERFLOW = ("exceeds the maximum number of tokens", "input token count", "too many tokens", "context length")
_DELAY = re.compile(r"^\s*([\d.]+)s\s*$")
_NO_ID = "gemini_call_"
"""Our ids for calls the API sent without one (by position); never sent back as an ``id``."""
_OUR_ID = re.compile(r"^gemini_call_\d+$")


def api_call_id(call_id: str) -> str | None:
    """The ``functionCall.id`` the API gave this call, or None for an id-less call we numbered."""
    return None if not call_id or _OUR_ID.match(call_id) else call_id


def _build_image_part(url: str) -> dict[str, Any]:
    mime, data = split_data_url(url, "gemini")
    return {"inlineData": {"mimeType": mime, "data": data}}


class GeminiProvider(Provider):
    """A Gemini model through generateContent."""

    def __init__(self, model: str, *, base_url: str = DEFAULT_BASE_URL, api_key_env: str | None = "GEMINI_API_KEY",
                 api_key: str | None = None, timeouts: Timeouts | None = None,
                 image_resolver: ImageResolver | None = None, thinking_budget: int | None = None,
                 extra_body: dict[str, Any] | None = None, endpoint_name: str | None = None,
                 max_connections: int = 1024) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self._fixed_key = api_key  # only for the embedded sim
        self.image_resolver = image_resolver
        self.thinking_budget = thinking_budget
        self.extra_body = dict(extra_body or {})
        self._endpoint_name = endpoint_name
        self._url = f"{self.base_url}/v1beta/models/{model}:generateContent"
        self._http = JsonEndpoint(self._headers, timeouts or Timeouts(), self.base_url, max_connections)
        self._images = ImageParts(_build_image_part)

    def endpoint_id(self) -> str:
        return self._endpoint_name or f"{self.base_url}#gemini#{self.model}"

    def default_capabilities(self) -> Capabilities:
        return Capabilities(tool_result_images=True, parallel_tool_calls=True, seed=True, thinking=True)

    def _headers(self) -> dict[str, str]:
        key = self._fixed_key or env_key(self.api_key_env, "gemini") or ""
        return {"content-type": "application/json", "x-goog-api-key": key}

    async def _image_part(self, ref: str, profile: str) -> dict[str, Any]:
        return await self._images.get(self.image_resolver, ref, profile)

    async def _parts(self, content: Any, profile: str) -> list[dict[str, Any]]:
        if content is None:
            return []
        if isinstance(content, str):
            return [{"text": content}] if content else []
        parts: list[dict[str, Any]] = []
        for p in content:
            if p.get("type") == "text" and p.get("text"):
                parts.append({"text": p["text"]})
            elif p.get("type") == "image":
                parts.append(await self._image_part(p["image"], profile))
        return parts

    async def translate(self, messages: list[Message], profile: str) -> tuple[list[str], list[dict[str, Any]]]:
        """``(system_texts, contents)``: alternating user/model turns; function responses name their call."""
        system: list[str] = []
        contents: list[dict[str, Any]] = []
        call_names: dict[str, str] = {}
        api_ids: set[str] = set()  # calls that came with a functionCall.id: it goes back with their response

        def push(role: str, parts: list[dict[str, Any]]) -> None:
            if not parts:
                return
            if contents and contents[-1]["role"] == role:
                contents[-1]["parts"].extend(parts)
            else:
                contents.append({"role": role, "parts": list(parts)})

        def push_response(part: dict[str, Any]) -> None:
            # function responses open their user turn, before any image or text in it
            if contents and contents[-1]["role"] == "user":
                at = contents[-1].get("_responses", 0)
                contents[-1]["parts"].insert(at, part)
                contents[-1]["_responses"] = at + 1
            else:
                contents.append({"role": "user", "parts": [part], "_responses": 1})

        for m in messages:
            role = m.get("role")
            if role == "system":
                system.extend(p["text"] for p in await self._parts(m.get("content"), profile) if "text" in p)
            elif role == "user":
                push("user", await self._parts(m.get("content"), profile))
            elif role == "assistant":
                for tc in m.get("tool_calls") or []:
                    call_names[tc["id"]] = (tc.get("function") or {}).get("name", "")
                    if api_call_id(tc["id"]) is not None:
                        api_ids.add(tc["id"])
                native = m.get("native")
                if isinstance(native, dict) and native.get("provider") == NATIVE:
                    push("model", list(native["parts"]))
                    continue
                parts = await self._parts(m.get("content"), profile)
                for tc in m.get("tool_calls") or []:
                    fn = tc.get("function") or {}
                    call: dict[str, Any] = {"name": fn.get("name", ""), "args": object_args(fn.get("arguments", ""))}
                    if tc["id"] in api_ids:
                        call = {"id": tc["id"], **call}
                    parts.append({"functionCall": call})
                push("model", parts)
            elif role == "tool":
                content = m.get("content")
                inner = await self._parts(content, profile)
                text = "".join(p.get("text", "") for p in inner)
                tool_call_id = str(m.get("tool_call_id"))
                response_of: dict[str, Any] = {"name": call_names.get(tool_call_id, ""), "response": {"output": text}}
                if tool_call_id in api_ids:  # the API matches a response to its call by id
                    response_of = {"id": tool_call_id, **response_of}
                response = {"functionResponse": response_of}
                push_response(response)
                push("user", [p for p in inner if "inlineData" in p])  # the tool's images follow
        for c in contents:
            c.pop("_responses", None)
        return system, contents

    def _generation_config(self, params: dict[str, Any]) -> dict[str, Any]:
        config: dict[str, Any] = {}
        for key, value in params.items():
            if key in _GENERATION:
                config[_GENERATION[key]] = value if key != "stop" or isinstance(value, list) else [value]
        budget = params.get("thinking_budget", self.thinking_budget)
        if budget is not None:
            config["thinkingConfig"] = {"thinkingBudget": int(budget)}
        return config

    async def build_payload(self, request: ChatRequest) -> dict[str, Any]:
        system, contents = await self.translate(request.messages, request.image_profile)
        payload: dict[str, Any] = {"contents": contents}
        if system:
            payload["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
        if request.tools:
            payload["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
        params = {**self.extra_body, **request.params}
        if request.seed is not None and self.accepts_seed():
            params.setdefault("seed", request.seed)
        config = self._generation_config(params)
        if config:
            payload["generationConfig"] = config
        return payload

    async def chat(self, request: ChatRequest) -> ChatResponse:
        payload = await self.build_payload(request)
        status, headers, raw = await self._http.post(self._url, orjson.dumps(payload))
        if status != 200:
            raise classify_gemini_error(status, raw, headers.get("retry-after"))
        return parse_gemini_response(raw)

    async def close(self) -> None:
        await self._http.close()



def clean_schema(schema: Any) -> Any:
    """Keep the OpenAPI subset Gemini accepts, recursively (additionalProperties, $schema... dropped)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in SCHEMA_KEYS:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: clean_schema(sub) for name, sub in value.items()}
        elif key == "items":
            out[key] = clean_schema(value)
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [clean_schema(v) for v in value]
        else:
            out[key] = value
    return out


def _declaration(spec: dict[str, Any]) -> dict[str, Any]:
    fn = spec.get("function", spec)
    out: dict[str, Any] = {"name": fn["name"]}
    if fn.get("description"):
        out["description"] = fn["description"]
    params = fn.get("parameters")
    if params and params.get("properties"):
        out["parameters"] = clean_schema(params)
    return out


def parse_gemini_response(raw: bytes) -> ChatResponse:
    """A generateContent response as a ChatResponse; a malformed one is a retryable bad_response."""
    try:
        data = orjson.loads(raw)
        if not isinstance(data, dict):
            raise TypeError("body is not an object")
    except (orjson.JSONDecodeError, TypeError) as e:
        raise ProviderError("bad_response", f"malformed generateContent body ({e!r}): {raw[:200]!r}") from None
    meta = data.get("usageMetadata") or {}
    usage = Usage(prompt_tokens=int(meta.get("promptTokenCount") or 0),
                  completion_tokens=int(meta.get("candidatesTokenCount") or 0) + int(meta.get("thoughtsTokenCount") or 0),
                  cache_read_tokens=int(meta.get("cachedContentTokenCount") or 0),
                  reasoning_tokens=int(meta.get("thoughtsTokenCount") or 0))
    candidates = data.get("candidates") or []
    if not candidates:  # the prompt itself was blocked (promptFeedback.blockReason)
        return ChatResponse(content=None, finish_reason="refusal", usage=usage)
    cand = candidates[0]
    parts = (cand.get("content") or {}).get("parts") or []
    texts = [p["text"] for p in parts if "text" in p and not p.get("thought")]
    calls = [ToolCallRequest(id=str(p["functionCall"].get("id") or f"{_NO_ID}{i}"),
                             name=str(p["functionCall"].get("name", "")),
                             arguments=orjson.dumps(p["functionCall"].get("args") or {}).decode())
             for i, p in enumerate(parts) if isinstance(p.get("functionCall"), dict)]
    reason = str(cand.get("finishReason") or "STOP")
    if reason == "MAX_TOKENS":
        finish = "length"
    elif reason in _REFUSALS:
        finish = "refusal"
    else:
        finish = "tool_calls" if calls else "stop"
    signed = any("thoughtSignature" in p or p.get("thought") for p in parts)
    return ChatResponse(content="".join(texts) if texts else None, tool_calls=calls, finish_reason=finish,
                        usage=usage, native={"provider": NATIVE, "parts": parts} if signed else None)


def _retry_delay(err: dict[str, Any]) -> float | None:
    for detail in err.get("details") or []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            m = _DELAY.match(str(detail.get("retryDelay", "")))
            if m:
                return float(m.group(1))
    return None


def classify_gemini_error(status: int, body: bytes, retry_after: str | None) -> ProviderError:
    """Map a Gemini error (``error.status`` and the HTTP code) onto the retry taxonomy."""
    try:
        err = orjson.loads(body).get("error") or {}
        kind, message = str(err.get("status", "")), str(err.get("message", ""))
    except (orjson.JSONDecodeError, AttributeError):
        err, kind, message = {}, "", body[:300].decode("utf-8", "replace")
    text = f"{kind}: {message}" if kind else message or f"HTTP {status}"
    if status == 429 or kind == "RESOURCE_EXHAUSTED":
        delay = _retry_delay(err)
        return ProviderError("rate_limit", text, status=status,
                             retry_after=delay if delay is not None else retry_after_header(retry_after))
    if status in (401, 403) or kind in ("UNAUTHENTICATED", "PERMISSION_DENIED") or "api key not valid" in message.lower():
        return ProviderError("auth", text, status=status)
    if status == 400 and any(m in message.lower() for m in _OVERFLOW):
        return ProviderError("context_overflow", text, status=status)
    if status >= 500 or kind in ("UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED"):
        return ProviderError("transient", text, status=status, retry_after=retry_after_header(retry_after))
    return ProviderError("fatal", text, status=status)
