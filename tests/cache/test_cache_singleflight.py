"""Identical concurrent misses cost one upstream call; failures reach every waiter and store nothing."""

from __future__ import annotations

import asyncio

import pytest

from cache import Cache, cache_key
from tests.cache.cache_upstream import Upstream


async def test_500_concurrent_identical_requests_make_one_upstream_call(cache: Cache, upstream: Upstream) -> None:
    key = cache_key("search", query="red panda", top_k=10)
    results = await asyncio.gather(*(
        cache.get_or_compute("search", key, lambda: upstream.fetch("red panda")) for _ in range(500)))
    assert upstream.calls["red panda"] == 1
    assert set(results) == {"results for red panda"}
    # Later callers are served from the cache, still without reaching the upstream.
    assert await cache.get_or_compute("search", key, lambda: upstream.fetch("red panda")) == "results for red panda"
    assert upstream.calls["red panda"] == 1


async def test_distinct_keys_each_computed_once(cache: Cache, upstream: Upstream) -> None:
    queries = [f"q{i % 20}" for i in range(400)]
    await asyncio.gather(*(
        cache.get_or_compute("search", cache_key("search", query=q), lambda q=q: upstream.fetch(q))  # type: ignore[misc]
        for q in queries))
    assert upstream.total == 20
    assert all(n == 1 for n in upstream.calls.values())


async def test_compute_error_reaches_all_waiters_and_is_not_stored(cache: Cache, upstream: Upstream) -> None:
    upstream.fail.add("broken")
    key = cache_key("search", query="broken")
    results = await asyncio.gather(*(
        cache.get_or_compute("search", key, lambda: upstream.fetch("broken")) for _ in range(50)),
        return_exceptions=True)
    assert upstream.calls["broken"] == 1
    assert all(isinstance(r, RuntimeError) and "HTTP 500" in str(r) for r in results)
    await cache.flush()
    assert await cache.get("search", key) is None
    upstream.fail.clear()
    assert await cache.get_or_compute("search", key, lambda: upstream.fetch("broken")) == "results for broken"
    assert upstream.calls["broken"] == 2


async def test_one_cancelled_waiter_does_not_cancel_the_others(cache: Cache, upstream: Upstream) -> None:
    key = cache_key("search", query="slow")
    first = asyncio.ensure_future(cache.get_or_compute("search", key, lambda: upstream.fetch("slow")))
    second = asyncio.ensure_future(cache.get_or_compute("search", key, lambda: upstream.fetch("slow")))
    await asyncio.sleep(0)
    first.cancel()
    assert await second == "results for slow"
    with pytest.raises(asyncio.CancelledError):
        await first
    assert upstream.calls["slow"] == 1


async def test_dict_results_are_not_shared_between_waiters(cache: Cache) -> None:
    async def verdict() -> dict[str, object]:
        await asyncio.sleep(0.01)
        return {"grade": "A", "notes": ["ok"]}

    key = cache_key("judge", prompt="p")
    a, b = await asyncio.gather(cache.get_or_compute("judge", key, verdict),
                                cache.get_or_compute("judge", key, verdict))
    assert a == b and a is not b
    assert isinstance(a, dict)
    a["grade"] = "F"
    assert await cache.get("judge", key) == {"grade": "A", "notes": ["ok"]}
