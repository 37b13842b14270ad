"""Routing a served model's requests across its replicas, and moving them off a dead one.

Sticky-least-loaded (the default): every request of a trajectory goes to the replica that holds
its prefix cache; a new trajectory goes to the replica with the fewest trajectories in flight.
The trajectory is the job's (``fasteval.core.job``: the job runner opens its context around each
job, so nothing in the agent loop changes); the replica a router pins the job to is kept on that
context and let go when the job ends. Outside a job, requests are keyed by their first user message. ``least_loaded`` and ``round_robin`` route each request on its own (for the
routing benchmark). With ``admission: kv`` each replica's window of in-flight requests follows
its ``/metrics``: shrink while requests wait or the KV cache is nearly full, grow while it is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import aiohttp
import orjson

from fasteval.core.job import JobContext, current_job
from providers.base import Capabilities, ChatRequest, ChatResponse, Provider, ProviderError
from providers.breaker import EndpointDown
from providers.local.metrics import parse_metrics, read_metrics
from providers.local.supervisor import Replica, ServerGroup

__all__ = ["RoutedProvider", "Router", "parse_metrics"]


@dataclass(slots=True, eq=False)
class Route:
    """A replica as the router sees it: its load, its admission window and its HTTP client."""

    replica: Replica
    trajectories: int = 0
    in_flight: int = 0
    sent: int = 0
    window: int | None = None
    provider: Provider | None = None
    generation: int = 0
    kv_usage: float = 0.0
    waiting: int = 0
    alone: int = 0
    """Requests waiting to run alone on this replica (suspects of a crash): nothing new starts meanwhile."""
    exclusive: bool = False

    def has_room(self) -> bool:
        return not self.alone and not self.exclusive and (self.window is None or self.in_flight < self.window)

    def unpin(self) -> None:
        """A job pinned here ended (``JobContext.close``): one trajectory fewer on this replica."""
        self.trajectories -= 1


class Router:
    """Chooses a replica per request; waits while none is ready; EndpointDown when none is left."""

    def __init__(self, group: ServerGroup, make_provider: Callable[[str], Provider], *, policy: str = "sticky",
                 admission: str | None = None, initial_window: int = 32, poll_s: float = 0.5) -> None:
        self.group = group
        self.make_provider = make_provider
        self.policy = policy
        self.admission = admission
        self.routes = [Route(r, window=initial_window if admission == "kv" else None) for r in group.replicas]
        self.moved = 0
        self._rr = 0
        self._room = asyncio.Condition()
        self._stale: list[Provider] = []
        self._loose: OrderedDict[str, Route] = OrderedDict()  # requests without a trajectory context
        self._poll_s = poll_s
        self._poller: asyncio.Task[None] | None = None

    def _route_for(self, replica: Replica) -> Route:
        route = next(r for r in self.routes if r.replica is replica)
        if route.provider is None or route.generation != replica.generation:
            if route.provider is not None:
                self._stale.append(route.provider)
            route.provider = self.make_provider(replica.base_url)
            route.generation = replica.generation
        return route

    async def acquire(self, request: ChatRequest, *, alone: bool = False) -> Route:
        """The route for this request, counted as in flight until ``release``.

        ``alone``: the request runs with nothing else in flight on its replica (a request that was
        in flight when the server died is re-sent so, and a second death then is surely its own).
        """
        if self.admission == "kv" and self._poller is None:
            self._poller = asyncio.create_task(self._poll())
        job = current_job()
        waiting_on: Route | None = None
        try:
            while True:
                ready = await self.group.wait_ready()
                route = self._choose(ready, job, request)
                if alone and route is not waiting_on:
                    if waiting_on is not None:
                        waiting_on.alone -= 1
                    route.alone += 1
                    waiting_on = route
                if (route.in_flight == 0 and not route.exclusive) if alone else route.has_room():
                    route.in_flight += 1
                    route.replica.outstanding += 1
                    route.sent += 1
                    route.exclusive = alone
                    return route
                async with self._room:  # no room: wait for a release or the next metrics poll
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._room.wait(), self._poll_s)
        finally:
            if waiting_on is not None:
                waiting_on.alone -= 1

    def _choose(self, ready: list[Replica], job: JobContext | None, request: ChatRequest) -> Route:
        routes = [self._route_for(r) for r in ready]
        if self.policy == "round_robin":
            self._rr += 1
            return routes[self._rr % len(routes)]
        if self.policy == "least_loaded":
            return min(routes, key=lambda r: (r.in_flight, r.sent))
        # a job's pin under this router's id is always one of its routes
        pinned = cast(Route | None, job.pins.get(id(self))) if job is not None else self._loose.get(_loose_key(request))
        if pinned is not None and pinned in routes:
            return pinned
        if pinned is not None:  # its replica is down or restarting: the trajectory moves
            self.moved += 1
            pinned.trajectories -= 1
        roomy = [r for r in routes if r.has_room()] or routes
        route = min(roomy, key=lambda r: (r.trajectories, r.in_flight, r.sent))
        route.trajectories += 1
        if job is not None:
            job.pins[id(self)] = route
        else:
            key = _loose_key(request)
            self._loose[key] = route
            if len(self._loose) > 100_000:
                old = self._loose.popitem(last=False)[1]
                old.trajectories -= 1
        return route

    async def release(self, route: Route) -> None:
        route.in_flight -= 1
        route.replica.outstanding -= 1
        route.exclusive = False
        if self.admission == "kv" or route.alone:
            async with self._room:
                self._room.notify_all()

    async def _poll(self) -> None:
        """KV admission: AIMD on each replica's window from its Prometheus metrics."""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while True:
                await asyncio.sleep(self._poll_s)
                for route in self.routes:
                    if not route.replica.ready.is_set():
                        continue
                    m = await read_metrics(session, f"http://{route.replica.host}:{route.replica.port}/metrics")
                    if m is None:
                        continue
                    route.waiting = int(m.get("vllm:num_requests_waiting", 0))
                    route.kv_usage = m.get("vllm:kv_cache_usage_perc", m.get("vllm:gpu_cache_usage_perc", 0.0))
                    running = int(m.get("vllm:num_requests_running", 0))
                    window = route.window or 1
                    if route.waiting > 0:  # the server queues: hold back to what it runs at once
                        route.window = max(1, running)
                    elif route.kv_usage > 0.95:  # near preemption: back off
                        route.window = max(1, int(window * 0.9))
                    elif route.kv_usage < 0.8 and route.in_flight >= window - 1:  # room left: grow
                        route.window = window + max(1, window // 8)
                async with self._room:
                    self._room.notify_all()

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        for p in self._stale + [r.provider for r in self.routes if r.provider is not None]:
            await p.close()

    def stats(self) -> dict[str, Any]:
        return {"moved": self.moved, "by_replica": {r.replica.label: {"sent": r.sent, "window": r.window}
                                                    for r in self.routes}}


def _loose_key(request: ChatRequest) -> str:
    first = next((m for m in request.messages if m.get("role") == "user"), {})
    return hashlib.blake2b(orjson.dumps([first.get("content"), request.seed]), digest_size=8).hexdigest()


def _connection_lost(e: ProviderError) -> bool:
    return (e.kind in ("transient", "timeout") and e.status is None) or e.status in (500, 502, 503)


CRASHES_BEFORE_BLAME = 2
"""Server deaths under one request while it ran alone on its replica that make it their cause."""
_DEATH_WAIT_S = 5.0


async def _died(replica: Replica) -> bool:
    """After a failed request: is the server dead or dying? (vLLM answers 500 as its engine dies
    and exits a moment later, so a 500 is given a few seconds to turn into a death.)"""
    deadline = asyncio.get_running_loop().time() + _DEATH_WAIT_S
    while True:
        if not await replica.healthy():
            return True
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.5)


class RoutedProvider(Provider):
    """A served model as one provider: routes, and re-sends a request whose replica went down.

    A request that failed because its server died is sent again (to another replica, or to the
    same one once restarted) without counting as a retry: the job goes on as if nothing happened.
    A request in flight when its server died is re-sent alone on its replica; should the server die
    under it twice so, it is taken for the cause (a request that kills the engine, such as vLLM's CPU
    build on a seeded sampled chunked prefill): it fails as its own job's error, with the server
    log's last error, is not sent again, and its deaths do not use up the restarts that every
    other job needs.
    """

    def __init__(self, router: Router, endpoint_name: str, *, tool_message_images: bool = False) -> None:
        self.router = router
        self._endpoint = endpoint_name
        self._tool_message_images = tool_message_images

    def endpoint_id(self) -> str:
        return self._endpoint

    def default_capabilities(self) -> Capabilities:
        return Capabilities(tool_result_images=self._tool_message_images,
                            max_images=self.router.group.spec.images_per_prompt)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        spec = self.router.group.spec
        deaths = alone_deaths = 0
        for _ in range((spec.max_restarts + 2 + CRASHES_BEFORE_BLAME) * spec.replicas):
            alone = deaths > 0
            route = await self.router.acquire(request, alone=alone)
            try:
                assert route.provider is not None
                return await route.provider.chat(request)
            except ProviderError as e:
                if not _connection_lost(e) or not await _died(route.replica):
                    raise
                deaths += 1
                cause = route.replica.log_error()
                said = f"; server log: {cause}" if cause else ""
                if alone:  # it ran alone: this death is the request's, not the server's, and costs no restart
                    alone_deaths += 1
                    route.replica.refund_restarts(1)
                if alone_deaths >= CRASHES_BEFORE_BLAME:
                    route.replica.refund_restarts(1)  # the first death, among others, was its too
                    route.replica.report_unhealthy(f"a request took the server down ({e}){said}")
                    raise ProviderError("fatal", f"this request took the server {route.replica.label} down "
                                                 f"{deaths} times (the last {alone_deaths} alone on it); "
                                                 f"not sent again{said}", status=e.status) from None
                route.replica.report_unhealthy(f"a request failed ({e}){said}")
            finally:
                await self.router.release(route)
        raise EndpointDown(spec.name, "requests kept failing on restarted servers")

    async def close(self) -> None:
        await self.router.close()
