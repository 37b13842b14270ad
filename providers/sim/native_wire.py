"""Anthropic and Gemini wire formats in front of the sim's one OpenAI-form core.

A native request is validated strictly (anthropic_api / gemini_api), translated to the OpenAI
form the policies read, answered by ``SimServer._answer`` (same faults, latency and policies as
the OpenAI endpoint) and the answer translated back, errors included, in the provider's shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from providers.sim import anthropic_api, gemini_api
from providers.sim.anthropic_api import Rejected

if TYPE_CHECKING:
    from providers.sim.server import SimServer


def new_caches() -> dict[str, Any]:
    return {"anthropic": anthropic_api.PromptCache(), "gemini": gemini_api.ImplicitCache()}


def _json(status: int, body: bytes, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


async def _read(request: web.Request) -> Any:
    try:
        return orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        raise Rejected(400, "invalid_request_error", "request body is not valid JSON") from None


def _reply(resp: web.StreamResponse) -> dict[str, Any] | None:
    """The policy's assistant message from the core's completion, or None when it is not one."""
    if not isinstance(resp, web.Response) or resp.status != 200 or not isinstance(resp.body, bytes):
        return None
    try:
        message: dict[str, Any] = orjson.loads(resp.body)["choices"][0]["message"]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        return None
    return message


def _core_error(resp: web.StreamResponse) -> tuple[int, str]:
    message = ""
    if isinstance(resp, web.Response) and isinstance(resp.body, bytes):
        try:
            message = str(orjson.loads(resp.body)["error"]["message"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            message = ""
    return resp.status, message


async def anthropic(server: SimServer, request: web.Request) -> web.StreamResponse:
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        body = await _read(request)
        anthropic_api.validate(headers, body, server.api_keys.get("anthropic"))
    except Rejected as r:
        return _json(r.status, anthropic_api.error_body(r.status, r.kind, r.message))
    resp = await server._answer(anthropic_api.to_openai(body), request)
    reply = _reply(resp)
    if reply is None:
        if resp.status == 200:
            return resp  # a malformed body or a dropped connection: passed through as the fault
        status, message = _core_error(resp)
        if status == 400 and "context length" in message:
            message = "prompt is too long: 210000 tokens > 200000 maximum"
        if status == 404:
            message = f"model: {body.get('model')}"
        extra = {"retry-after": resp.headers["Retry-After"]} if "Retry-After" in resp.headers else None
        return _json(status, anthropic_api.error_body(status, anthropic_api.error_kind(status), message), extra)
    usage = server.prompt_cache["anthropic"].usage(body)
    return _json(200, orjson.dumps(anthropic_api.from_reply(body, reply, usage)))


async def gemini(server: SimServer, request: web.Request) -> web.StreamResponse:
    model, _, action = request.match_info["model_action"].partition(":")
    if action == "batchGenerateContent":
        return await server.batch_apis.gemini_create(request, model)
    if action != "generateContent":
        return _json(404, gemini_api.error_body(404, f"unknown method {action!r}"))
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        body = await _read(request)
        gemini_api.validate(headers, body, server.api_keys.get("gemini"))
    except Rejected as r:
        return _json(r.status, gemini_api.error_body(r.status, r.message))
    resp = await server._answer(gemini_api.to_openai(model, body), request)
    reply = _reply(resp)
    if reply is None:
        if resp.status == 200:
            return resp
        status, message = _core_error(resp)
        if status == 400 and "context length" in message:
            message = "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576)."
        if status == 529:
            status = 503
        delay = float(resp.headers["Retry-After"]) if status == 429 and "Retry-After" in resp.headers else None
        return _json(status, gemini_api.error_body(status, message, retry_delay_s=delay))
    usage = server.prompt_cache["gemini"].usage(body)
    return _json(200, orjson.dumps(gemini_api.from_reply(body, reply, usage)))
