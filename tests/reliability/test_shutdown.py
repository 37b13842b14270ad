"""A request hanging in the sim must not hold the process once the sweep is over (or interrupted).

The bound below is a hang detector, not a speed figure: before the fix the process stayed
alive for aiohttp's 60 s shutdown grace after every job had finished.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import yaml

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]
HANG_BOUND_S = 45  # the unfixed behaviour holds the process >= 60 s


def _config(tmp: Path, faults: dict[str, object]) -> Path:
    cfg = {
        "seeds": 1,
        "models": [{"name": "sim-hang", "provider": "sim", "policy": "direct", "faults": faults,
                    "timeouts": {"read_s": 0.5, "attempt_s": 1.0}, "retry": {"max_attempts": 2}}],
        "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [32, 24]}}],
        "run": {"max_concurrency": 2},
    }
    p = tmp / "sweep.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_a_hung_request_does_not_delay_exit_after_the_sweep(tmp_path: Path) -> None:
    cfg = _config(tmp_path, {"schedule": ["hang"], "hang_s": 3600})
    res = subprocess.run([*FASTEVAL, "run", str(cfg), "--run-dir", str(tmp_path / "run"), "--no-progress"],
                         capture_output=True, text=True, timeout=HANG_BOUND_S)
    assert res.returncode == 0, res.stderr
    assert "4 ok, 0 error" in res.stderr


def test_interrupt_during_hung_requests_exits_promptly(tmp_path: Path) -> None:
    cfg = _config(tmp_path, {"p_hang": 1.0, "hang_s": 3600})
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for _ in range(600):  # the plan is written just before the first requests go out
        manifest = run_dir / "manifest.json"
        if manifest.exists() and "plan" in orjson.loads(manifest.read_bytes() or b"{}"):
            break
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=HANG_BOUND_S)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
