"""Modes per namespace: replay fails closed, refresh never reads, off does nothing; only successes stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from cache import Cache, CacheMiss, CacheValue, EmptyValueError, cache_key, parse_modes
from tests.cache.cache_upstream import Upstream


async def test_replay_miss_fails_closed_and_names_namespace_and_key(tmp_path: Path, upstream: Upstream) -> None:
    async with Cache(tmp_path / "c.sqlite", modes={"search": "replay"}) as cache:
        key = cache_key("search", query="never cached")
        with pytest.raises(CacheMiss) as err:
            await cache.get_or_compute("search", key, lambda: upstream.fetch("never cached"))
        assert key in str(err.value) and "'search'" in str(err.value)
        assert err.value.namespace == "search" and err.value.key == key
        with pytest.raises(CacheMiss):
            await cache.get("search", key)
        assert await cache.put("search", key, "x") is False  # read only
        assert upstream.total == 0


async def test_replay_serves_hits(tmp_path: Path, upstream: Upstream) -> None:
    path = tmp_path / "c.sqlite"
    key = cache_key("search", query="q")
    async with Cache(path) as cache:
        assert await cache.put("search", key, "stored") is True
    async with Cache(path, modes=parse_modes("replay")) as cache:
        assert await cache.get_or_compute("search", key, lambda: upstream.fetch("q")) == "stored"
    assert upstream.total == 0


async def test_refresh_recomputes_and_overwrites_without_reading(tmp_path: Path, upstream: Upstream) -> None:
    path = tmp_path / "c.sqlite"
    key = cache_key("search", query="q")
    async with Cache(path) as cache:
        await cache.put("search", key, "stale")
    async with Cache(path, modes={"search": "refresh"}) as cache:
        assert await cache.get("search", key) is None
        assert await cache.get_or_compute("search", key, lambda: upstream.fetch("q")) == "results for q"
        assert upstream.calls["q"] == 1
    async with Cache(path) as cache:
        assert await cache.get("search", key) == "results for q"


async def test_off_neither_reads_nor_writes(tmp_path: Path, upstream: Upstream) -> None:
    path = tmp_path / "c.sqlite"
    key = cache_key("search", query="q")
    async with Cache(path) as cache:
        await cache.put("search", key, "stored")
    async with Cache(path, modes={"search": "off"}) as cache:
        assert await cache.get("search", key) is None
        assert await cache.get_or_compute("search", key, lambda: upstream.fetch("q")) == "results for q"
        assert await cache.put("search", cache_key("search", query="new"), "v") is False
    async with Cache(path) as cache:
        assert await cache.get("search", key) == "stored"
        assert await cache.get("search", cache_key("search", query="new")) is None
    assert upstream.calls["q"] == 1


async def test_model_namespace_is_opt_in(tmp_path: Path) -> None:
    async with Cache(tmp_path / "c.sqlite") as cache:
        assert cache.mode("model") == "off" and cache.mode("search") == "use"
        assert await cache.put("model", "k", "answer") is False
    # A blanket mode freezes tools and judge but leaves the model under test live unless named.
    async with Cache(tmp_path / "c.sqlite", modes={"model": "use", "*": "replay"}) as cache:
        assert (cache.mode("model"), cache.mode("judge"), cache.mode("extract")) == ("use", "replay", "replay")
    async with Cache(tmp_path / "c.sqlite", modes=parse_modes("replay")) as cache:
        assert cache.mode("model") == "off"


async def test_empty_and_filtered_outputs_are_never_stored(cache: Cache) -> None:
    empties: list[CacheValue] = [b"", "", "   ", {}]
    for empty in empties:
        with pytest.raises(EmptyValueError):
            await cache.put("summary", "k", empty)

    async def empty_summary() -> str:
        return ""

    assert await cache.get_or_compute("summary", "k1", empty_summary) == ""

    async def filtered() -> dict[str, object]:
        return {"content": "", "finish_reason": "content_filter"}

    out = await cache.get_or_compute("model", "k2", filtered,
                                     cacheable=lambda v: isinstance(v, dict) and v["finish_reason"] == "stop")
    assert isinstance(out, dict) and out["finish_reason"] == "content_filter"
    await cache.flush()
    assert await cache.get("summary", "k1") is None
    assert await cache.get("model", "k2") is None


def test_parse_modes() -> None:
    assert parse_modes("replay") == {"*": "replay"}
    assert parse_modes("search=replay, model=use") == {"search": "replay", "model": "use"}
    with pytest.raises(ValueError):
        parse_modes("search=sometimes")


async def test_stats_count_hits_misses_and_size(cache: Cache) -> None:
    await cache.put("page", "k", "x" * 5000)
    await cache.get("page", "k")
    await cache.get("page", "missing")
    st = (await cache.stats())["page"]
    assert (st.entries, st.hits, st.misses, st.raw_bytes) == (1, 1, 1, 5000)
    assert st.stored_bytes < 5000  # compressed
