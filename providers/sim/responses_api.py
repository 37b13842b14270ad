"""The sim's OpenAI Responses API dialect: ``POST /v1/responses``, validated as strictly as the real one.

Written from OpenAI's public API reference and its reasoning and function-calling guides: a
Bearer key; known top-level parameters only (``seed`` is not one); ``instructions`` a string;
input ``message`` items whose user parts are ``input_text``/``input_image`` (a data URL whose
bytes match its type) and whose assistant content is ``output_text``/``refusal`` or a plain
string (an image or ``input_text`` there is refused); ``function_call_output`` items with a
``call_id`` that an earlier ``function_call`` made, and every call answered; function tools whose
``strict`` is explicit or, omitted, normalised to strict mode and checked as such; for reasoning
models no ``temperature``/``top_p``, and a ``function_call`` sent back with its id only together
with the reasoning item it came with, whose ``encrypted_content`` must verify (``store: false``
keeps nothing on the server). Errors use the API's shape (``message``, ``type``, ``param``,
``code``); replies are Response objects with reasoning items, usage with cached and reasoning
tokens, and ``incomplete_details`` when the output limit cuts a reply.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from typing import Any

import orjson

from providers.sim.wire import ItemPrefixCache, Rejected
from providers.wire_images import NATIVE_MEDIA_TYPES, sniff_base64

TOP_LEVEL = frozenset({"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "store",
                       "include", "reasoning", "max_output_tokens", "temperature", "top_p", "metadata",
                       "service_tier", "truncation", "prompt_cache_key", "safety_identifier", "user", "text",
                       "top_logprobs", "max_tool_calls", "previous_response_id", "stream", "background",
                       "conversation", "prompt"})
INCLUDABLE = frozenset({"reasoning.encrypted_content", "message.input_image.image_url", "message.output_text.logprobs",
                        "file_search_call.results", "web_search_call.action.sources", "code_interpreter_call.outputs",
                        "computer_call_output.output.image_url"})
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_SECRET = b"fasteval-sim-responses"
_USER_PARTS = frozenset({"input_text", "input_image", "input_file"})
_ASSISTANT_PARTS = frozenset({"output_text", "refusal"})
_CODES = {401: ("invalid_request_error", "invalid_api_key"), 404: ("invalid_request_error", "model_not_found"),
          429: ("requests", "rate_limit_exceeded"), 500: ("server_error", "server_error"),
          503: ("server_error", "server_is_overloaded")}


def error_body(message: str, kind: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": kind, "param": param, "code": code}})


def core_error_body(status: int, message: str) -> bytes:
    kind, code = _CODES.get(status, ("invalid_request_error", None))
    if status == 400 and "context length" in message:
        message, code = ("Your input exceeds the context window of this model. Please adjust your input and try "
                         "again."), "context_length_exceeded"
    return error_body(message, kind, None, code)


def _bad(message: str, param: str | None = None, code: str | None = "invalid_value") -> Rejected:
    return Rejected(400, "invalid_request_error", message, param, code)


def unverified_summary() -> Rejected:
    """What OpenAI answers a reasoning summary request from an unverified organisation (as users report it)."""
    return Rejected(400, "invalid_request_error", "Your organization must be verified to generate reasoning "
                    "summaries. Please go to: https://platform.openai.com/settings/organization/general and click on "
                    "Verify Organization. If you just verified, it can take up to 15 minutes for access to "
                    "propagate.", "reasoning.summary", "unsupported_value")


def rejection_body(r: Rejected) -> bytes:
    return error_body(r.message, r.kind, r.param, r.code)


def encrypted(item_id: str) -> str:
    """The sim's 'encrypted' reasoning: a MAC over the item id (opaque to clients, checked on return)."""
    return "gAAAA" + hmac.new(_SECRET, item_id.encode(), hashlib.sha256).hexdigest()


def validate(headers: dict[str, str], body: Any, api_key: str | None, *, reasoning_model: bool) -> None:
    """Raise Rejected for anything ``POST /v1/responses`` would reject."""
    auth = headers.get("authorization", "")
    if not auth.startswith("Bearer ") or not auth[7:].strip():
        raise Rejected(401, "invalid_request_error", "You didn't provide an API key. You need to provide your API "
                       "key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
    if api_key is not None and auth[7:].strip() != api_key:
        raise Rejected(401, "invalid_request_error", "Incorrect API key provided.", None, "invalid_api_key")
    if not isinstance(body, dict):
        raise _bad("We could not parse the JSON body of your request.", None, "invalid_json")
    for k in body:
        if k not in TOP_LEVEL:
            raise _bad(f"Unknown parameter: '{k}'.", k, "unknown_parameter")
    if not isinstance(body.get("model"), str):
        raise _bad("Missing required parameter: 'model'.", "model", "missing_required_parameter")
    if reasoning_model:
        for k in ("temperature", "top_p"):
            if k in body:
                raise _bad(f"Unsupported parameter: '{k}' is not supported with this model.", k,
                           "unsupported_parameter")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _bad(f"Invalid type for 'instructions': expected a string, but got {_type(instructions)} instead.",
                   "instructions", "invalid_type")
    for i, inc in enumerate(body.get("include") or []):
        if inc not in INCLUDABLE:
            raise _bad(f"Invalid value: '{inc}'.", f"include[{i}]")
    reasoning = body.get("reasoning")
    if reasoning is not None:
        if not isinstance(reasoning, dict) or set(reasoning) - {"effort", "summary", "generate_summary"}:
            raise _bad("Invalid 'reasoning': expected an object with effort and summary.", "reasoning", "invalid_type")
        if reasoning.get("effort") is not None and reasoning["effort"] not in EFFORTS:
            raise _bad(f"Invalid value: '{reasoning['effort']}'. Supported values are: 'low', 'medium', and 'high'.",
                       "reasoning.effort")
        if reasoning.get("summary") not in (None, "auto", "concise", "detailed"):
            raise _bad(f"Invalid value: '{reasoning['summary']}'.", "reasoning.summary")
    _validate_tools(body.get("tools"))
    items = body.get("input")
    if isinstance(items, str):
        return
    if not isinstance(items, list) or not items:
        raise _bad("Missing required parameter: 'input'.", "input", "missing_required_parameter")
    _validate_input(items, stored=body.get("store", True) is not False)


def _type(value: Any) -> str:
    return {list: "an array", dict: "an object", int: "an integer", float: "a number", bool: "a boolean"}.get(
        type(value), "a string")


def _validate_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise _bad("Invalid type for 'tools': expected an array.", "tools", "invalid_type")
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or t.get("type") != "function":
            raise _bad(f"Invalid value: '{t.get('type') if isinstance(t, dict) else t}'.", f"tools[{i}].type")
        extra = set(t) - {"type", "name", "description", "parameters", "strict"}
        if extra:
            raise _bad(f"Unknown parameter: 'tools[{i}].{sorted(extra)[0]}'.", f"tools[{i}].{sorted(extra)[0]}",
                       "unknown_parameter")
        if not _TOOL_NAME.match(str(t.get("name", ""))):
            raise _bad(f"Invalid 'tools[{i}].name': string does not match pattern '^[a-zA-Z0-9_-]+$'.",
                       f"tools[{i}].name", "invalid_value")
        params = t.get("parameters")
        if params is not None and (not isinstance(params, dict) or params.get("type") != "object"):
            raise _bad(f"Invalid schema for function '{t['name']}': schema must be a JSON Schema of 'type: \"object\"'.",
                       f"tools[{i}].parameters", "invalid_function_parameters")
        if t.get("strict", True):  # an omitted strict is strict mode
            _strict_schema(params or {"type": "object", "properties": {}}, str(t["name"]), f"tools[{i}].parameters", ())


def _strict_schema(schema: dict[str, Any], name: str, param: str, context: tuple[str, ...]) -> None:
    if schema.get("type") != "object":
        items = schema.get("items")
        if isinstance(items, dict):
            _strict_schema(items, name, param, (*context, "items"))
        return
    where = f"In context=({', '.join(repr(c) for c in context)})"
    if schema.get("additionalProperties") is not False:
        raise _bad(f"Invalid schema for function '{name}': {where}, 'additionalProperties' is required to be "
                   "supplied and to be false.", param, "invalid_function_parameters")
    props = schema.get("properties") or {}
    missing = [k for k in props if k not in (schema.get("required") or [])]
    if missing:
        raise _bad(f"Invalid schema for function '{name}': {where}, 'required' is required to be supplied and to be "
                   f"an array including every key in properties. Missing '{missing[0]}'.", param,
                   "invalid_function_parameters")
    for key, sub in props.items():
        if isinstance(sub, dict):
            _strict_schema(sub, name, param, (*context, "properties", key))


def _validate_image(part: dict[str, Any], param: str) -> None:
    url = part.get("image_url")
    if not isinstance(url, str) or not url.startswith("data:"):
        if part.get("file_id"):
            return
        raise _bad("Invalid image URL: expected a base64-encoded data URL with an image MIME type.", param,
                   "invalid_image_url")
    head, _, data = url.partition(",")
    mime = head[5:].removesuffix(";base64")
    if mime not in NATIVE_MEDIA_TYPES or sniff_base64(data) != mime:
        raise _bad("The image data you provided does not represent a valid image.", param, "invalid_image_format")
    if part.get("detail") not in (None, "auto", "low", "high", "original"):
        raise _bad(f"Invalid value: '{part['detail']}'.", f"{param}.detail")


def _validate_parts(content: Any, role: str, param: str) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _bad(f"Invalid type for '{param}': expected a string or an array.", param, "invalid_type")
    allowed = _ASSISTANT_PARTS if role == "assistant" else _USER_PARTS
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in allowed:
            supported = "'output_text' and 'refusal'" if role == "assistant" else \
                "'input_text', 'input_image', and 'input_file'"
            raise _bad(f"Invalid value: '{kind}'. Supported values are: {supported}.", f"{param}[{j}]")
        if kind == "input_image":
            _validate_image(part, f"{param}[{j}]")


def _validate_input(items: list[Any], *, stored: bool) -> None:
    calls: dict[str, int] = {}
    answered: set[str] = set()
    reasoning_ids: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _bad(f"Invalid type for 'input[{i}]': expected an object.", f"input[{i}]", "invalid_type")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise _bad(f"Invalid value: '{role}'. Supported values are: 'assistant', 'system', 'developer', and "
                           "'user'.", f"input[{i}].role")
            _validate_parts(item.get("content"), str(role), f"input[{i}].content")
        elif kind == "reasoning":
            rid = str(item.get("id", ""))
            if item.get("encrypted_content") is None and not stored:
                raise Rejected(404, "invalid_request_error", f"Item with id '{rid}' not found. Items are not persisted "
                               "when `store` is set to false. Try again with `store` set to true, or remove this "
                               "item from your input.", "input")
            if item.get("encrypted_content") is not None and item["encrypted_content"] != encrypted(rid):
                raise _bad(f"The encrypted content for item {rid} could not be verified.", f"input[{i}]",
                           "invalid_encrypted_content")
            if i + 1 >= len(items):
                raise _bad(f"Item '{rid}' of type 'reasoning' was provided without its required following item.",
                           "input", None)
            reasoning_ids.add(rid)
        elif kind == "function_call":
            cid = item.get("call_id")
            if not isinstance(cid, str) or not cid:
                raise _bad(f"Missing required parameter: 'input[{i}].call_id'.", f"input[{i}].call_id",
                           "missing_required_parameter")
            fid = item.get("id")
            if isinstance(fid, str) and fid.startswith("fc_"):
                needed = "rs_" + fid[3:].rsplit("_", 1)[0]
                if needed not in reasoning_ids:
                    raise _bad(f"Item '{fid}' of type 'function_call' was provided without its required 'reasoning' "
                               f"item: '{needed}'.", "input", None)
            calls[cid] = i
        elif kind == "function_call_output":
            cid = item.get("call_id")
            if not isinstance(cid, str) or not cid:  # required by the API reference (optional in some SDK types)
                raise _bad(f"Missing required parameter: 'input[{i}].call_id'.", f"input[{i}].call_id",
                           "missing_required_parameter")
            if cid not in calls:
                raise _bad(f"No tool call found for function call output with call_id {cid}.", "input", None)
            output = item.get("output")
            if not isinstance(output, str):
                _validate_parts(output, "user", f"input[{i}].output")
            answered.add(cid)
        else:
            raise _bad(f"Invalid value: '{kind}'.", f"input[{i}].type")
    for cid in calls:
        if cid not in answered:
            raise _bad(f"No tool output found for function call {cid}.", "input", None)


def to_openai(body: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI-chat form of a valid request, which the sim's policies read."""
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body["input"] if isinstance(body["input"], list) else [{"role": "user", "content": body["input"]}]
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": "system" if item["role"] == "developer" else item["role"],
                             "content": _chat_parts(item["content"])})
        elif kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last.get("tool_calls") is not None:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item["output"]
            messages.append({"role": "tool", "tool_call_id": item["call_id"],
                             "content": [{"type": "text", "text": output}] if isinstance(output, str)
                             else _chat_parts(output)})
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                               "parameters": t.get("parameters") or {"type": "object", "properties": {}}}}
             for t in body.get("tools") or []]
    out: dict[str, Any] = {"model": body["model"], "messages": messages}
    if tools:
        out["tools"] = tools
    return out


def _chat_parts(content: Any) -> Any:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for p in content:
        if p["type"] in ("input_text", "output_text"):
            parts.append({"type": "text", "text": p["text"]})
        elif p["type"] == "input_image" and p.get("image_url"):
            parts.append({"type": "image_url", "image_url": {"url": p["image_url"]}})
        elif p["type"] == "refusal":
            parts.append({"type": "text", "text": p.get("refusal", "")})
    return parts


class PromptCache(ItemPrefixCache):
    """Automatic prefix caching: input items seen before (in order, from the start) are cached tokens."""

    def usage(self, body: dict[str, Any]) -> tuple[int, int]:
        """(input tokens, cached tokens) at 4 characters a token and 256 an image."""
        items = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return self.count([body.get("instructions"), body.get("tools")], items, _item_tokens)


def _item_tokens(item: Any) -> int:
    images = orjson.dumps(item).count(b'"input_image"')
    return 256 * images + max(1, len(orjson.dumps(item)) // 4 if not images else 8)


def from_reply(body: dict[str, Any], choice: dict[str, Any], usage: tuple[int, int], *,
               reasoning_model: bool) -> dict[str, Any]:
    """A Response object for the core's completion choice (its message and finish reason)."""
    reply = choice["message"]
    tag = hashlib.sha256(orjson.dumps([len(body["input"]), reply], option=orjson.OPT_SORT_KEYS)).hexdigest()[:24]
    output: list[dict[str, Any]] = []
    reasoning_tokens = 0
    effort = (body.get("reasoning") or {}).get("effort") or "medium"
    if reasoning_model and effort != "none":
        reasoning_tokens = {"minimal": 8, "low": 32, "medium": 64, "high": 128, "xhigh": 256}.get(effort, 64)
        item: dict[str, Any] = {"type": "reasoning", "id": f"rs_{tag}", "summary": []}
        if (body.get("reasoning") or {}).get("summary"):
            item["summary"] = [{"type": "summary_text", "text": f"**Planning** Reading {len(body['input'])} items "
                                                                 "and deciding on the next tool."}]
        if "reasoning.encrypted_content" in (body.get("include") or []):
            item["encrypted_content"] = encrypted(item["id"])
        output.append(item)
    limit = body.get("max_output_tokens")
    cut = choice.get("finish_reason") == "length" or (isinstance(limit, int) and limit <= reasoning_tokens)
    status, incomplete = "completed", None
    if cut:
        status, incomplete = "incomplete", {"reason": "max_output_tokens"}
    elif choice.get("finish_reason") == "content_filter":
        status, incomplete = "incomplete", {"reason": "content_filter"}
    elif reply.get("refusal"):
        output.append({"type": "message", "id": f"msg_{tag}", "status": "completed", "role": "assistant",
                       "content": [{"type": "refusal", "refusal": reply["refusal"]}]})
    else:
        if reply.get("content"):
            output.append({"type": "message", "id": f"msg_{tag}", "status": "completed", "role": "assistant",
                           "content": [{"type": "output_text", "text": reply["content"], "annotations": []}]})
        for k, tc in enumerate(reply.get("tool_calls") or []):
            output.append({"type": "function_call", "id": f"fc_{tag}_{k}", "call_id": f"call_{tag[:12]}{k}",
                           "name": tc["function"]["name"], "arguments": tc["function"]["arguments"] or "{}",
                           "status": "completed"})
    prompt, cached = usage
    visible = max(1, len(orjson.dumps([o for o in output if o["type"] != "reasoning"])) // 4)
    out_tokens = visible + reasoning_tokens
    return {"id": f"resp_{tag}", "object": "response", "created_at": int(time.time()), "status": status,
            "error": None, "incomplete_details": incomplete, "instructions": body.get("instructions"),
            "max_output_tokens": limit, "model": body["model"], "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True), "previous_response_id": None,
            "reasoning": {"effort": effort if reasoning_model else None,
                          "summary": (body.get("reasoning") or {}).get("summary")},
            "temperature": body.get("temperature", 1.0),
            "text": {"format": {"type": "text"}}, "tool_choice": body.get("tool_choice", "auto"),
            "tools": [{"type": "function", "name": t["name"], "description": t.get("description"),
                       "parameters": t.get("parameters"), "strict": t.get("strict", True)}
                      for t in body.get("tools") or []],
            "top_p": body.get("top_p", 1.0), "truncation": "disabled",
            "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
                      "output_tokens": out_tokens, "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
                      "total_tokens": prompt + out_tokens},
            "metadata": body.get("metadata") or {}}
