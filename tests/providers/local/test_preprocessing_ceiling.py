"""A replica whose front end (image preprocessing) is the ceiling is noticed once, from its /metrics.

The sweep runs the real ``fasteval`` CLI with the sim as the server (``serve.command``); the sim's
``--preprocess-ms`` plays vLLM's single API server process, which preprocesses each request's
images before its engine sees it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fasteval.runfolder.names import RUN_LOG
from tests.providers.local.conftest import (
    env,
    fasteval_argv,
    make_checkpoint,
    records,
    serve_block,
    write_config,
)

WARNING = "looks preprocessing-bound"


def sweep(tmp_path: Path, *sim_args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    models = [{"name": "ck", "provider": "vllm", "serve": serve_block(ckpt, *sim_args, health_interval_s=0.2)}]
    run_dir = tmp_path / "run"
    proc = subprocess.run(fasteval_argv("run", str(write_config(tmp_path, models, gpus=[0], n_tasks=16)),
                                        "--run-dir", str(run_dir), "--no-progress"),
                          capture_output=True, text=True, timeout=120, env=env())
    return proc, run_dir


@pytest.mark.slow
def test_a_replica_queueing_in_its_front_end_is_warned_once_in_run_log_and_the_panel(tmp_path: Path) -> None:
    proc, run_dir = sweep(tmp_path, "--preprocess-ms", "40")
    assert proc.returncode == 0, proc.stderr
    assert len(records(run_dir)) == 16 and all(r["status"] == "ok" for r in records(run_dir))
    warnings = [line for line in (run_dir / RUN_LOG).read_text().splitlines() if WARNING in line]
    assert len(warnings) == 1, warnings
    assert "ck-0" in warnings[0] and "serve.api_server_count" in warnings[0] and "image_resize: auto" in warnings[0]
    assert "preprocessing-bound: ck-0" in proc.stderr  # the panel's line (without a terminal: its last print)


@pytest.mark.slow
def test_a_replica_whose_engine_holds_the_requests_is_not_warned(tmp_path: Path) -> None:
    proc, run_dir = sweep(tmp_path, "--latency-ms", "150")
    assert proc.returncode == 0, proc.stderr
    assert WARNING not in (run_dir / RUN_LOG).read_text()
    assert "preprocessing-bound" not in proc.stderr
