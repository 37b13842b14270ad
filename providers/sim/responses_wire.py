"""OpenAI's Responses API in front of the sim's one OpenAI-form core (providers.sim.responses_api).

Sim models answer as reasoning models on this wire unless their entry says ``reasoning: false``:
they return reasoning items, refuse ``temperature``/``top_p`` and require their reasoning items
back. A rate limit comes with OpenAI's ``x-ratelimit-*`` headers and no ``Retry-After``.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from providers.sim import responses_api
from providers.sim.wire import (
    Rejected,
    SimCore,
    core_choice,
    core_error,
    json_response,
    lower_headers,
    read_json,
    relay,
)


class ResponsesWire:
    """``POST /v1/responses``."""

    def __init__(self, core: SimCore) -> None:
        self.core = core
        self.cache = responses_api.PromptCache()

    def _reasoning(self, model: object) -> bool:
        sim_model = self.core.models.get(str(model))
        return bool(sim_model.options.get("reasoning", True)) if sim_model is not None else True

    def _summaries(self, model: object) -> bool:
        """``summaries: false``: an organisation not verified for reasoning summaries (OpenAI refuses them)."""
        sim_model = self.core.models.get(str(model))
        return bool(sim_model.options.get("summaries", True)) if sim_model is not None else True

    async def batch_answer(self, body: Any) -> tuple[int, Any]:
        """One ``/v1/responses`` line of a Batch API input: (status, the body the interactive API
        would answer), validated as the interactive endpoint validates (the batch carries no key)."""
        try:
            reasoning = self._reasoning(body.get("model") if isinstance(body, dict) else None)
            responses_api.validate({"authorization": "Bearer batch"}, body, None, reasoning_model=reasoning)
        except Rejected as r:
            return r.status, orjson.loads(responses_api.rejection_body(r))
        resp = await self.core.answer(responses_api.to_openai(body), None)
        choice = core_choice(resp)
        if choice is None:
            status, message = core_error(resp) if resp.status != 200 else (500, "the sim dropped the answer")
            return status, orjson.loads(responses_api.core_error_body(status, message))
        return 200, responses_api.from_reply(body, choice, self.cache.usage(body), reasoning_model=reasoning)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await read_json(request)
            reasoning = self._reasoning(body.get("model") if isinstance(body, dict) else None)
            responses_api.validate(lower_headers(request), body, self.core.api_keys.get("openai"),
                                   reasoning_model=reasoning)
            if not self._summaries(body.get("model")) and (body.get("reasoning") or {}).get("summary"):
                raise responses_api.unverified_summary()
        except Rejected as r:
            return json_response(r.status, responses_api.rejection_body(r))

        def error(status: int, message: str, resp: web.StreamResponse) -> web.StreamResponse:
            headers = None
            if status == 429 and "Retry-After" in resp.headers:
                headers = {"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "0",
                           "x-ratelimit-reset-requests": f"{float(resp.headers['Retry-After']) * 1000:g}ms",
                           "x-ratelimit-remaining-tokens": "150000", "x-ratelimit-reset-tokens": "6m0s"}
            if status == 404:
                message = f"The model '{body.get('model')}' does not exist or you do not have access to it."
            return json_response(status, responses_api.core_error_body(status, message), headers)

        def reply(choice: dict[str, Any]) -> web.StreamResponse:
            out = responses_api.from_reply(body, choice, self.cache.usage(body), reasoning_model=reasoning)
            return json_response(200, orjson.dumps(out))

        return await relay(self.core, responses_api.to_openai(body), request, error, reply)
