"""Anthropic and Gemini wire formats in front of the sim's one OpenAI-form core.

A native request is validated strictly (anthropic_api / gemini_api), translated to the OpenAI
form the policies read, answered by the core (``SimCore.answer``: same faults, latency and
policies as the OpenAI endpoint) and the answer translated back, errors included, in the
provider's shape. Each dialect owns its prompt-cache model.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from providers.sim import anthropic_api, gemini_api
from providers.sim.wire import (
    Rejected,
    SimCore,
    json_response,
    lower_headers,
    read_json,
    relay,
)


class AnthropicWire:
    """``POST /v1/messages``."""

    def __init__(self, core: SimCore) -> None:
        self.core = core
        self.cache = anthropic_api.PromptCache()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await read_json(request)
            anthropic_api.validate(lower_headers(request), body, self.core.api_keys.get("anthropic"))
        except Rejected as r:
            return json_response(r.status, anthropic_api.error_body(r.status, r.kind, r.message))

        def error(status: int, message: str, resp: web.StreamResponse) -> web.StreamResponse:
            if status == 400 and "context length" in message:
                message = "prompt is too long: 210000 tokens > 200000 maximum"
            if status == 404:
                message = f"model: {body.get('model')}"
            extra = {"retry-after": resp.headers["Retry-After"]} if "Retry-After" in resp.headers else None
            return json_response(status, anthropic_api.error_body(status, anthropic_api.error_kind(status), message),
                                 extra)

        def reply(choice: dict[str, Any]) -> web.StreamResponse:
            return json_response(200, orjson.dumps(anthropic_api.from_reply(body, choice, self.cache.usage(body))))

        return await relay(self.core, anthropic_api.to_openai(body), request, error, reply)


class GeminiWire:
    """``POST /v1beta/models/{model}:generateContent``."""

    def __init__(self, core: SimCore) -> None:
        self.core = core
        self.cache = gemini_api.ImplicitCache()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        model, _, action = request.match_info["model_action"].partition(":")
        if action != "generateContent":
            return json_response(404, gemini_api.error_body(404, f"unknown method {action!r}"))
        try:
            body = await read_json(request, "INVALID_ARGUMENT")
            gemini_api.validate(lower_headers(request), body, self.core.api_keys.get("gemini"))
        except Rejected as r:
            return json_response(r.status, gemini_api.error_body(r.status, r.message))

        def error(status: int, message: str, resp: web.StreamResponse) -> web.StreamResponse:
            if status == 400 and "context length" in message:
                message = "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576)."
            if status == 529:
                status = 503
            delay = float(resp.headers["Retry-After"]) if status == 429 and "Retry-After" in resp.headers else None
            return json_response(status, gemini_api.error_body(status, message, retry_delay_s=delay))

        def reply(choice: dict[str, Any]) -> web.StreamResponse:
            sim_model = self.core.models.get(model)
            call_ids = bool(sim_model.options.get("call_ids", True)) if sim_model is not None else True
            out = gemini_api.from_reply(body, choice, self.cache.usage(body), call_ids=call_ids)
            return json_response(200, orjson.dumps(out))

        return await relay(self.core, gemini_api.to_openai(model, body), request, error, reply)
