"""``fasteval ctl`` on a sweep that serves a checkpoint itself (``serve.command``: the sim as the server).

The real CLI runs the sweep in a subprocess; the real CLI steers it: a served model is paused with
``--now`` and resumed, then drained, its servers stop while an API model keeps running, and the
rerun finishes every job exactly once.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from fasteval.core.errors import NoSweepRunning
from fasteval.core.exitcodes import EXIT_INCOMPLETE, EXIT_OK
from fasteval.runfolder.control import ask
from tests.providers.local.conftest import (
    env,
    fasteval_argv,
    make_checkpoint,
    records,
    serve_block,
    write_config,
)


def ctl(run_dir: Path, *args: str) -> dict[str, object]:
    proc = subprocess.run(fasteval_argv("ctl", str(run_dir), *args, "--json"), capture_output=True, text=True,
                          timeout=60, env=env())
    answer: dict[str, object] = orjson.loads(proc.stdout)
    return answer


def wait_for(check: object, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _models(run_dir: Path) -> dict[str, dict[str, int]]:
    """Polled through the socket from here (a CLI start per poll would cost seconds on a loaded machine)."""
    try:
        answer = ask(run_dir, {"command": "status"})
    except NoSweepRunning:
        return {}
    return answer["status"]["models"]  # type: ignore[no-any-return]


@pytest.mark.slow
def test_a_served_model_paused_now_resumed_then_drained_stops_its_servers_and_a_rerun_completes(
        tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    models = [{"name": "ck", "provider": "vllm", "serve": serve_block(ckpt, "--latency-ms", "600")},
              {"name": "api", "provider": "sim", "policy": "tools", "latency_ms": 5000}]
    config = write_config(tmp_path, models, gpus=[0], n_tasks=6)
    run_dir = tmp_path / "run"
    argv = fasteval_argv("run", str(config), "--run-dir", str(run_dir), "--no-progress", "--max-concurrency", "2")
    sweep = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        wait_for(lambda: _models(run_dir).get("ck", {}).get("in_flight", 0) >= 1, "a served job in flight")
        paused = ctl(run_dir, "pause", "--model", "ck", "--now")
        assert paused["ok"], paused
        assert ctl(run_dir, "resume", "--model", "ck")["ok"]
        drained = ctl(run_dir, "drain", "--model", "ck")
        assert drained["ok"], drained
        server_state = run_dir / "servers" / "ck-0.json"
        wait_for(lambda: server_state.exists() and orjson.loads(server_state.read_bytes()).get("stopped_at"),
                 "the drained model's server stopped")
        assert _models(run_dir).get("api") is not None  # the sweep still runs the API model meanwhile
        out, err = sweep.communicate(timeout=180)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == EXIT_INCOMPLETE, err
    assert "drained or cancelled (ck)" in err
    first = records(run_dir)
    assert sum(r["model"] == "api" for r in first) == 6
    assert 1 <= sum(r["model"] == "ck" for r in first) < 6
    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env())
    assert rerun.returncode == EXIT_OK, rerun.stderr
    recs = records(run_dir)
    assert sorted(Counter(r["job_id"] for r in recs).values()) == [1] * 12  # every job once, none twice
    assert all(r["status"] == "ok" for r in recs)
    commands = [orjson.loads(line)["command"] for line in (run_dir / "control.jsonl").read_bytes().splitlines()]
    assert commands == ["pause --model ck --now", "resume --model ck", "drain --model ck"]
