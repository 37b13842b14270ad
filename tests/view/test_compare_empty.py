"""``fasteval compare`` against a run folder that holds no record yet (a sweep stopped before its first job ended)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.view.sweep_fixture import FASTEVAL, run_cli


def _config(tmp: Path, latency_ms: float) -> Path:
    cfg = {"seeds": 1, "models": [{"name": "m", "provider": "sim", "policy": "direct", "latency_ms": latency_ms}],
           "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [64, 48]},
                       "settings": [{"name": "plain", "tools": []}]}],
           "run": {"fsync": "never"}}
    path = tmp / f"sweep-{latency_ms:g}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.slow
def test_an_empty_side_is_said_to_have_no_records(tmp_path: Path) -> None:
    full, empty = tmp_path / "full", tmp_path / "empty"
    assert run_cli("run", str(_config(tmp_path, 0)), "--run-dir", str(full), "--no-progress").returncode == 0
    proc = subprocess.Popen([*FASTEVAL, "run", str(_config(tmp_path, 60_000)), "--run-dir", str(empty),
                             "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (empty / "manifest.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the sweep ended before it started"
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)  # stopped before any job could end: a run folder with no record
    proc.communicate(timeout=60)
    assert not (empty / "records.jsonl").exists() or not (empty / "records.jsonl").read_bytes()
    for a, b in ((full, empty), (empty, full)):
        out = run_cli("compare", str(a), str(b))
        assert out.returncode == 2, out
        assert out.stderr == f"error: {empty} has no records yet: nothing to compare\n", out.stderr
