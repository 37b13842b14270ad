"""Issue 8, item 5: ``kill -9`` of a process with a pool leaves its temp folder; the next pool removes it."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import pytest

from sandbox import SandboxPool
from sandbox._stale import clean_stale_roots, process_start

REPO = str(Path(__file__).resolve().parents[2])
OWNER = f"""
import asyncio, sys
sys.path.insert(0, {REPO!r})
from sandbox import SandboxPool
async def main():
    pool = SandboxPool(1)
    await pool.start()
    await pool.run("print(1)")
    print(pool.root, flush=True)
    await asyncio.sleep(600)
asyncio.run(main())
"""



def _isdir(p: Path) -> bool:
    return p.is_dir()


def _exists(p: Path) -> bool:
    return p.exists()


def _mkdir(p: Path) -> None:
    p.mkdir()

@pytest.mark.slow
async def test_folder_of_a_killed_owner_is_removed_at_the_next_pool_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    owner = await asyncio.create_subprocess_exec(sys.executable, "-c", OWNER, stdout=asyncio.subprocess.PIPE, env=env)
    assert owner.stdout is not None
    line = await asyncio.wait_for(owner.stdout.readline(), 300)
    root = Path(line.decode().strip())
    assert root.parent == tmp_path and _isdir(root)
    owner.kill()  # SIGKILL: no close(), no cleanup
    await owner.wait()
    assert _isdir(root)

    ours = tmp_path / f"fasteval-sandbox-{os.getpid()}-{process_start(os.getpid())}-live"
    _mkdir(ours)  # a live owner's folder (this test process)
    legacy = tmp_path / "fasteval-sandbox-abc123"
    _mkdir(legacy)  # no owner in the name: cannot prove it dead, so it stays
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    async with SandboxPool(1, isolation="process") as pool:
        assert (await pool.run("print(2)")).stdout == "2\n"
        assert pool.root.parent == tmp_path
    for _ in range(100):  # rmtree runs in a thread before the pool starts; it is done by now
        if not _exists(root):
            break
        await asyncio.sleep(0.05)
    assert not _exists(root)
    assert _isdir(ours) and _isdir(legacy)


def test_a_recycled_pid_is_not_mistaken_for_the_owner(tmp_path: Path) -> None:
    start = process_start(os.getpid())
    assert start is not None
    recycled = tmp_path / f"fasteval-sandbox-{os.getpid()}-{start + 1}-x"  # same pid, other start time
    recycled.mkdir()
    gone = tmp_path / "fasteval-sandbox-999999999-1-x"  # no such pid
    gone.mkdir()
    assert sorted(clean_stale_roots(tmp_path)) == sorted([recycled, gone])
    assert not recycled.exists() and not gone.exists()
