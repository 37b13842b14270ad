"""The sim's Gemini dialect: ``POST /v1beta/models/{model}:generateContent``, strictly validated.

Written from the Gemini API's public documentation: the ``x-goog-api-key`` header, known
top-level fields only, roles ``user``/``model`` alternating and ending with ``user``, one data
field per part, inline images whose MIME type matches their bytes, ``functionCall`` only from the
model and ``functionResponse`` only from the user, as many function responses as the previous
turn made calls, each naming one of them and carrying the call's ``id`` when the call had one
(current models set ids; ``call_ids: false`` on a sim model plays the id-less shape), tool
schemas in the OpenAPI subset, and (when thinking is on) every function call sent back with the ``thoughtSignature`` it came with.
Rejections use Google's error shape; replies carry ``usageMetadata`` with implicit caching.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

import orjson

from providers.sim.wire import ItemPrefixCache, Rejected
from providers.wire_images import NATIVE_MEDIA_TYPES, sniff_base64

TOP_LEVEL = frozenset({"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings",
                       "cachedContent"})
GENERATION = frozenset({"temperature", "topP", "topK", "maxOutputTokens", "stopSequences", "seed", "candidateCount",
                        "presencePenalty", "frequencyPenalty", "responseMimeType", "responseSchema", "thinkingConfig"})
SCHEMA_KEYS = frozenset({"type", "format", "description", "nullable", "enum", "properties", "required", "items",
                         "minItems", "maxItems", "minimum", "maximum", "anyOf", "propertyOrdering", "title",
                         "minLength", "maxLength", "pattern", "default"})
_DATA = ("text", "inlineData", "functionCall", "functionResponse", "fileData", "executableCode", "codeExecutionResult")
_SECRET = b"fasteval-sim-gemini"
_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
           429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def error_body(status: int, message: str, retry_delay_s: float | None = None) -> bytes:
    err: dict[str, Any] = {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}
    if retry_delay_s is not None:
        err["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_delay_s}s"}]
    return orjson.dumps({"error": err})


def signature(call: dict[str, Any]) -> str:
    text = orjson.dumps({"name": call.get("name"), "args": call.get("args")}, option=orjson.OPT_SORT_KEYS)
    return hmac.new(_SECRET, text, hashlib.sha256).hexdigest()[:32]


def _bad(message: str) -> Rejected:
    return Rejected(400, "INVALID_ARGUMENT", message)


def _unknown(name: str, where: str) -> Rejected:
    return _bad(f'Invalid JSON payload received. Unknown name "{name}" at \'{where}\': Cannot find field.')


def validate(headers: dict[str, str], body: Any, api_key: str | None) -> None:
    """Raise Rejected for anything generateContent would reject."""
    key = headers.get("x-goog-api-key", "")
    if not key:
        raise Rejected(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers. Please use an API key.")
    if api_key is not None and key != api_key:
        raise _bad("API key not valid. Please pass a valid API key.")
    if not isinstance(body, dict):
        raise _bad("Invalid JSON payload received.")
    for k in body:
        if k not in TOP_LEVEL:
            raise _unknown(k, "")
    config = body.get("generationConfig") or {}
    for k in config:
        if k not in GENERATION:
            raise _unknown(k, "generation_config")
    thinking_on = bool((config.get("thinkingConfig") or {}).get("thinkingBudget"))
    system = body.get("systemInstruction")
    if system is not None and not (isinstance(system, dict) and isinstance(system.get("parts"), list)):
        raise _bad("systemInstruction must be a Content with parts")
    for i, tool in enumerate(body.get("tools") or []):
        for j, decl in enumerate(tool.get("functionDeclarations") or []):
            _validate_schema(decl.get("parameters"), f"tools[{i}].function_declarations[{j}].parameters")
    _validate_contents(body.get("contents"), thinking_on)


def _validate_schema(schema: Any, where: str) -> None:
    if schema is None:
        return
    if not isinstance(schema, dict):
        raise _bad(f"{where}: schema must be an object")
    for k, v in schema.items():
        if k not in SCHEMA_KEYS:
            raise _unknown(k, where)
        if k == "properties":
            for name, sub in v.items():
                _validate_schema(sub, f"{where}.properties[{name}].value")
        elif k == "items":
            _validate_schema(v, f"{where}.items")


def _validate_contents(contents: Any, thinking_on: bool) -> None:
    if not isinstance(contents, list) or not contents:
        raise _bad("* GenerateContentRequest.contents: contents is not specified")
    pending_calls: list[tuple[str, str | None]] = []
    calls_at = 0
    for i, c in enumerate(contents):
        role = c.get("role") if isinstance(c, dict) else None
        if role not in ("user", "model"):
            raise _bad("Please use a valid role: user, model.")
        if i > 0 and contents[i - 1]["role"] == role:
            raise _bad("Please ensure that multiturn requests alternate between user and model.")
        parts = c.get("parts")
        if not isinstance(parts, list) or not parts:
            raise _bad(f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty.")
        responses: list[tuple[str, str | None]] = []
        calls: list[tuple[str, str | None]] = []
        for j, p in enumerate(parts):
            fields = [k for k in _DATA if k in p]
            if len(fields) != 1 or set(p) - set(_DATA) - {"thought", "thoughtSignature"}:
                raise _bad(f"contents[{i}].parts[{j}]: a part holds exactly one of {', '.join(_DATA[:4])}")
            field = fields[0]
            if field == "inlineData":
                data = p["inlineData"] = _proto_names(p["inlineData"])
                if data.get("mimeType") not in NATIVE_MEDIA_TYPES or \
                        sniff_base64(standard_base64(str(data.get("data", "")))) != data["mimeType"]:
                    raise _bad("Provided image is not valid.")
            elif field == "functionCall":
                if role != "model":
                    raise _bad("Please ensure that function call turns come from the model.")
                if thinking_on and p.get("thoughtSignature") != signature(p["functionCall"]):
                    raise _bad(f"Function call is missing a thought_signature in functionCall parts. This is required "
                               f"for tools to work correctly (contents[{i}].parts[{j}]).")
                calls.append((str(p["functionCall"].get("name")), _call_id(p["functionCall"])))
            elif field == "functionResponse":
                if role != "user":
                    raise _bad("Please ensure that function responses come from the user.")
                if not isinstance(p["functionResponse"].get("response"), dict):
                    raise _bad(f"contents[{i}].parts[{j}].function_response.response: must be an object")
                responses.append((str(p["functionResponse"].get("name")), _call_id(p["functionResponse"])))
        if role == "user":
            _check_responses(responses, pending_calls, i, calls_at)
        pending_calls = calls if role == "model" else []
        calls_at = i
    if contents[-1]["role"] != "user":
        raise _bad("Please ensure that single turn requests end with a user role or the role field is empty.")


def _proto_names(obj: Any) -> Any:
    """Protobuf's JSON parser takes a field's proto name as well as its lowerCamel JSON name (the
    google-genai SDK sends ``inlineData.mime_type``): the lowerCamel form."""
    if not isinstance(obj, dict):
        return obj
    return {re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k): v for k, v in obj.items()}


def standard_base64(data: str) -> str:
    """Bytes fields take standard or URL-safe base64, padded or not (protobuf's JSON mapping; the
    google-genai SDK sends URL-safe): the standard, padded form of either."""
    data = data.replace("-", "+").replace("_", "/")
    return data + "=" * (-len(data) % 4)


def _call_id(obj: dict[str, Any]) -> str | None:
    value = obj.get("id")
    return str(value) if value not in (None, "") else None


def _check_responses(responses: list[tuple[str, str | None]], calls: list[tuple[str, str | None]], at: int,
                     calls_at: int) -> None:
    """A user turn answers the previous model turn's calls: as many, by name, and by id when they carry one."""
    if responses and not calls:
        raise _bad("Please ensure that function response turn comes immediately after a function call turn.")
    if calls and len(responses) != len(calls):
        raise _bad("Please ensure that the number of function response parts is equal to the number of "
                   "function call parts of the function call turn.")
    if sorted(n for n, _ in responses) != sorted(n for n, _ in calls):
        raise _bad("Please ensure that each function response names a function call of the previous turn.")
    call_ids = [cid for _, cid in calls]
    response_ids = [rid for _, rid in responses]
    if any(cid is not None for cid in call_ids + response_ids) and \
            sorted(map(str, response_ids)) != sorted(map(str, call_ids)):
        raise _bad(f"* GenerateContentRequest.contents[{at}]: functionResponse ids {response_ids} do not match the "
                   f"functionCall ids {call_ids} of contents[{calls_at}]")


def to_openai(model: str, body: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI-form request the sim's policies read (the calls' own ids, else ids made up by position)."""
    messages: list[dict[str, Any]] = []
    system = body.get("systemInstruction")
    if system:
        messages.append({"role": "system", "content": "\n".join(p.get("text", "") for p in system["parts"])})
    open_calls: list[tuple[str, str]] = []
    for i, c in enumerate(body["contents"]):
        if c["role"] == "model":
            texts = [p["text"] for p in c["parts"] if "text" in p and not p.get("thought")]
            open_calls = [(_call_id(p["functionCall"]) or f"gcall_{i}_{j}", p["functionCall"]["name"])
                          for j, p in enumerate(c["parts"]) if "functionCall" in p]
            msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
            calls = [p["functionCall"] for p in c["parts"] if "functionCall" in p]
            if calls:
                msg["tool_calls"] = [{"id": cid, "type": "function", "function": {
                    "name": fc["name"], "arguments": orjson.dumps(fc.get("args") or {}).decode()}}
                    for (cid, _), fc in zip(open_calls, calls, strict=True)]
            messages.append(msg)
            continue
        rest: list[dict[str, Any]] = []
        tool_msgs: list[dict[str, Any]] = []
        for p in c["parts"]:
            if "functionResponse" in p:
                name = p["functionResponse"]["name"]
                rid = _call_id(p["functionResponse"])
                cid = rid if rid is not None else next((cid for cid, n in open_calls if n == name), "")
                open_calls = [(x, n) for x, n in open_calls if x != cid]
                response = p["functionResponse"]["response"]
                text = response.get("output", response.get("error", "")) if isinstance(response, dict) else ""
                tool_msgs.append({"role": "tool", "tool_call_id": cid,
                                  "content": [{"type": "text", "text": text if isinstance(text, str) else orjson.dumps(text).decode()}]})
            elif "inlineData" in p:
                url = f"data:{p['inlineData']['mimeType']};base64,{standard_base64(p['inlineData']['data'])}"
                part = {"type": "image_url", "image_url": {"url": url}}
                if tool_msgs:  # images after function responses belong to the last tool result
                    tool_msgs[-1]["content"].append(part)
                else:
                    rest.append(part)
            elif "text" in p:
                rest.append({"type": "text", "text": p["text"]})
        messages.extend(tool_msgs)
        if rest:
            messages.append({"role": "user", "content": rest})
    tools = [{"type": "function", "function": {"name": d["name"], "description": d.get("description", ""),
                                               "parameters": d.get("parameters") or {"type": "object", "properties": {}}}}
             for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []]
    out: dict[str, Any] = {"model": model, "messages": messages}
    if tools:
        out["tools"] = tools
    return out


class ImplicitCache(ItemPrefixCache):
    """Implicit caching: the longest prefix of contents this server has answered before is cached."""

    def usage(self, body: dict[str, Any]) -> tuple[int, int]:
        """(prompt tokens, cached tokens) at 4 characters a token and 258 an image."""
        return self.count([body.get("systemInstruction"), body.get("tools")], body["contents"], _content_tokens)


def _content_tokens(content: Any) -> int:
    return sum(258 if "inlineData" in p else max(1, len(orjson.dumps(p)) // 4) for p in content["parts"])


def from_reply(body: dict[str, Any], choice: dict[str, Any], usage: tuple[int, int], *,
               call_ids: bool = True) -> dict[str, Any]:
    """A generateContent response for the core's completion choice; ``call_ids``: each functionCall
    carries an ``id`` (as current models set it, and must get back in its functionResponse), else none."""
    reply = choice["message"]
    finish = {"length": "MAX_TOKENS", "content_filter": "SAFETY"}.get(str(choice.get("finish_reason")),
                                                                       "SAFETY" if reply.get("refusal") else "STOP")
    thinking_on = bool(((body.get("generationConfig") or {}).get("thinkingConfig") or {}).get("thinkingBudget"))
    parts: list[dict[str, Any]] = []
    if thinking_on:
        parts.append({"text": "Considering the images and the tools.", "thought": True})
    if reply.get("content"):
        parts.append({"text": reply["content"]})
    for k, tc in enumerate(reply.get("tool_calls") or []):
        call = {"name": tc["function"]["name"], "args": orjson.loads(tc["function"]["arguments"] or "{}")}
        if call_ids:
            seen = orjson.dumps([len(body["contents"]), k, tc])  # unique within a conversation
            call = {"id": f"call_{hashlib.sha256(seen).hexdigest()[:16]}", **call}
        part: dict[str, Any] = {"functionCall": call}
        if thinking_on:
            part["thoughtSignature"] = signature(call)
        parts.append(part)
    if not parts:
        parts.append({"text": "..."})
    prompt, cached = usage
    out_tokens = max(1, len(orjson.dumps(parts)) // 4)
    thoughts = 12 if thinking_on else 0
    meta = {"promptTokenCount": prompt, "candidatesTokenCount": out_tokens, "totalTokenCount": prompt + out_tokens + thoughts}
    if cached:
        meta["cachedContentTokenCount"] = cached
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
            "usageMetadata": meta, "modelVersion": "sim"}
