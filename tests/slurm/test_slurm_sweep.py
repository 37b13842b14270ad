"""fasteval slurm submit/status/resume against a real single-node Slurm cluster (conftest)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fasteval.cli.main import main
from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from fasteval.slurm.cluster import ACTIVE, Cluster
from fasteval.slurm.state import read_jobs

SECRET = "sk-slurm-test-secret-0123456789abcdef"


def _config(tmp_path: Path, *, n_tasks: int = 6, seeds: int = 2, latency_ms: int = 5, concurrency: int = 32) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "seeds": seeds,
        "models": [{"name": "sim-a", "provider": "sim", "policy": "tools", "latency_ms": latency_ms},
                   {"name": "sim-b", "provider": "sim", "policy": "direct", "latency_ms": latency_ms}],
        "roles": {},
        "suites": [{"name": "demo", "options": {"n_tasks": n_tasks, "image_size": [160, 120]},
                    "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}],
        "run": {"max_concurrency": concurrency}}))
    return path


def _wait(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


def _job_done(job_id: str) -> Callable[[], bool]:
    def done() -> bool:
        states = Cluster().states([job_id])
        return bool(states) and all(s.state not in ACTIVE for s in states.values())
    return done


def _records(run: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (run / "records.jsonl").read_bytes().splitlines()]


def _outcomes(run: Path) -> dict[str, tuple[Any, ...]]:
    recs = _records(run)
    ids = [r["job_id"] for r in recs]
    assert len(ids) == len(set(ids)), "a job appears twice in the merged run"
    return {r["job_id"]: (r["status"], r["score"], r["answer"]) for r in recs}


def _unsharded(cfg: Path, tmp_path: Path) -> dict[str, tuple[Any, ...]]:
    asyncio.run(run_sweep(load_config(cfg), RunOptions(run_dir=tmp_path / "unsharded", progress=False)))
    return _outcomes(tmp_path / "unsharded")


@pytest.fixture
def cluster_env(slurm_cluster: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for k, v in slurm_cluster.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("FE_SLURM_TEST_KEY", SECRET)
    return slurm_cluster


def test_submit_runs_every_shard_and_the_merge_equals_an_unsharded_run(
        cluster_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path)
    run = tmp_path / "run"
    assert main(["slurm", "submit", str(cfg), "--run-dir", str(run), "--shards", "3", "--time", "10"]) == 0
    jobs = read_jobs(run)
    assert jobs is not None
    merge_id = jobs["submissions"][0]["merge_job_id"]
    _wait(_job_done(merge_id), 240, "the merge job")
    assert (run / "report.json").exists(), (run / "slurm" / "logs" / "merge.log").read_text()
    assert _outcomes(run) == _unsharded(cfg, tmp_path)
    capsys.readouterr()
    assert main(["slurm", "status", str(run), "--format", "json"]) == 0
    st = orjson.loads(capsys.readouterr().out)
    assert [s["slurm_state"] for s in st["shards"]] == ["COMPLETED"] * 3
    assert sum(s["done"] for s in st["shards"]) == len(_records(run)) and st["merge"]["merged"]
    assert all(s["last_log_line"] for s in st["shards"])
    # a second submit into the same run folder is refused and points to resume
    assert main(["slurm", "submit", str(cfg), "--run-dir", str(run), "--shards", "3"]) == 2
    assert "slurm resume" in capsys.readouterr().err


def test_a_cancelled_shard_is_resumed_exactly_once(cluster_env: dict[str, str], tmp_path: Path) -> None:
    cfg = _config(tmp_path, n_tasks=10, seeds=2, latency_ms=400, concurrency=2)
    run = tmp_path / "run"
    assert main(["slurm", "submit", str(cfg), "--run-dir", str(run), "--shards", "2"]) == 0
    jobs = read_jobs(run)
    assert jobs is not None
    array = jobs["submissions"][0]["array_job_id"]
    shard0 = run / "shards" / "0" / "records.jsonl"
    _wait(lambda: shard0.exists() and len(shard0.read_bytes().splitlines()) >= 3, 120, "shard 0 to make progress")
    subprocess.run(["scancel", f"{array}_0"], check=True, timeout=30)
    _wait(_job_done(array), 240, "the array to end")
    assert main(["slurm", "resume", str(run)]) == 0
    jobs = read_jobs(run)
    assert jobs is not None and jobs["submissions"][-1]["tasks"] == [0]
    _wait(_job_done(jobs["submissions"][-1]["merge_job_id"]), 240, "the resumed merge")
    ok_ids = [r["job_id"] for r in _records(run / "shards" / "0") if r["status"] == "ok"]
    assert len(ok_ids) == len(set(ok_ids)), "a job of the cancelled shard ran twice"
    assert _outcomes(run) == _unsharded(cfg, tmp_path)
    assert main(["slurm", "resume", str(run)]) == 0  # nothing left: says so and submits nothing
    assert len((read_jobs(run) or {})["submissions"]) == 2


def test_a_shard_stopped_by_its_time_limit_is_resubmitted_and_finished(cluster_env: dict[str, str],
                                                                            tmp_path: Path) -> None:
    cfg = _config(tmp_path, n_tasks=40, seeds=2, latency_ms=500, concurrency=1)
    run = tmp_path / "run"
    # a 1-minute limit with the warning 50 s before it: fasteval gets SIGTERM after ~10 s and stops
    assert main(["slurm", "submit", str(cfg), "--run-dir", str(run), "--shards", "1", "--time", "1",
                 "--signal-grace", "50"]) == 0
    jobs = read_jobs(run)
    assert jobs is not None
    _wait(_job_done(jobs["submissions"][0]["array_job_id"]), 180, "the time-limited shard to stop")
    log = (run / "slurm" / "logs" / "shard-0.log").read_text()
    # stopped by the warning signal (130: cleanly; 143: it came before fasteval had started)
    assert re.search(r"exited (130|143)", log), log[-2000:]
    assert len(_records(run / "shards" / "0")) < 160  # 160 jobs at 0.5 s each cannot fit in a minute
    _config(tmp_path, n_tasks=40, seeds=2, latency_ms=500, concurrency=64)  # an operational knob: not a config change
    assert main(["slurm", "resume", str(run), "--time", "10"]) == 0
    jobs = read_jobs(run)
    assert jobs is not None
    _wait(_job_done(jobs["submissions"][-1]["merge_job_id"]), 400, "the resubmitted shard and merge")
    assert _outcomes(run) == _unsharded(_config(tmp_path, n_tasks=40, seeds=2, latency_ms=0, concurrency=32),
                                              tmp_path)


def test_dry_run_writes_scripts_sbatch_accepts_and_no_secret(cluster_env: dict[str, str], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    raw = yaml.safe_load(_config(tmp_path).read_text())
    raw["models"].append({"name": "api", "provider": "openai", "base_url": "http://127.0.0.1:9/v1",
                          "api_key_env": "FE_SLURM_TEST_KEY"})
    cfg = tmp_path / "with-key.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    run = tmp_path / "run"
    assert main(["slurm", "submit", str(cfg), "--run-dir", str(run), "--shards", "3", "--shard-by", "model",
                 "--time", "01:00:00", "--cpus-per-shard", "1", "--mem", "1G", "--sbatch-arg=--comment=fe",
                 "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "sbatch --parsable" in printed and read_jobs(run) is None  # nothing submitted
    for name in ("array.sbatch", "merge.sbatch"):
        script = run / "slurm" / name
        text = script.read_text()
        assert SECRET not in text and "FE_SLURM_TEST_KEY" not in text
        Cluster().test_only(str(script))  # raises SlurmError if the controller would refuse it
    array = (run / "slurm" / "array.sbatch").read_text()
    assert "--array=0-2" in array and "fasteval_shard_by=model" in array and "--signal=B:TERM@120" in array
