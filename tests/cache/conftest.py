"""Shared fixtures: a loopback upstream and an open cache in tmp_path."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from cache import Cache
from tests.cache.cache_upstream import Upstream


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    calls: Counter[str] = Counter()
    fail: set[str] = set()

    async def handle(request: web.Request) -> web.Response:
        q = request.query["q"]
        calls[q] += 1
        await asyncio.sleep(0.02)  # long enough that concurrent callers overlap
        if q in fail:
            return web.Response(status=500, text="boom")
        return web.Response(text=f"results for {q}")

    app = web.Application()
    app.router.add_get("/search", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        yield Upstream(f"http://127.0.0.1:{port}/search", session, calls, fail)
    await runner.cleanup()


@pytest.fixture
async def cache(tmp_path: Path) -> AsyncIterator[Cache]:
    async with Cache(tmp_path / "cache.sqlite", modes={"model": "use"}) as c:
        yield c
