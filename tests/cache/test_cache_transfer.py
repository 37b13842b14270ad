"""Export → import → replay reproduces values byte for byte; prune; the CLI subcommands."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from cache import Cache, cache_key, export_cache, import_cache, prune_cache
from cache.cli import add_cache_parser

BIG = os.urandom(50_000) + b"\x00" * 50_000  # compressible, with bytes JSON could not carry


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fasteval")
    add_cache_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def _run(*argv: str) -> int:
    args = _parser().parse_args(list(argv))
    code: int = args.func(args)
    return code


async def _fill(path: Path) -> dict[tuple[str, str], object]:
    values: dict[tuple[str, str], object] = {
        ("search", cache_key("search", query="q")): "results ✓ " * 300,
        ("page", cache_key("page", url="u")): BIG,
        ("judge", cache_key("judge", prompt="p")): {"grade": "A", "score": 1.0, "why": ["x"]},
        ("summary", cache_key("summary", url="u")): "short",
    }
    async with Cache(path) as cache:
        for (ns, key), value in values.items():
            assert await cache.put(ns, key, value)  # type: ignore[arg-type]
    return values


async def test_export_import_replay_is_byte_for_byte(tmp_path: Path) -> None:
    src, dst, out = tmp_path / "src.sqlite", tmp_path / "dst.sqlite", tmp_path / "export.jsonl"
    values = await _fill(src)
    assert export_cache(src, out) == 4
    assert import_cache(dst, out) == 4
    async with Cache(dst, modes={"*": "replay"}) as cache:
        for (ns, key), value in values.items():
            assert await cache.get(ns, key) == value
    q = "SELECT namespace, key, kind, codec, size, value FROM entries ORDER BY namespace, key"
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        assert a.execute(q).fetchall() == b.execute(q).fetchall()


async def test_export_only_keys_a_run_used(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    await _fill(path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    async with Cache(path) as cache:
        hit_key = cache_key("judge", prompt="p")
        await cache.get("judge", hit_key)
        assert await cache.write_used_keys(run_dir / "cache_keys.txt") == 1
    out = tmp_path / "run.jsonl"
    assert _run("cache", "export", "--cache", str(path), "--out", str(out), "--run-dir", str(run_dir)) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["key"] == hit_key
    # Bare keys (no namespace) are accepted too.
    (run_dir / "cache_keys.txt").write_text(f"# one bare key\n{cache_key('search', query='q')}\n")
    assert export_cache(path, out, keys=[(None, cache_key("search", query="q"))]) == 1


async def test_prune_by_age_and_namespace(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    await _fill(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE entries SET created = ? WHERE namespace = 'search'", (time.time() - 40 * 86400,))
    assert prune_cache(path, older_than_days=30) == 1
    assert _run("cache", "prune", "--cache", str(path), "--namespace", "page") == 0
    assert _run("cache", "prune", "--cache", str(path)) == 2  # refuses to wipe everything
    async with Cache(path) as cache:
        st = await cache.stats()
    assert sorted(ns for ns, s in st.items() if s.entries) == ["judge", "summary"]
    with pytest.raises(ValueError):
        prune_cache(path)


async def test_cli_stats_json_and_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.sqlite"
    await _fill(path)
    async with Cache(path) as cache:
        await cache.get("judge", cache_key("judge", prompt="p"))
        await cache.get("judge", "missing")
    assert _run("cache", "stats", "--cache", str(path), "--format", "json") == 0
    doc = json.loads(capsys.readouterr().out)
    judge = doc["namespaces"]["judge"]
    assert (judge["entries"], judge["hits"], judge["misses"]) == (1, 1, 1)
    assert _run("cache", "stats", "--cache", str(path)) == 0
    assert "summary" in capsys.readouterr().out
    out, other = tmp_path / "all.jsonl", tmp_path / "other.sqlite"
    assert _run("cache", "export", "--cache", str(path), "--namespace", "page", "--out", str(out)) == 0
    assert _run("cache", "import", "--cache", str(other), str(out)) == 0
    assert _run("cache", "import", "--cache", str(other), str(tmp_path / "nope.jsonl")) == 1
    async with Cache(other) as cache:
        assert await cache.get("page", cache_key("page", url="u")) == BIG
