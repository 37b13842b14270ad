"""Anthropic's Messages API, natively: ``POST {base_url}/v1/messages``.

Our trajectories speak OpenAI chat format; this module translates them exactly: system text
becomes the top-level ``system``, images become base64 ``image`` blocks, tool calls become
``tool_use`` blocks and tool results ``tool_result`` blocks (images inside them) in the next
user message, consecutive same-role messages merge so roles alternate. Thinking blocks come back
on ``ChatResponse.native`` and are sent back verbatim, as the API requires during tool use.
Prompt caching puts ``cache_control`` breakpoints on the growing prefix so a long trajectory pays
full price for its history once. Retries and limits stay in providers.client.
"""

from __future__ import annotations

from typing import Any

import orjson

from fasteval.core.types import Message, Usage
from providers.base import Capabilities, ChatRequest, ChatResponse, Provider, ProviderError, ToolCallRequest
from providers.http_json import JsonEndpoint, Timeouts, env_key, retry_after_header
from providers.openai_compat import ImageResolver
from providers.wire_images import ImageParts, object_args, split_data_url

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
NATIVE = "anthropic"
"""``native.provider`` of the assistant turns this provider keeps (its own blocks, verbatim)."""
_CACHE = {"type": "ephemeral"}

_STOP = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "tool_use": "tool_calls",
         "max_tokens": "length", "model_context_window_exceeded": "length", "refusal": "refusal"}
_PASS_THROUGH = frozenset({"temperature", "top_p", "top_k", "metadata", "tool_choice", "service_tier"})
_RENAMED = {"max_tokens": "max_tokens", "max_completion_tokens": "max_tokens", "stop": "stop_sequences"}


def _build_image_block(url: str) -> dict[str, Any]:
    mime, data = split_data_url(url, "anthropic")
    return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}


class AnthropicProvider(Provider):
    """A Claude model through the Messages API."""

    def __init__(self, model: str, *, base_url: str = DEFAULT_BASE_URL, api_key_env: str | None = "ANTHROPIC_API_KEY",
                 api_key: str | None = None, version: str = API_VERSION, timeouts: Timeouts | None = None,
                 image_resolver: ImageResolver | None = None, prompt_caching: bool = True,
                 thinking_budget: int | None = None, extra_body: dict[str, Any] | None = None,
                 endpoint_name: str | None = None, max_connections: int = 1024) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self._fixed_key = api_key  # only for the embedded sim, which takes any non-empty key
        self.version = version
        self.image_resolver = image_resolver
        self.prompt_caching = prompt_caching
        self.thinking_budget = thinking_budget
        self.extra_body = dict(extra_body or {})
        self._endpoint_name = endpoint_name
        self._url = f"{self.base_url}/v1/messages"
        self._http = JsonEndpoint(self._headers, timeouts or Timeouts(), self.base_url, max_connections)
        self._images = ImageParts(_build_image_block)

    def endpoint_id(self) -> str:
        return self._endpoint_name or f"{self.base_url}#anthropic#{self.model}"

    def default_capabilities(self) -> Capabilities:
        return Capabilities(tool_result_images=True, parallel_tool_calls=True, seed=False, thinking=True)

    def _headers(self) -> dict[str, str]:
        key = self._fixed_key or env_key(self.api_key_env, "anthropic") or ""
        return {"content-type": "application/json", "anthropic-version": self.version, "x-api-key": key}

    async def _image_block(self, ref: str, profile: str) -> dict[str, Any]:
        return await self._images.get(self.image_resolver, ref, profile)

    async def _content_blocks(self, content: Any, profile: str) -> list[dict[str, Any]]:
        if content is None:
            return []
        if isinstance(content, str):
            return [{"type": "text", "text": content}] if content.strip() else []
        blocks: list[dict[str, Any]] = []
        for part in content:
            kind = part.get("type")
            if kind == "text" and str(part.get("text", "")).strip():
                blocks.append({"type": "text", "text": part["text"]})
            elif kind == "image":
                blocks.append(await self._image_block(part["image"], profile))
        return blocks

    async def translate(self, messages: list[Message], profile: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """``(system_blocks, messages)`` in the Messages API's form, roles strictly alternating."""
        system: list[dict[str, Any]] = []
        out: list[dict[str, Any]] = []

        def push(role: str, blocks: list[dict[str, Any]]) -> None:
            if not blocks:
                return
            if out and out[-1]["role"] == role:
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": role, "content": list(blocks)})

        for m in messages:
            role = m.get("role")
            if role == "system":
                system.extend(await self._content_blocks(m.get("content"), profile))
            elif role == "user":
                push("user", await self._content_blocks(m.get("content"), profile))
            elif role == "assistant":
                native = m.get("native")
                if isinstance(native, dict) and native.get("provider") == NATIVE:
                    push("assistant", list(native["content"]))
                    continue
                blocks = await self._content_blocks(m.get("content"), profile)
                for tc in m.get("tool_calls") or []:
                    fn = tc.get("function") or {}
                    blocks.append({"type": "tool_use", "id": tc["id"], "name": fn.get("name", ""),
                                   "input": object_args(fn.get("arguments", ""))})
                push("assistant", blocks)
            elif role == "tool":
                inner = await self._content_blocks(m.get("content"), profile)
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": m["tool_call_id"]}
                if inner:
                    result["content"] = inner
                # tool_result blocks must open the user message that answers the tool_use turn
                if out and out[-1]["role"] == "user":
                    at = out[-1].get("_results", 0)
                    out[-1]["content"].insert(at, result)
                    out[-1]["_results"] = at + 1
                else:
                    out.append({"role": "user", "content": [result], "_results": 1})
        for msg in out:
            msg.pop("_results", None)
        return system, out

    def _sampling(self, params: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        budget = params.get("thinking_budget", self.thinking_budget)
        for key, value in params.items():
            if key in _PASS_THROUGH:
                out[key] = value
            elif key in _RENAMED:
                out[_RENAMED[key]] = value if key != "stop" or isinstance(value, list) else [value]
            elif key == "thinking":
                out["thinking"] = value
        out.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        if budget:
            out["thinking"] = {"type": "enabled", "budget_tokens": int(budget)}
        if isinstance(out.get("thinking"), dict) and out["thinking"].get("type") == "enabled":
            # The API's rules for thinking: temperature only 1, no top_k, top_p >= 0.95, and
            # max_tokens above the budget (it counts the thinking too).
            if out.get("temperature") not in (None, 1, 1.0):
                del out["temperature"]
            out.pop("top_k", None)
            if out.get("top_p") is not None and out["top_p"] < 0.95:
                del out["top_p"]
            need = int(out["thinking"].get("budget_tokens", 0))
            if out["max_tokens"] <= need:
                out["max_tokens"] = need + DEFAULT_MAX_TOKENS
        return out

    async def build_payload(self, request: ChatRequest) -> dict[str, Any]:
        system, messages = await self.translate(request.messages, request.image_profile)
        payload: dict[str, Any] = {"model": self.model, "messages": messages}
        tools = [_tool_spec(t) for t in request.tools or []]
        if tools:
            payload["tools"] = tools
        if system:
            payload["system"] = system
        payload.update(self._sampling({**self.extra_body, **request.params}))
        if self.prompt_caching:
            _place_cache_breakpoints(payload)
        return payload

    async def chat(self, request: ChatRequest) -> ChatResponse:
        payload = await self.build_payload(request)
        status, headers, raw = await self._http.post(self._url, orjson.dumps(payload))
        if status != 200:
            raise classify_anthropic_error(status, raw, headers.get("retry-after"))
        return parse_anthropic_response(raw)

    async def close(self) -> None:
        await self._http.close()



def _tool_spec(spec: dict[str, Any]) -> dict[str, Any]:
    fn = spec.get("function", spec)
    schema = fn.get("parameters") or {"type": "object", "properties": {}}
    out = {"name": fn["name"], "input_schema": schema}
    if fn.get("description"):
        out["description"] = fn["description"]
    return out


def _place_cache_breakpoints(payload: dict[str, Any]) -> None:
    """Breakpoints on the stable prefix (system, else tools), the last block of the request (written
    for the next round) and the last block of the previous user turn (read from the last round).
    Blocks are copied, never mutated: assistant blocks may be the trajectory's own native ones."""
    def mark(blocks: list[dict[str, Any]]) -> None:
        for i in range(len(blocks) - 1, -1, -1):
            if blocks[i].get("type") in ("thinking", "redacted_thinking"):
                continue  # cache_control cannot sit on a thinking block
            blocks[i] = {**blocks[i], "cache_control": _CACHE}
            return

    if payload.get("system"):
        mark(payload["system"])
    elif payload.get("tools"):
        mark(payload["tools"])
    messages = payload["messages"]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    for i in users[-2:]:
        mark(messages[i]["content"])


def parse_anthropic_response(raw: bytes) -> ChatResponse:
    """A Messages API response as a ChatResponse; a malformed one is a retryable bad_response."""
    try:
        data = orjson.loads(raw)
        blocks = data["content"]
        if not isinstance(blocks, list):
            raise TypeError("content is not a list")
    except (orjson.JSONDecodeError, KeyError, TypeError) as e:
        raise ProviderError("bad_response", f"malformed Messages API body ({e!r}): {raw[:200]!r}") from None
    texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
    calls = [ToolCallRequest(id=str(b.get("id")), name=str(b.get("name", "")),
                             arguments=orjson.dumps(b.get("input") or {}).decode())
             for b in blocks if b.get("type") == "tool_use"]
    u = data.get("usage") or {}
    read, write = int(u.get("cache_read_input_tokens") or 0), int(u.get("cache_creation_input_tokens") or 0)
    usage = Usage(prompt_tokens=int(u.get("input_tokens") or 0) + read + write,
                  completion_tokens=int(u.get("output_tokens") or 0), cache_read_tokens=read, cache_write_tokens=write)
    thinking = any(b.get("type") in ("thinking", "redacted_thinking") for b in blocks)
    return ChatResponse(content="".join(texts) if texts else None, tool_calls=calls,
                        finish_reason=_STOP.get(str(data.get("stop_reason")), "stop"), usage=usage,
                        native={"provider": NATIVE, "content": blocks} if thinking else None)


def classify_anthropic_error(status: int, body: bytes, retry_after: str | None) -> ProviderError:
    """Map a Messages API error onto the retry taxonomy (its ``error.type`` first, then the status)."""
    try:
        err = orjson.loads(body).get("error") or {}
        kind, message = str(err.get("type", "")), str(err.get("message", ""))
    except (orjson.JSONDecodeError, AttributeError):
        kind, message = "", body[:300].decode("utf-8", "replace")
    text = f"{kind}: {message}" if kind else message or f"HTTP {status}"
    if status == 429 or kind == "rate_limit_error":
        return ProviderError("rate_limit", text, status=status, retry_after=retry_after_header(retry_after))
    if status in (401, 403) or kind in ("authentication_error", "permission_error"):
        return ProviderError("auth", text, status=status)
    if status == 400 and "prompt is too long" in message.lower():
        return ProviderError("context_overflow", text, status=status)
    if status == 529 or kind == "overloaded_error" or status >= 500 or status == 408:
        return ProviderError("transient", text, status=status, retry_after=retry_after_header(retry_after))
    return ProviderError("fatal", text, status=status)
