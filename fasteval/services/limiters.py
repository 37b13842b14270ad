"""Named limiters for external resources other than model endpoints (search APIs, page fetches).

A tool names its limiter (``Tool.limiter``); the agent loop holds a slot of it for the whole
call, so a sweep never hammers one search API with thousands of concurrent requests, and the
progress display shows each limiter's in-flight, limit and waiting counts.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fasteval.services.registry import Closer, register_service
from providers import AdaptiveLimit

_current: contextvars.ContextVar[AdaptiveLimit | None] = contextvars.ContextVar("tool_limit", default=None)


def current_limit() -> AdaptiveLimit | None:
    """The named limiter whose slot the running tool call holds (its 429s shrink that window)."""
    return _current.get()


class Limiters:
    """One AdaptiveLimit per name, created on first use with the size its first user asks for."""

    def __init__(self, sizes: dict[str, int] | None = None) -> None:
        self.sizes = dict(sizes or {})
        self._limits: dict[str, AdaptiveLimit] = {}
        self._calls: dict[str, int] = {}

    def get(self, name: str, size: int) -> AdaptiveLimit:
        lim = self._limits.get(name)
        if lim is None:
            lim = self._limits[name] = AdaptiveLimit(int(self.sizes.get(name, size)))
            self._calls[name] = 0
        return lim

    @asynccontextmanager
    async def slot(self, name: str, size: int) -> AsyncIterator[None]:
        lim = self.get(name, size)
        await lim.acquire()
        self._calls[name] += 1
        token = _current.set(lim)
        try:
            yield
        finally:
            _current.reset(token)
            lim.release()

    def rows(self) -> dict[str, dict[str, Any]]:
        """Per limiter: in_flight, limit, waiting, requests (for the progress display)."""
        return {name: {"in_flight": lim.in_flight, "limit": lim.limit, "waiting": lim.waiting,
                       "requests": self._calls[name]} for name, lim in self._limits.items()}


@register_service("limiters")
async def start_limiters(run_cfg: dict[str, Any]) -> tuple[Limiters, Closer]:
    """``run.limits: {web_search: 8, ...}`` overrides the tools' default sizes."""
    limiters = Limiters(run_cfg.get("limits"))

    async def close() -> None:
        return None

    return limiters, close
