"""``fasteval run`` and the Python API take one run path (``api.run_planned``): a start that fails
claims no folder through either, a failed preflight is the same ``ConfigError``, and a Ctrl-C while
preflight waits on an endpoint still ends with nothing run and no folder."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import fasteval
from fasteval.core.errors import ConfigError
from fasteval.core.exitcodes import EXIT_INTERRUPTED

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]


def _config(tmp: Path, *models: dict[str, Any]) -> Path:
    cfg = {"seeds": 1, "models": list(models) or [{"name": "sim", "provider": "sim", "policy": "direct"}],
           "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [32, 24]}}],
           "run": {"max_concurrency": 2, "fsync": "never"}}
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _remote(name: str, port: int) -> dict[str, Any]:
    return {"name": name, "provider": "vllm", "base_url": f"http://127.0.0.1:{port}/v1",
            "retry": {"max_attempts": 1}}


def test_the_api_claims_no_folder_for_a_start_the_sweep_refuses(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError, match="--setting nosuch: no such setting"):
        fasteval.run(_config(tmp_path), run_dir=run_dir, preflight=False, settings=["nosuch"])
    assert not run_dir.exists()
    run_dir.mkdir()
    (run_dir / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError):
        fasteval.run(_config(tmp_path), run_dir=run_dir, preflight=False, settings=["nosuch"])
    assert (run_dir / "notes.txt").read_text() == "mine", "a folder the run did not create is never removed"


def test_a_failed_preflight_through_the_api_is_a_config_error_with_one_line_per_endpoint(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError) as e:
        fasteval.run(_config(tmp_path, _remote("dead", port)), run_dir=run_dir)
    assert len(e.value.problems) == 1 and e.value.problems[0].startswith("model dead (")
    assert str(e.value).startswith("preflight: ") and not run_dir.exists()


def test_ctrl_c_while_preflight_waits_runs_nothing_and_claims_no_folder(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts the connection, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        silent.settimeout(120)
        run_dir = tmp_path / "run"
        cfg = _config(tmp_path, _remote("silent", silent.getsockname()[1]))
        proc = subprocess.Popen([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            conn, _ = silent.accept()  # preflight is asking
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
            conn.close()
        finally:
            proc.kill()
            proc.wait()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert err.strip() == "interrupted during preflight: nothing ran"
    assert not run_dir.exists()
