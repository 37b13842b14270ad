"""Issue 39 item 10: the sandbox's workers start beside the first job that offers a Python tool,
not before every run: a rerun with nothing left to do spawns no worker at all.

Observed from outside: a thread lists the ``fasteval run`` process's descendants while it runs
and notes every ``python -m sandbox._worker`` among them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest
import yaml

from fasteval.core.types import Task, Turn
from fasteval.runfolder.blobs import BlobStore
from fasteval.tools.base import ToolContext, make_tool
from providers import EndpointDown
from sandbox import SandboxPool, SandboxStartError

FASTEVAL = str(Path(sys.executable).parent / "fasteval")
pytestmark = pytest.mark.slow  # subprocess sweeps and sandbox pools


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            children = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            out += [child, *_descendants(child)]
    return out


def _run_watching_workers(cmd: list[str]) -> tuple[subprocess.CompletedProcess[str], set[int]]:
    """Run ``cmd``; also the pids of the sandbox workers it had at any moment (polled every 5 ms)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for pid in _descendants(proc.pid):
                try:
                    if b"sandbox._worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        workers.add(pid)
                except OSError:
                    pass
            done.wait(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        done.set()
        watcher.join()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), workers


@pytest.mark.skipif(not Path(FASTEVAL).exists(), reason="the fasteval command is not installed")
def test_a_run_with_nothing_left_to_do_starts_no_sandbox_worker(tmp_path: Path) -> None:
    rows = [{"id": f"t{i}", "prompt": f"task {i}", "answer": "hello", "tools": ["python_interpreter"]} for i in range(2)]
    (tmp_path / "tasks.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({
        "models": [{"name": "sim", "provider": "sim", "policy": "tools", "tool_uses": 1}],
        "suites": [{"name": "jsonl", "options": {"path": str(tmp_path / "tasks.jsonl")}}],
        "run": {"sandbox": {"workers": 1}},
    }))
    cmd = [FASTEVAL, "run", str(cfg), "--run-dir", str(tmp_path / "run"), "--no-progress"]

    first, workers = _run_watching_workers(cmd)
    assert first.returncode == 0, first.stdout + first.stderr
    assert workers, "the run that needs the sandbox started no worker (the watcher sees nothing?)"
    records = [orjson.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_bytes().splitlines()]
    calls = [c for r in records for c in r["trajectory"]["tool_calls"]]
    assert len(records) == 2 and len(calls) == 2
    assert all(c["status"] == "ok" and "hello" in c["output"] for c in calls), calls

    again, workers = _run_watching_workers(cmd)
    assert again.returncode == 0, again.stdout + again.stderr
    assert workers == set()  # before: two workers started (about 6 s) for nothing
    assert len((tmp_path / "run" / "records.jsonl").read_bytes().splitlines()) == 2


async def test_a_pool_starts_on_its_first_call_and_a_pool_never_started_closes_cleanly(tmp_path: Path) -> None:
    keep = tmp_path / "cwd" / "keep.txt"
    keep.parent.mkdir()
    keep.write_text("x")
    cwd = os.getcwd()
    os.chdir(keep.parent)
    try:
        idle = SandboxPool(1)
        await idle.close()  # no worker, no folder: it must not remove anything (its root is unset)
        assert keep.exists() and idle.stats()["size"] == 1
    finally:
        os.chdir(cwd)
    pool = SandboxPool(1)
    try:
        assert (await pool.run("print(6 * 7)")).stdout == "42\n"
        assert pool.stats()["ready"] == 1
    finally:
        await pool.close()


async def test_a_sandbox_that_cannot_start_fails_its_calls_and_leaves_their_jobs_for_a_rerun(tmp_path: Path) -> None:
    """A pool whose folder cannot be made (here: under a file) fails every call with the reason;
    the Python tools raise ``EndpointDown``, so a sweep writes no record for the job, ends
    incomplete saying why, and a rerun runs it; ``fasteval tool run`` reports it as the call's error."""
    (tmp_path / "file").write_text("not a folder")
    pool = SandboxPool(1, root=str(tmp_path / "file" / "pool"))
    pool.start_soon()
    try:
        for _ in range(2):  # the failure is remembered: no second start per call
            with pytest.raises(SandboxStartError, match="NotADirectoryError|FileExistsError"):
                await pool.run("print(1)")
        blobs = BlobStore(tmp_path / "blobs")
        ctx = ToolContext(blobs=blobs, task=Task(id="t", turns=[Turn("q")]), images=[], fidelity="fixed",
                          session_id="job-1", services={"sandbox": pool})
        with pytest.raises(EndpointDown) as down:
            await make_tool("python_interpreter").run({"code": "print(1)"}, ctx)
        assert down.value.endpoint == "sandbox" and "could not start" in down.value.reason
    finally:
        await pool.close()
