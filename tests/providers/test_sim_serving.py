"""The sim as a model server: /health, /v1/models, /metrics and its prefix-cache model."""

from __future__ import annotations

import aiohttp

from providers.local import parse_metrics
from providers.sim import SimModel, SimServer
from providers.sim.prefix_cache import PrefixCache, PrefixCacheModel, message_chain


async def test_health_models_and_prefix_cache_metrics() -> None:
    server = SimServer([SimModel(name="m", policy="direct")], prefix_cache=PrefixCacheModel(decode_ms=0))
    await server.start()
    root = f"http://127.0.0.1:{server.port}"
    history = [{"role": "system", "content": "s" * 400}, {"role": "user", "content": "u" * 800}]
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{root}/health") as r:
                assert r.status == 200
            async with s.get(f"{root}/v1/models") as r:
                assert [m["id"] for m in (await r.json())["data"]] == ["m"]
            for _ in range(2):
                async with s.post(f"{root}/v1/chat/completions", json={"model": "m", "messages": history}) as r:
                    assert r.status == 200
            async with s.get(f"{root}/metrics") as r:
                m = parse_metrics(await r.text())
    finally:
        await server.stop()
    assert m["vllm:prefix_cache_queries_total"] > 0
    assert m["vllm:prefix_cache_hits_total"] == m["vllm:prefix_cache_queries_total"] / 2  # the 2nd hit fully
    assert m["vllm:num_requests_waiting"] == 0


async def test_never_ready_health_is_503() -> None:
    server = SimServer([SimModel(name="m")], ready=False)
    await server.start()
    try:
        async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{server.port}/health") as r:
            assert r.status == 503
    finally:
        await server.stop()


def test_prefix_cache_evicts_least_recently_used_prefixes() -> None:
    cache = PrefixCache(PrefixCacheModel(capacity_tokens=300))
    a = message_chain([{"role": "user", "content": "a" * 800}])
    b = message_chain([{"role": "user", "content": "b" * 800}])
    assert cache.lookup(a)[1] == 0 and cache.lookup(a)[1] > 0
    cache.lookup(b)  # a no longer fits next to b
    assert cache.lookup(a)[1] == 0
    assert cache.used_tokens <= 300
