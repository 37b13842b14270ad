"""One writer per run folder: a second run, rescore, merge or batches cancel is refused, naming the holder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fasteval.core.errors import RunFolderBusy
from fasteval.runfolder.lock import LOCK, run_folder_lock

pytestmark = pytest.mark.slow

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]
HOLDER = ("import sys, time\nfrom pathlib import Path\nfrom fasteval.runfolder.lock import run_folder_lock\n"
          "run_dir = Path(sys.argv[1])\nsys.argv[1:] = ['batches', 'cancel', str(run_dir)]  # as the CLI has it\n"
          "with run_folder_lock(run_dir, 'batches cancel'):\n    print('held', flush=True)\n    time.sleep(600)\n")


def config(tmp: Path) -> Path:
    cfg = {"seeds": 1, "models": [{"name": "m", "provider": "sim", "model": "m:direct"}],
           "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [64, 48]},
                       "settings": [{"name": "plain", "tools": []}]}]}
    p = tmp / "sweep.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def holder(run_dir: Path) -> subprocess.Popen[str]:
    """Another process holding the folder, as a running sweep would."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FASTEVAL, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def finished_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    done = cli("run", str(config(tmp_path)), "--run-dir", str(run_dir), "--no-progress")
    assert done.returncode == 0, done.stderr
    return run_dir


def test_every_writing_command_is_refused_while_another_holds_the_folder(tmp_path: Path, finished_run: Path) -> None:
    proc = holder(finished_run)
    try:
        before = snapshot(finished_run)
        for args in (["run", str(config(tmp_path)), "--run-dir", str(finished_run), "--no-progress"],
                     ["rescore", str(finished_run), "--trust-manifest"],
                     ["merge", str(tmp_path / "merged"), str(finished_run)],
                     ["batches", "cancel", str(finished_run)]):
            res = cli(*args)
            assert res.returncode == 2, (args, res.stderr)
            lines = res.stderr.strip().splitlines()
            assert len(lines) == 1 and f"in use by pid {proc.pid} on " in lines[0], (args, res.stderr)
            assert f"(fasteval batches cancel {finished_run}, since " in lines[0] and "Traceback" not in res.stderr
        assert snapshot(finished_run) == before  # nothing written: no run.log line, no record
        assert not (tmp_path / "merged").exists()
    finally:
        proc.kill()
        proc.wait()


def test_a_holder_killed_with_sigkill_frees_the_folder(tmp_path: Path, finished_run: Path) -> None:
    proc = holder(finished_run)
    with pytest.raises(RunFolderBusy):
        with run_folder_lock(finished_run, "test"):
            pass
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (finished_run / LOCK).exists()  # the stale file is left; the kernel dropped the lock
    rerun = cli("run", str(config(tmp_path)), "--run-dir", str(finished_run), "--no-progress")
    assert rerun.returncode == 0, rerun.stderr


def test_a_tampered_lock_file_is_only_text(tmp_path: Path) -> None:
    """The holder text is read only while someone holds the lock, and printed cleaned."""
    (tmp_path / LOCK).write_text('{"pid": "\\u001b]0;owned\\u0007", "host": "h", "command": "x"}')
    proc = holder(tmp_path)
    try:
        (tmp_path / LOCK).write_text('{"pid": "\\u001b]0;owned\\u0007", "host": "h", "command": "x"}')
        with pytest.raises(RunFolderBusy) as e:
            with run_folder_lock(tmp_path, "test"):
                pass
        assert "\x1b" not in str(e.value) and "\x07" not in str(e.value)
    finally:
        proc.kill()
        proc.wait()


def test_the_python_api_takes_the_same_lock(tmp_path: Path, finished_run: Path) -> None:
    from fasteval.api import run

    proc = holder(finished_run)
    try:
        with pytest.raises(RunFolderBusy, match=f"in use by pid {proc.pid}"):
            run(config(tmp_path), run_dir=finished_run, preflight=False)
    finally:
        proc.kill()
        proc.wait()
    assert run(config(tmp_path), run_dir=finished_run, preflight=False).ok == 0  # all done before: resumed
