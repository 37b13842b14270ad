"""Batch mode on the command line: --no-wait, Ctrl-C, status, and ``fasteval batches cancel``."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]


@pytest.fixture
def slow_sim() -> Any:
    """A sim process whose batches take 4 s: long enough to leave them running."""
    proc = subprocess.Popen([sys.executable, "-m", "providers.sim", "--model", "bm:direct",
                             "--batch-turnaround-s", "4"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(orjson.loads(proc.stdout.readline())["port"])
    yield port
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)


def sim_batches(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/sim/batches", timeout=10) as resp:
        data: dict[str, Any] = orjson.loads(resp.read())
    return data


def config(tmp: Path, port: int) -> Path:
    cfg = {"seeds": 1, "models": [{"name": "bm", "provider": "openai", "base_url": f"http://127.0.0.1:{port}/v1",
                                   "batch": {"gather_s": 0.1, "poll_s": 0.2}}],
           "suites": [{"name": "demo", "options": {"n_tasks": 3, "image_size": [160, 120]},
                       "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}]}
    p = tmp / "sweep.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FASTEVAL, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_no_wait_exits_3_saying_when_to_rerun_and_the_rerun_collects(tmp_path: Path, slow_sim: int) -> None:
    run_dir = tmp_path / "run"
    first = cli("run", str(config(tmp_path, slow_sim)), "--run-dir", str(run_dir), "--no-progress", "--no-wait")
    assert first.returncode == 3, first.stderr
    assert "batch(es) at the provider" in first.stderr and "rerun the same command" in first.stderr
    status = orjson.loads(cli("status", str(run_dir), "--format", "json").stdout)
    assert status["batches"] and status["batches"][0]["batch_id"]
    done = cli("run", str(config(tmp_path, slow_sim)), "--run-dir", str(run_dir), "--no-progress")
    assert done.returncode == 0, done.stderr
    recs = [orjson.loads(x) for x in (run_dir / "records.jsonl").read_bytes().splitlines()]
    assert len(recs) == 3 and all(r["status"] == "ok" and r["metadata"]["batch_id"] for r in recs)
    sent = sim_batches(slow_sim)["submitted"]
    assert len(sent) == len(set(sent))


def test_ctrl_c_leaves_batches_running_and_says_so(tmp_path: Path, slow_sim: int) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([*FASTEVAL, "run", str(config(tmp_path, slow_sim)), "--run-dir", str(run_dir),
                             "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for _ in range(600):
        if sim_batches(slow_sim)["created"]:
            break
        time.sleep(0.05)
    time.sleep(0.3)  # the id is journaled
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "left running at the provider" in err and "batches cancel" in err
    assert list(sim_batches(slow_sim)["batches"].values()) == ["in_progress"]


@pytest.mark.slow
def test_batches_cancel_cancels_and_collects(tmp_path: Path, slow_sim: int) -> None:
    run_dir = tmp_path / "run"
    first = cli("run", str(config(tmp_path, slow_sim)), "--run-dir", str(run_dir), "--no-progress", "--no-wait")
    assert first.returncode == 3, first.stderr
    out = cli("batches", "cancel", str(run_dir), "--poll-s", "0.2")
    assert out.returncode == 0, out.stderr
    assert "can take minutes" in out.stderr and "1 batch(es) cancelled" in out.stderr
    assert list(sim_batches(slow_sim)["batches"].values()) == ["cancelled"]
    rows = orjson.loads(cli("batches", "list", str(run_dir), "--format", "json").stdout)
    assert [r["state"] for r in rows] == ["cancelled"]
