"""File descriptors: a flood of connections on the control socket, and a sweep that runs out of them.

Both are real: ``fasteval run`` in a subprocess under ``RLIMIT_NOFILE`` 1024 (the usual
``ulimit -n``), 1,100 idle connections opened on its ``control.sock`` by this process; and a
sweep whose descriptor limit is too small for the connections it opens. The flood must cost the
steering at most, never a job; running out must stop the sweep like a full disk (one line, exit 3),
never turn jobs into ``bad_input`` or ``internal`` error records.
"""

from __future__ import annotations

import errno
import resource
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fasteval.core.exitcodes import EXIT_INCOMPLETE, EXIT_OK
from fasteval.runfolder.control import CONTROL_SOCKET, ask, socket_path

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]


def _limit(n: int) -> Callable[[], None]:
    def apply() -> None:  # in the child, before exec: its soft limit only
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))

    return apply


def _config(tmp: Path, *, n_tasks: int, seeds: int, latency_ms: float, concurrency: int) -> Path:
    cfg = {
        "seeds": seeds,
        "models": [{"name": "sim-tools", "provider": "sim", "policy": "tools", "latency_ms": latency_ms}],
        "suites": [{"name": "demo", "options": {"n_tasks": n_tasks, "image_size": [96, 64]},
                    "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}],
        "run": {"max_concurrency": concurrency, "fsync": "batch"},
    }
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "records.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def _flood(run_dir: Path, n: int, *, give_up_s: float = 10.0) -> list[socket.socket]:
    """Open up to ``n`` idle connections (nothing sent), each as soon as the socket takes it.

    A blocking connect waits while the listen backlog is full: the flood goes exactly as fast as
    the sweep accepts. A connect the sweep leaves waiting for ``give_up_s`` ends the flood.
    """
    held: list[socket.socket] = []
    with socket_path(run_dir) as path:
        for _ in range(n):
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            except OSError as e:
                if e.errno == errno.EMFILE:  # this process's own limit: the round ends
                    break
                raise
            # blocking (Python's timeout mode would make a full backlog EAGAIN at once); the kernel's
            # send timeout bounds the wait
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", int(give_up_s), 0))
            try:
                s.connect(path)
            except OSError as e:
                s.close()
                if isinstance(e, TimeoutError) or e.errno in (errno.ECONNREFUSED, errno.ENOENT, errno.EAGAIN):
                    break  # the sweep ended, or takes no more
                raise
            held.append(s)
    return held


@pytest.mark.slow
def test_a_connection_flood_on_the_control_socket_costs_no_job(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # this process holds the client ends (its own limit would end a round early, no more)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    cfg = _config(tmp_path, n_tasks=48, seeds=6, latency_ms=150, concurrency=16)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=_limit(1024))
    held: list[socket.socket] = []
    try:
        for _ in range(600):
            if (run_dir / CONTROL_SOCKET).exists() and _records(run_dir) or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before the flood"
        for _ in range(3):  # 1,100 at once, then again as the sweep closes what it refused
            held += _flood(run_dir, 1100)
            time.sleep(0.5)
        answer = ask(run_dir, {"command": "status"}, timeout_s=60)  # steering answers once the flood stops
        assert answer.get("ok") or "busy" in str(answer.get("error")), answer
        _, err = proc.communicate(timeout=300)
    finally:
        for s in held:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    records = _records(run_dir)
    bad = [(r["error_kind"], r["error"]) for r in records if r["status"] != "ok"]
    assert proc.returncode == EXIT_OK, (err, bad[:3])
    assert len(records) == 288 and not bad, bad[:3]
    assert "Traceback" not in err, err


@pytest.mark.slow
def test_running_out_of_descriptors_stops_the_sweep_with_one_line_and_a_rerun_finishes(tmp_path: Path) -> None:
    # Each request in flight holds a client and a server socket of the embedded sim: 240 in flight
    # cannot fit in 256 descriptors, whatever else the sweep has open.
    cfg = _config(tmp_path, n_tasks=60, seeds=4, latency_ms=400, concurrency=240)
    run_dir = tmp_path / "run"
    proc = subprocess.run([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                          capture_output=True, text=True, preexec_fn=_limit(256), timeout=300)
    err = proc.stderr
    records = _records(run_dir)
    bad = [(r["error_kind"], r["error"]) for r in records if r["status"] != "ok"]
    assert proc.returncode == EXIT_INCOMPLETE, (err, bad[:3])
    assert "out of file descriptors" in err and "ulimit -n" in err, err
    assert "Traceback" not in err and "Unclosed" not in err, err
    assert len(err.strip().splitlines()) <= 3, err
    assert not bad, bad[:3]  # no job is blamed for the process's limit
    assert len(records) < 240
    rerun = subprocess.run([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                           capture_output=True, text=True, preexec_fn=_limit(4096), timeout=300)
    records = _records(run_dir)
    assert rerun.returncode == EXIT_OK, rerun.stderr
    assert len(records) == 240 and len({r["job_id"] for r in records}) == 240
    assert all(r["status"] == "ok" for r in records)
