"""The sim server: a real OpenAI-compatible HTTP endpoint on loopback with scripted models.

The demo, the tests and the benchmarks all talk to it over real sockets, so the whole client
path (HTTP, retries, limits, timeouts) is exercised. Faults are injected per model.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from providers.sim.batch_api import BatchAPIs
from providers.sim.frontend import Frontend
from providers.sim.hostile import Hostile, middleware
from providers.sim.media import check_local_media
from providers.sim.native_wire import AnthropicWire, GeminiWire
from providers.sim.policies import POLICIES
from providers.sim.prefix_cache import PrefixCache, PrefixCacheModel
from providers.sim.responses_wire import ResponsesWire
from providers.sim.spec import SimModel
from providers.token_rules import SIM_IMAGE_CHARS


class SimServer:
    """Serves ``POST /v1/chat/completions`` for a set of SimModels; counts what it saw."""

    def __init__(self, models: list[SimModel], host: str = "127.0.0.1", port: int = 0, *,
                 allowed_local_media_path: str | Path | None = None,
                 prefix_cache: PrefixCacheModel | None = None, die_after: int | None = None,
                 log_requests: bool = False, ready: bool = True, die_on: str | None = None,
                 hostile: Hostile | None = None, record_arrivals: bool = False,
                 frontend: Frontend | None = None) -> None:
        self.models = {m.name: m for m in models}
        self.metrics_extra = ""
        """Lines /metrics adds to its own (``--metrics-file``: a hostile or broken server's)."""
        # Like vLLM's --allowed-local-media-path: file:// images only from under this folder.
        self.allowed_local_media_path = Path(allowed_local_media_path) if allowed_local_media_path else None
        self.local_media_images = 0
        self.bytes_in_flight = 0
        self.max_bytes_in_flight = 0
        """Request body bytes being handled at once, and the peak: what a byte budget bounds."""
        # Serving-side behaviours for the local-server supervisor's tests and the routing benchmark.
        self.cache = PrefixCache(prefix_cache) if prefix_cache is not None else None
        self.frontend = frontend or Frontend()
        """vLLM's API server processes: image preprocessing before the engine, and the TTFT in /metrics."""
        self.die_after = die_after
        self.die_on = die_on.encode() if die_on else None
        """A request whose body holds these bytes kills the server (an engine crash), every time."""
        self.log_requests = log_requests
        self.ready = ready
        self.host = host
        self.port = port
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.by_outcome: dict[str, int] = {}
        self.arrivals: list[float] | None = [] if record_arrivals else None
        """``time.monotonic()`` of each chat request, when asked for: the observed request rate."""
        self._rngs = {m.name: random.Random(m.seed) for m in models}
        self._schedules = {m.name: list(m.faults.schedule) for m in models}
        self._runner: web.AppRunner | None = None
        self._counter = 0
        self.api_keys: dict[str, str] = {}
        """Per dialect ("anthropic", "gemini", "openai"): the only key accepted; any non-empty key when unset."""
        # The native dialects see this server only as a SimCore (providers.sim.wire).
        self.anthropic_wire = AnthropicWire(self)
        self.gemini_wire = GeminiWire(self)
        self.responses_wire = ResponsesWire(self)
        self.batch_apis = BatchAPIs(self)
        self.hostile = hostile
        """Misbehaviours of the batch APIs (providers.sim.hostile), switchable while the server runs."""
        """OpenAI Files + /v1/batches, Anthropic Message Batches, Gemini batch mode (providers.sim.batch_api)."""

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024, middlewares=[middleware(lambda: self.hostile)])
        app.router.add_post("/v1/chat/completions", self.handle_chat)
        app.router.add_get("/v1/models", self.handle_models)
        app.router.add_get("/health", self.handle_health)
        app.router.add_get("/metrics", self.handle_metrics)
        app.router.add_post("/v1/messages", self.handle_anthropic)
        app.router.add_post("/v1beta/models/{model_action}", self.handle_gemini)
        app.router.add_post("/v1/responses", self.handle_responses)
        app.router.add_get("/sim/stats", self.handle_stats)
        self.batch_apis.routes(app)
        return app

    async def start(self) -> None:
        # A request still hanging (an injected "hang" whose client gave up) must not hold the
        # process for aiohttp's default 60 s at stop: nobody waits for its answer any more.
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=4096)
        await site.start()
        server = site._server
        if self.port == 0 and server is not None:
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def handle_models(self, request: web.Request) -> web.Response:
        data = {"object": "list", "data": [{"id": n, "object": "model"} for n in self.models]}
        return web.json_response(data)

    async def handle_health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.ready else 503)

    async def handle_metrics(self, request: web.Request) -> web.Response:
        running = None if self.cache is not None else self.in_flight - self.frontend.preprocessing
        text = (self.cache.metrics() if self.cache is not None else "") + self.frontend.metrics(running)
        return web.Response(text=text + self.metrics_extra, content_type="text/plain")

    async def handle_stats(self, request: web.Request) -> web.Response:
        return web.json_response({"requests": self.requests, "in_flight": self.in_flight,
                                  "max_in_flight": self.max_in_flight, "by_outcome": self.by_outcome,
                                  "max_bytes_in_flight": self.max_bytes_in_flight,
                                  "local_media_images": self.local_media_images})

    def _fault(self, model: SimModel) -> str:
        schedule = self._schedules[model.name]
        if schedule:
            return schedule.pop(0)
        f, rng = model.faults, self._rngs[model.name]
        r = rng.random()
        for name, p in (("429", f.p_429), ("500", f.p_500), ("hang", f.p_hang), ("drop", f.p_drop),
                        ("malformed", f.p_malformed)):
            if r < p:
                return name
            r -= p
        return "ok"

    async def handle_chat(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        if self.arrivals is not None:
            self.arrivals.append(time.monotonic())
        if self.die_after is not None and self.requests > self.die_after:
            print(f"sim: dying after {self.die_after} requests (as configured)", flush=True)
            os._exit(17)  # a crash mid-request: the client sees its connection drop
        if self.die_on is not None and self.die_on in await request.read():
            print("RuntimeError: sim engine killed by this request (--die-on)", file=sys.stderr, flush=True)
            os._exit(18)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        size = request.content_length or 0
        self.bytes_in_flight += size
        self.max_bytes_in_flight = max(self.max_bytes_in_flight, self.bytes_in_flight)
        try:
            return await self._chat(request)
        finally:
            self.in_flight -= 1
            self.bytes_in_flight -= size

    async def _serving_side(self, body: dict[str, Any]) -> None:
        """Prefix-cache latency, and a log line naming the trajectory (its first user turn and seed)."""
        total = hit = 0
        if self.cache is not None:
            total, hit = await self.cache.serve(body.get("messages") or [])
        if self.log_requests:
            first: dict[str, Any] = next((m for m in body.get("messages") or [] if m.get("role") == "user"), {})
            key = orjson.dumps([first.get("content"), body.get("seed")])
            traj = hashlib.blake2b(key, digest_size=6).hexdigest()
            sys.stdout.write(f"sim-request traj={traj} prompt_tokens={total} cached_tokens={hit}\n")
            sys.stdout.flush()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        arrived = time.monotonic()
        body: dict[str, Any] = orjson.loads(await request.read())
        await self.frontend.preprocess(body)
        response = await self.answer(body, request)
        self.frontend.first_token(arrived)
        return response

    async def handle_anthropic(self, request: web.Request) -> web.StreamResponse:
        """Anthropic's Messages API over the same models, faults and policies (providers.sim.native_wire)."""
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self.anthropic_wire.handle(request)
        finally:
            self.in_flight -= 1

    async def handle_gemini(self, request: web.Request) -> web.StreamResponse:
        """Gemini's generateContent over the same models, faults and policies (providers.sim.native_wire)."""
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            model, _, action = request.match_info["model_action"].partition(":")
            if action == "batchGenerateContent":
                return await self.batch_apis.gemini.create(request, model)
            return await self.gemini_wire.handle(request)
        finally:
            self.in_flight -= 1

    async def handle_responses(self, request: web.Request) -> web.StreamResponse:
        """OpenAI's Responses API over the same models, faults and policies (providers.sim.responses_wire)."""
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self.responses_wire.handle(request)
        finally:
            self.in_flight -= 1

    async def answer(self, body: dict[str, Any], request: web.Request | None) -> web.StreamResponse:
        """Faults, latency and the policy's reply for an OpenAI-form body (every dialect ends here)."""
        model = self.models.get(str(body.get("model")))
        if model is None:
            return web.json_response({"error": {"message": f"model {body.get('model')!r} not found"}}, status=404)
        local, refused = check_local_media(body, self.allowed_local_media_path)
        self.local_media_images += local
        if refused is not None:
            return web.json_response({"error": {"message": refused}}, status=400)
        if self.log_requests or self.cache is not None:
            await self._serving_side(body)
        fault = self._fault(model)
        self.by_outcome[fault] = self.by_outcome.get(fault, 0) + 1
        if model.latency_ms or model.latency_jitter_ms:
            rng = self._rngs[model.name]
            delay = max(0.0, rng.gauss(model.latency_ms, model.latency_jitter_ms)) / 1000
            await asyncio.sleep(delay)
        if fault == "429":
            return web.json_response({"error": {"message": "rate limited (sim)"}}, status=429,
                                     headers={"Retry-After": str(model.faults.retry_after_s)})
        if fault in ("500", "503", "529"):
            return web.json_response({"error": {"message": f"server error (sim {fault})"}}, status=int(fault))
        if fault in ("400", "401"):
            return web.json_response({"error": {"message": f"rejected (sim {fault})"}}, status=int(fault))
        if fault == "overflow":
            return web.json_response({"error": {"message": "This model's maximum context length is 8192 tokens"}},
                                     status=400)
        if fault == "hang":
            await asyncio.sleep(model.faults.hang_s)
        if fault == "drop":  # in a batch (no request) a dropped connection is a 500 line
            if request is not None and request.transport is not None:
                request.transport.close()
            return web.Response(status=500)
        if fault == "malformed":
            return web.Response(body=b'{"choices": [{"message": ', content_type="application/json")
        self._counter += 1
        policy = POLICIES.get(model.policy)
        if policy is None:
            return web.json_response({"error": {"message": f"unknown sim policy {model.policy!r}"}}, status=400)
        reply = policy(model, body, self._counter)
        completion = _completion(model.name, body, reply)
        if fault in _ENDINGS:  # the policy's reply, ended the way a provider can end one
            _end(completion, fault)
        return web.Response(body=orjson.dumps(completion), content_type="application/json")


_ENDINGS = frozenset({"length", "content_filter", "refusal"})


def _end(completion: dict[str, Any], fault: str) -> None:
    """``length``: cut by the output limit; ``content_filter``: stopped by a filter; ``refusal``: declined."""
    choice = completion["choices"][0]
    message = choice["message"]
    message.pop("tool_calls", None)
    if fault == "length":
        message["content"] = (message.get("content") or "")[:8]
        choice["finish_reason"] = "length"
    elif fault == "content_filter":
        message["content"] = None
        choice["finish_reason"] = "content_filter"
    else:
        message["content"] = None
        message["refusal"] = "I can't help with that."
        choice["finish_reason"] = "stop"


def _completion(name: str, body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    prompt_chars = 0
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, list):  # an image costs a fixed 256 tokens, like a tiled vision encoder
            prompt_chars += sum(SIM_IMAGE_CHARS if p.get("type") == "image_url" else len(p.get("text", "")) for p in content)
        else:
            prompt_chars += len(content or "")
    out_chars = len(reply.get("content") or "") + len(orjson.dumps(reply.get("tool_calls") or []))
    message = {"role": "assistant", "content": reply.get("content")}
    finish = "stop"
    if reply.get("tool_calls"):
        message["tool_calls"] = reply["tool_calls"]
        finish = "tool_calls"
    return {
        "id": f"simcmpl-{time.monotonic_ns()}", "object": "chat.completion", "created": int(time.time()),
        "model": name, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": max(1, out_chars // 4),
                  "total_tokens": prompt_chars // 4 + max(1, out_chars // 4)},
    }
