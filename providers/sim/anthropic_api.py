"""The sim's Anthropic dialect: ``POST /v1/messages``, validated as strictly as the real API.

Written from Anthropic's public Messages API documentation: required headers, roles that
alternate and start with ``user``, non-empty text, image media types that match their bytes,
every ``tool_use`` answered by a ``tool_result`` (first in the next user message) and no stray
``tool_result``, at most 4 ``cache_control`` breakpoints, the thinking rules (budget ≥ 1024 and
below ``max_tokens``, temperature only 1, no ``top_k``, thinking blocks sent back with a valid
signature before a tool_use). Rejections use the API's error shape. Valid requests are turned
into the OpenAI form the sim's policies read, and the reply back into a Messages response with
``usage`` that models prompt caching (prefixes at breakpoints seen before are cache reads).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

import orjson

from providers.sim.wire import Rejected
from providers.wire_images import NATIVE_MEDIA_TYPES, sniff_base64

VERSIONS = frozenset({"2023-06-01", "2023-01-01", "2026-10-21"})
"""Versions the sim accepts: ours (2023-06-01) and the one the official SDK the tests run sends."""
TOP_LEVEL = frozenset({"model", "messages", "max_tokens", "system", "tools", "tool_choice", "temperature", "top_p",
                       "top_k", "stop_sequences", "stream", "metadata", "thinking", "service_tier"})
_BLOCKS = {"user": frozenset({"text", "image", "tool_result", "document"}),
           "assistant": frozenset({"text", "tool_use", "thinking", "redacted_thinking"})}
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_SECRET = b"fasteval-sim-thinking"


def error_body(status: int, kind: str, message: str) -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})


def error_kind(status: int) -> str:
    return {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
            404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
            529: "overloaded_error"}.get(status, "api_error")


def signature(text: str) -> str:
    return hmac.new(_SECRET, text.encode(), hashlib.sha256).hexdigest()[:32]


def _bad(message: str) -> Rejected:
    return Rejected(400, "invalid_request_error", message)


def validate(headers: dict[str, str], body: Any, api_key: str | None) -> None:
    """Raise Rejected for anything the Messages API would reject."""
    if headers.get("anthropic-version") not in VERSIONS:
        raise _bad("anthropic-version: header is required and must be a known version")
    # the key as x-api-key, or as a Bearer token (what the current official SDK sends)
    bearer = headers.get("authorization", "")
    key = headers.get("x-api-key", "") or (bearer[7:].strip() if bearer.startswith("Bearer ") else "")
    if not key:
        raise Rejected(401, "authentication_error", "x-api-key header is required")
    if api_key is not None and key != api_key:
        raise Rejected(401, "authentication_error", "invalid x-api-key")
    if not isinstance(body, dict):
        raise _bad("request body must be a JSON object")
    for k in body:
        if k not in TOP_LEVEL:
            raise _bad(f"{k}: Extra inputs are not permitted")
    if not isinstance(body.get("model"), str):
        raise _bad("model: Field required")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise _bad("max_tokens: Field required")
    breakpoints = _validate_system(body.get("system")) + _validate_tools(body.get("tools"))
    thinking = body.get("thinking")
    if thinking is not None:
        if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "disabled"):
            raise _bad("thinking.type: Input should be 'enabled' or 'disabled'")
        if thinking["type"] == "enabled":
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or budget < 1024:
                raise _bad("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
            if max_tokens <= budget:
                raise _bad("`max_tokens` must be greater than `thinking.budget_tokens`")
            if body.get("temperature") not in (None, 1, 1.0):
                raise _bad("`temperature` may only be set to 1 when thinking is enabled")
            if "top_k" in body:
                raise _bad("`top_k` cannot be set when thinking is enabled")
    breakpoints += _validate_messages(body.get("messages"), thinking_on=bool(thinking and thinking.get("type") == "enabled"))
    if breakpoints > 4:
        raise _bad(f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}.")


def _cache_mark(block: dict[str, Any], where: str) -> int:
    cc = block.get("cache_control")
    if cc is None:
        return 0
    if not isinstance(cc, dict) or cc.get("type") != "ephemeral":
        raise _bad(f"{where}.cache_control.type: Input should be 'ephemeral'")
    return 1


def _validate_system(system: Any) -> int:
    if system is None or isinstance(system, str):
        return 0
    if not isinstance(system, list):
        raise _bad("system: Input should be a valid string or list")
    marks = 0
    for i, b in enumerate(system):
        if not isinstance(b, dict) or b.get("type") != "text" or not str(b.get("text", "")).strip():
            raise _bad(f"system.{i}: system blocks must be non-empty text blocks")
        marks += _cache_mark(b, f"system.{i}")
    return marks


def _validate_tools(tools: Any) -> int:
    if tools is None:
        return 0
    if not isinstance(tools, list):
        raise _bad("tools: Input should be a valid list")
    marks = 0
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or not _TOOL_NAME.match(str(t.get("name", ""))):
            raise _bad(f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
        schema = t.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise _bad(f"tools.{i}.input_schema: input_schema must be a JSON schema of type object")
        extra = set(t) - {"name", "description", "input_schema", "cache_control", "type"}
        if extra:
            raise _bad(f"tools.{i}.{sorted(extra)[0]}: Extra inputs are not permitted")
        marks += _cache_mark(t, f"tools.{i}")
    return marks


def _validate_image(block: dict[str, Any], where: str) -> None:
    src = block.get("source") or {}
    if src.get("type") != "base64":
        raise _bad(f"{where}.source.type: only base64 sources are accepted here")
    media = src.get("media_type")
    if media not in NATIVE_MEDIA_TYPES:
        raise _bad(f"{where}.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'")
    if sniff_base64(str(src.get("data", ""))) != media:
        raise _bad(f"{where}.source.base64.data: Image does not match the provided media type {media}")


def _validate_messages(messages: Any, *, thinking_on: bool) -> int:
    if not isinstance(messages, list) or not messages:
        raise _bad("messages: at least one message is required")
    marks = 0
    prev_tool_ids: set[str] = set()
    last_tool_use_turn: list[dict[str, Any]] | None = None
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("user", "assistant"):
            raise _bad(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise _bad("messages: first message must use the \"user\" role")
        if i > 0 and messages[i - 1]["role"] == role:
            raise _bad(f"messages: roles must alternate between \"user\" and \"assistant\", but found multiple "
                       f"\"{role}\" roles in a row")
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks:
            raise _bad(f"messages.{i}.content: content must be a non-empty string or list")
        answered: set[str] = set()
        seen_other = False
        tool_ids: set[str] = set()
        for j, b in enumerate(blocks):
            where = f"messages.{i}.content.{j}"
            kind = b.get("type") if isinstance(b, dict) else None
            if kind not in _BLOCKS[role]:
                raise _bad(f"{where}.type: '{kind}' blocks are not allowed in {role} messages")
            marks += _cache_mark(b, where)
            if kind == "text" and not str(b.get("text", "")).strip():
                raise _bad("messages: text content blocks must contain non-whitespace text")
            if kind == "image":
                _validate_image(b, where)
            if kind == "thinking" and signature(str(b.get("thinking", ""))) != b.get("signature"):
                raise _bad(f"{where}: Invalid `signature` in `thinking` block")
            if kind == "tool_use":
                if not isinstance(b.get("input"), dict):
                    raise _bad(f"{where}.input: Input should be a valid dictionary")
                tool_ids.add(str(b.get("id")))
            if kind == "tool_result":
                if seen_other:
                    raise _bad(f"{where}: tool_result blocks must come first in the user message")
                tid = str(b.get("tool_use_id"))
                if tid not in prev_tool_ids:
                    raise _bad(f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {tid}. Each "
                               f"`tool_result` block must have a corresponding `tool_use` block in the previous message.")
                answered.add(tid)
                inner = b.get("content")
                for k, ib in enumerate(inner if isinstance(inner, list) else []):
                    if ib.get("type") not in ("text", "image"):
                        raise _bad(f"{where}.content.{k}.type: tool results hold text and image blocks")
                    marks += _cache_mark(ib, f"{where}.content.{k}")
                    if ib.get("type") == "image":
                        _validate_image(ib, f"{where}.content.{k}")
            else:
                seen_other = True
        if role == "user" and prev_tool_ids - answered:
            missing = ", ".join(sorted(prev_tool_ids - answered))
            raise _bad(f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                       f"{missing}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.")
        if role == "assistant" and tool_ids:
            last_tool_use_turn = blocks
        prev_tool_ids = tool_ids if role == "assistant" else set()
    if prev_tool_ids:
        raise _bad("messages: the last assistant message has tool_use blocks with no tool_result after them")
    if thinking_on and last_tool_use_turn is not None and last_tool_use_turn[0].get("type") not in (
            "thinking", "redacted_thinking"):
        raise _bad("messages: Expected `thinking` or `redacted_thinking`, but found `"
                   f"{last_tool_use_turn[0].get('type')}`. When `thinking` is enabled, a final `assistant` message "
                   "must start with a thinking block.")
    return marks


def to_openai(body: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI-form request the sim's policies read."""
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        text = system if isinstance(system, str) else "\n".join(b["text"] for b in system)
        messages.append({"role": "system", "content": text})
    for m in body["messages"]:
        content = m["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if m["role"] == "assistant":
            texts = [b["text"] for b in blocks if b["type"] == "text"]
            calls = [{"id": b["id"], "type": "function", "function": {"name": b["name"],
                                                                      "arguments": orjson.dumps(b["input"]).decode()}}
                     for b in blocks if b["type"] == "tool_use"]
            msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
            if calls:
                msg["tool_calls"] = calls
            messages.append(msg)
            continue
        rest: list[dict[str, Any]] = []
        for b in blocks:
            if b["type"] == "tool_result":
                inner = b.get("content") or []
                parts = [{"type": "text", "text": inner}] if isinstance(inner, str) else [_part(x) for x in inner]
                messages.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": parts})
            else:
                rest.append(_part(b))
        if rest:
            messages.append({"role": "user", "content": rest})
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                               "parameters": t["input_schema"]}} for t in body.get("tools") or []]
    out: dict[str, Any] = {"model": body["model"], "messages": messages}
    if tools:
        out["tools"] = tools
    return out


def _part(block: dict[str, Any]) -> dict[str, Any]:
    if block["type"] == "image":
        src = block["source"]
        return {"type": "image_url", "image_url": {"url": f"data:{src['media_type']};base64,{src['data']}"}}
    return {"type": "text", "text": block.get("text", "")}


class PromptCache:
    """Which request prefixes (up to a cache_control breakpoint) this server has seen."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def usage(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(uncached input, cache write, cache read) tokens, at 4 characters a token, 256 an image."""
        flat: list[tuple[dict[str, Any], bool]] = []
        flat += [(t, "cache_control" in t) for t in body.get("tools") or []]
        system = body.get("system")
        if isinstance(system, list):
            flat += [(b, "cache_control" in b) for b in system]
        elif system:
            flat.append(({"type": "text", "text": system}, False))
        for m in body["messages"]:
            content = m["content"]
            for b in [{"type": "text", "text": content}] if isinstance(content, str) else content:
                flat.append(({**b, "_role": m["role"]}, "cache_control" in b))
        digest = hashlib.sha256()
        total = read = write_end = 0
        for block, marked in flat:
            clean = {k: v for k, v in block.items() if k != "cache_control"}
            digest.update(orjson.dumps(clean, option=orjson.OPT_SORT_KEYS))
            total += 256 if block.get("type") == "image" else max(1, len(orjson.dumps(clean)) // 4)
            if marked:
                key = digest.hexdigest()
                if key in self._seen:
                    read = total
                else:
                    self._seen.add(key)
                    write_end = total
        write = max(0, write_end - read)
        return total - read - write, write, read


_ENDED = {"length": "max_tokens", "content_filter": "refusal"}
"""How the core's finish reasons read as ``stop_reason`` (a declined reply is ``refusal`` too)."""


def from_reply(body: dict[str, Any], choice: dict[str, Any], usage: tuple[int, int, int]) -> dict[str, Any]:
    """A Messages API response for the core's completion choice (the policy's reply, how it ended)."""
    reply = choice["message"]
    blocks: list[dict[str, Any]] = []
    thinking = body.get("thinking") or {}
    if thinking.get("type") == "enabled":
        thought = f"Thinking about: {len(body['messages'])} messages so far."
        blocks.append({"type": "thinking", "thinking": thought, "signature": signature(thought)})
    if reply.get("content") or reply.get("refusal"):
        blocks.append({"type": "text", "text": reply.get("content") or reply["refusal"]})
    for i, tc in enumerate(reply.get("tool_calls") or []):
        fn = tc["function"]
        blocks.append({"type": "tool_use", "id": f"toolu_{hashlib.sha1(orjson.dumps(tc)).hexdigest()[:16]}{i}",
                       "name": fn["name"], "input": orjson.loads(fn["arguments"] or "{}")})
    if not blocks:
        blocks.append({"type": "text", "text": "..."})
    out_tokens = max(1, len(orjson.dumps(blocks)) // 4)
    uncached, write, read = usage
    return {"id": f"msg_sim{hashlib.sha1(orjson.dumps(blocks)).hexdigest()[:20]}", "type": "message",
            "role": "assistant", "model": body["model"], "content": blocks,
            "stop_reason": _ENDED.get(str(choice.get("finish_reason")), "refusal" if reply.get("refusal") else
                                      "tool_use" if reply.get("tool_calls") else "end_turn"), "stop_sequence": None,
            "usage": {"input_tokens": uncached, "output_tokens": out_tokens,
                      "cache_creation_input_tokens": write, "cache_read_input_tokens": read}}
