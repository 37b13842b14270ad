"""Values come back exactly as stored, compressed on disk only when that pays."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from cache import Cache


async def test_compression_round_trip_and_threshold(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    big_text = "the quick brown fox " * 2000
    async with Cache(path, compress_threshold=1024) as cache:
        assert await cache.put("page", "big", big_text)
        assert await cache.put("page", "small", "tiny page")
        assert await cache.put("page", "bytes", bytes(range(256)) * 40)
        assert await cache.put("judge", "json", {"grade": "B", "nested": {"k": [1, 2.5, None]}})
    with sqlite3.connect(path) as conn:
        rows = dict(conn.execute("SELECT key, codec FROM entries").fetchall())
        stored = conn.execute("SELECT length(value), size FROM entries WHERE key = 'big'").fetchone()
    assert rows["big"] == 1 and rows["small"] == 0
    assert stored[0] < stored[1] // 10
    async with Cache(path) as cache:
        assert await cache.get("page", "big") == big_text
        assert await cache.get("page", "small") == "tiny page"
        assert await cache.get("page", "bytes") == bytes(range(256)) * 40
        assert await cache.get("judge", "json") == {"grade": "B", "nested": {"k": [1, 2.5, None]}}


async def test_value_is_readable_as_soon_as_put_started(cache: Cache) -> None:
    task = asyncio.ensure_future(cache.put("search", "k", "v"))
    await asyncio.sleep(0)  # put has queued the write; it may or may not be committed yet
    assert await cache.get("search", "k") == "v"
    assert await task is True


async def test_wal_mode_and_default_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTEVAL_CACHE_DIR", str(tmp_path / "shared"))
    async with Cache() as cache:
        assert cache.path == tmp_path / "shared" / "cache.sqlite"
        await cache.put("search", "k", "v")
    with sqlite3.connect(tmp_path / "shared" / "cache.sqlite") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
