"""A damaged database file is moved aside at open with a warning; the run continues on a fresh cache."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cache import Cache, cache_key, cache_stats


def _moved_aside_files(folder: Path) -> list[Path]:
    return list(folder.glob("*.corrupt-*"))


async def _assert_fresh_and_working(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="fasteval.cache"):
        async with Cache(path) as cache:
            assert cache.moved_aside is not None and cache.moved_aside.exists()
            assert ".corrupt-" in cache.moved_aside.name
            key = cache_key("search", query="q")
            assert await cache.get("search", key) is None
            assert await cache.put("search", key, "fresh")
            assert await cache.get("search", key) == "fresh"
    assert any("moved it to" in r.getMessage() for r in caplog.records)


async def test_garbage_file_is_moved_aside(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not a database " * 500)
    await _assert_fresh_and_working(path, caplog)


async def test_truncated_database_is_moved_aside(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "cache.sqlite"
    async with Cache(path) as cache:
        for i in range(300):
            await cache.put("page", cache_key("page", i=i), f"page {i} " * 200 + str(i))
    data = path.read_bytes()
    assert len(data) > 16384
    path.write_bytes(data[: len(data) // 2])
    await _assert_fresh_and_working(path, caplog)


async def test_clean_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    async with Cache(path) as cache:
        await cache.put("search", "k", "v")
    async with Cache(path) as cache:
        assert cache.moved_aside is None
        assert await cache.get("search", "k") == "v"
    assert cache_stats(path)["search"].entries == 1
    assert _moved_aside_files(tmp_path) == []
