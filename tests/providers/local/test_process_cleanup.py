"""No server outlives fasteval: kill -9, Ctrl-C, and the ``fasteval serve`` command."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from tests.providers.local.conftest import (
    env,
    fasteval_argv,
    gone_within,
    make_checkpoint,
    serve_block,
    write_config,
)


def wait_ready(run_dir: Path, labels: list[str], proc: subprocess.Popen[str], timeout: float = 60) -> list[int]:
    """The process groups of the named replicas once every one is ready."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        docs = []
        for label in labels:
            path = run_dir / "servers" / f"{label}.json"
            if path.exists():
                docs.append(orjson.loads(path.read_bytes()))
        if len(docs) == len(labels) and all(d["state"] == "ready" for d in docs):
            return [int(d["pgid"]) for d in docs]
        time.sleep(0.1)
    raise AssertionError("servers never became ready")


def slow_sweep(tmp_path: Path) -> tuple[list[str], Path]:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    serve = serve_block(ckpt, "--latency-ms", "2000", replicas=2)
    config = write_config(tmp_path, [{"name": "ck", "provider": "vllm", "serve": serve}], gpus=[0, 1], n_tasks=4)
    run_dir = tmp_path / "run"
    return fasteval_argv("run", str(config), "--run-dir", str(run_dir), "--no-progress"), run_dir


@pytest.mark.slow
def test_kill_9_of_a_sweep_leaves_no_server_behind(tmp_path: Path) -> None:
    argv, run_dir = slow_sweep(tmp_path)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env())
    try:
        pgids = wait_ready(run_dir, ["ck-0", "ck-1"], proc)
        tmpdirs = [Path(orjson.loads((run_dir / "servers" / f"ck-{i}.json").read_bytes())["tmpdir"]) for i in range(2)]
        assert all(t.is_dir() for t in tmpdirs)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        for pgid in pgids:
            assert gone_within(pgid, 5), f"server group {pgid} survived kill -9 of fasteval"
        time.sleep(0.5)
        assert not any(t.exists() for t in tmpdirs), "each server's TMPDIR goes with it"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_ctrl_c_of_a_sweep_stops_its_servers(tmp_path: Path) -> None:
    argv, run_dir = slow_sweep(tmp_path)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env())
    try:
        pgids = wait_ready(run_dir, ["ck-0", "ck-1"], proc)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
        for pgid in pgids:
            assert gone_within(pgid, 5)
        for i in range(2):
            assert orjson.loads((run_dir / "servers" / f"ck-{i}.json").read_bytes())["state"] == "stopped"
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_fasteval_serve_prints_base_urls_and_stops_on_ctrl_c_or_kill_9(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    config = write_config(tmp_path, [{"name": "ck", "provider": "vllm", "serve": serve_block(ckpt, replicas=2)},
                                     {"name": "api", "provider": "sim"}], gpus=[0, 1])
    for how in ("ctrl-c", "kill -9"):
        run_dir = tmp_path / f"serve-{how.replace(' ', '')}"
        proc = subprocess.Popen(fasteval_argv("serve", str(config), "--model", "ck", "--run-dir", str(run_dir)),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
        try:
            assert proc.stdout is not None
            lines = [proc.stdout.readline(), proc.stdout.readline()]
            assert lines[0].startswith("ck-0: http://127.0.0.1:") and "/v1" in lines[0], lines
            assert lines[1].startswith("ck-1: http://127.0.0.1:"), lines
            pgids = wait_ready(run_dir, ["ck-0", "ck-1"], proc)
            if how == "ctrl-c":
                proc.send_signal(signal.SIGINT)
                assert proc.wait(30) == 0
            else:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
            for pgid in pgids:
                assert gone_within(pgid, 5), how
        finally:
            if proc.poll() is None:
                proc.kill()


def test_fasteval_serve_refuses_an_unknown_model(tmp_path: Path) -> None:
    config = write_config(tmp_path, [{"name": "api", "provider": "sim"}], gpus=[0])
    proc = subprocess.run(fasteval_argv("serve", str(config), "--model", "nope"), capture_output=True, text=True,
                          timeout=60, env=env())
    assert proc.returncode == 2 and "no served model or role named 'nope'" in proc.stderr
