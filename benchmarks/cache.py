"""Cache throughput and savings, each against its baseline in the same run.

    .venv/bin/python benchmarks/cache.py [--json]

1. gets/s and puts/s with 1,000 concurrent tasks on a real SQLite file (target: >= 20,000 gets/s);
2. single-flight: upstream calls for 1,000 concurrent requests over 100 distinct queries, with
   ``get_or_compute`` versus the naive get-miss-fetch-put pattern;
3. a retrieval-heavy sweep (search, then 3 page fetches, then a summary per job) against a loopback
   aiohttp upstream with 50 ms latency: wall time cold (empty cache) versus warm (target: >= 10x).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache import Cache, cache_key  # noqa: E402

CONCURRENCY = 1000
OPS_PER_TASK = 20
LATENCY_S = 0.05
SWEEP_JOBS = 200
UPSTREAM_CONNECTIONS = 32


class Upstream:
    """Search/page/summary endpoints on 127.0.0.1 that answer after a fixed latency."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.calls = 0
        self.url = ""
        self._runner: web.AppRunner | None = None
        self.session: aiohttp.ClientSession | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        self.calls += 1
        await asyncio.sleep(self.latency)
        q = request.query.get("q", "")
        return web.Response(text=f"{request.path} {q} " + "lorem ipsum " * 100)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/{kind}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=UPSTREAM_CONNECTIONS))

    async def fetch(self, kind: str, q: str) -> str:
        assert self.session is not None
        async with self.session.get(f"{self.url}/{kind}", params={"q": q},
                                    timeout=aiohttp.ClientTimeout(total=60)) as r:
            r.raise_for_status()
            return await r.text()

    async def stop(self) -> None:
        if self.session is not None:
            await self.session.close()
        if self._runner is not None:
            await self._runner.cleanup()


async def _timed(n_tasks: int, body: Callable[[int], Coroutine[Any, Any, None]]) -> float:
    t0 = time.perf_counter()
    await asyncio.gather(*(body(i) for i in range(n_tasks)))
    return time.perf_counter() - t0


async def bench_ops(folder: Path) -> dict[str, float]:
    """Puts then gets (hits, then misses) from 1,000 concurrent tasks."""
    n = CONCURRENCY * OPS_PER_TASK
    keys = [cache_key("search", query=f"q{i}") for i in range(n)]
    value = "result text " * 40
    async with Cache(folder / "ops.sqlite") as cache:

        async def puts(t: int) -> None:
            for j in range(OPS_PER_TASK):
                await cache.put("search", keys[t * OPS_PER_TASK + j], value)

        async def hits(t: int) -> None:
            for j in range(OPS_PER_TASK):
                assert await cache.get("search", keys[(t * 7919 + j * 104729) % n]) is not None

        async def misses(t: int) -> None:
            for j in range(OPS_PER_TASK):
                assert await cache.get("search", f"absent-{t}-{j}") is None

        put_s = await _timed(CONCURRENCY, puts)
        hit_s = await _timed(CONCURRENCY, hits)
        miss_s = await _timed(CONCURRENCY, misses)
    return {"puts_per_s": n / put_s, "gets_per_s": n / hit_s, "miss_gets_per_s": n / miss_s}


async def bench_singleflight(folder: Path, upstream: Upstream) -> dict[str, int]:
    """Upstream calls for 1,000 concurrent requests over 100 queries: with vs without single-flight."""
    queries = [f"sf{i % 100}" for i in range(CONCURRENCY)]
    async with Cache(folder / "sf-with.sqlite") as cache:
        before = upstream.calls
        await asyncio.gather(*(cache.get_or_compute("search", cache_key("search", query=q),
                                                    lambda q=q: upstream.fetch("search", q))  # type: ignore[misc]
                               for q in queries))
        with_sf = upstream.calls - before

    async with Cache(folder / "sf-without.sqlite") as cache:
        async def naive(q: str) -> None:
            key = cache_key("search", query=q)
            if await cache.get("search", key) is None:
                await cache.put("search", key, await upstream.fetch("search", q))

        before = upstream.calls
        await asyncio.gather(*(naive(q) for q in queries))
        without_sf = upstream.calls - before
    return {"singleflight_upstream_calls": with_sf, "no_singleflight_upstream_calls": without_sf}


async def _sweep(cache: Cache, upstream: Upstream) -> float:
    def cached(ns: str, kind: str, q: str) -> Awaitable[Any]:
        return cache.get_or_compute(ns, cache_key(ns, q=q), lambda: upstream.fetch(kind, q))

    async def job(i: int) -> None:
        await cached("search", "search", f"job{i}")
        pages = await asyncio.gather(*(cached("page", "page", f"job{i}-p{p}") for p in range(3)))
        await cached("summary", "summary", orjson.dumps([len(str(p)) for p in pages]).decode() + f"#{i}")

    return await _timed(SWEEP_JOBS, job)


async def bench_sweep(folder: Path, upstream: Upstream) -> dict[str, float]:
    """The same retrieval-heavy sweep twice on one cache: cold, then warm."""
    async with Cache(folder / "sweep.sqlite") as cache:
        before = upstream.calls
        cold = await _sweep(cache, upstream)
        cold_calls = upstream.calls - before
        await cache.flush()
        before = upstream.calls
        warm = await _sweep(cache, upstream)
        warm_calls = upstream.calls - before
    return {"cold_s": cold, "warm_s": warm, "speedup": cold / warm,
            "cold_upstream_calls": cold_calls, "warm_upstream_calls": warm_calls}


async def main(as_json: bool) -> None:
    upstream = Upstream(LATENCY_S)
    await upstream.start()
    try:
        with tempfile.TemporaryDirectory(prefix="fasteval-cache-bench-") as tmp:
            folder = Path(tmp)
            out: dict[str, Any] = {}
            out.update(await bench_ops(folder))
            out.update(await bench_singleflight(folder, upstream))
            out.update(await bench_sweep(folder, upstream))
    finally:
        await upstream.stop()
    out["loop"] = type(asyncio.get_running_loop()).__module__.split(".")[0]
    if as_json:
        print(orjson.dumps(out).decode())
        return
    print(f"cache benchmark ({CONCURRENCY} concurrent tasks, loop: {out['loop']})")
    print(f"  gets/s (hits)          {out['gets_per_s']:>10,.0f}   target >= 20,000")
    print(f"  gets/s (misses)        {out['miss_gets_per_s']:>10,.0f}")
    print(f"  puts/s (committed)     {out['puts_per_s']:>10,.0f}")
    print(f"  upstream calls, 1,000 requests over 100 queries: single-flight "
          f"{out['singleflight_upstream_calls']}, without {out['no_singleflight_upstream_calls']}")
    print(f"  sweep of {SWEEP_JOBS} jobs x 5 calls at {LATENCY_S * 1000:.0f} ms: cold {out['cold_s']:.2f} s "
          f"({out['cold_upstream_calls']} calls), warm {out['warm_s']:.3f} s ({out['warm_upstream_calls']} calls), "
          f"{out['speedup']:.0f}x   target >= 10x")


def _run(coro: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    _run(main(parser.parse_args().json))
