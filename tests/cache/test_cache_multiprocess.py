"""Two real processes writing one cache file at once lose nothing and corrupt nothing (lm-eval #2306)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from cache import Cache, cache_key

ROOT = Path(__file__).resolve().parents[2]
N = 400

WRITER = """
import asyncio, sys
from cache import Cache, cache_key

async def main(path: str, who: str, n: int) -> None:
    async with Cache(path) as cache:
        async def one(i: int) -> None:
            await cache.put("search", cache_key("search", who=who, i=i), f"{who}:{i}:" + "x" * (i % 3000))
            # A shared key both processes write: same content-addressed value either way.
            await cache.put("page", cache_key("page", i=i), f"shared:{i}")
        await asyncio.gather(*(one(i) for i in range(n)))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def test_two_processes_write_concurrently_then_all_values_read(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    procs = [await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(path), who, str(N),
                                                  cwd=ROOT, stderr=asyncio.subprocess.PIPE)
             for who in ("a", "b")]
    results = await asyncio.gather(*(asyncio.wait_for(p.communicate(), 40) for p in procs))
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err.decode()
    async with Cache(path) as cache:
        assert cache.moved_aside is None
        for who in ("a", "b"):
            for i in range(N):
                assert await cache.get("search", cache_key("search", who=who, i=i)) == f"{who}:{i}:" + "x" * (i % 3000)
        for i in range(N):
            assert await cache.get("page", cache_key("page", i=i)) == f"shared:{i}"
        st = await cache.stats()
    assert st["search"].entries == 2 * N and st["page"].entries == N
