"""``fasteval run`` unattended: preflight, exit codes, the end-of-run summary, selectors and resume,
and the Python API. (Exit 130 on SIGINT is covered by tests/engine/test_resume.py.)"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

import fasteval
from fasteval.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    before = list(logging.getLogger().handlers)
    try:
        code = main(list(args))
    finally:
        for h in logging.getLogger().handlers[:]:
            if h not in before:
                logging.getLogger().removeHandler(h)
    out = capsys.readouterr()
    return code, out.out, out.err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def sim_process() -> Iterator[str]:
    """A sim server in its own process serving one model, ``served``; yields its base URL."""
    proc = subprocess.Popen([sys.executable, "-m", "providers.sim", "--port", "0", "--model", "served:direct"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = orjson.loads(proc.stdout.readline())["port"]
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(10)


def write(tmp: Path, models: list[dict[str, Any]], **extra: Any) -> Path:
    cfg = {"seeds": 2, "models": models,
           "suites": [{"name": "demo", "options": {"n_tasks": 3, "image_size": [64, 48], "multi_turn_every": 1000},
                       "settings": [{"name": "direct", "tools": [], "max_rounds": 1}]}],
           "run": {"max_concurrency": 4, "fsync": "never"}, **extra}
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def remote(name: str, url: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "provider": "vllm", "base_url": url, "timeouts": {"connect_s": 1},
            "retry": {"max_attempts": 2, "base_delay_s": 0.01, "max_delay_s": 0.02}, **extra}


def records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "records.jsonl"
    return [orjson.loads(x) for x in path.read_bytes().splitlines()] if path.exists() else []


def test_preflight_lists_every_endpoint_problem_at_once_and_runs_nothing(
        tmp_path: Path, sim_process: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FASTEVAL_TEST_NO_SUCH_KEY", raising=False)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    path = write(tmp_path, [
        remote("dead", dead),
        remote("typo", sim_process, model="servd"),
        remote("nokey", sim_process, model="served", api_key_env="FASTEVAL_TEST_NO_SUCH_KEY"),
        remote("fine", sim_process, model="served"),
    ])
    run_dir = tmp_path / "run"
    code, _, err = cli(capsys, "run", str(path), "--run-dir", str(run_dir), "--no-progress")
    assert code == 2
    lines = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    assert len(lines) == 3, err
    assert any(line.startswith("model dead (") and f"connection refused (127.0.0.1:{dead.split(':')[2][:-3]})" in line
               for line in lines), err
    assert any(line.startswith("model typo (") and "does not serve 'servd' (it serves: served)" in line
               for line in lines), err
    assert any(line.startswith("model nokey (") and "FASTEVAL_TEST_NO_SUCH_KEY is not set" in line
               for line in lines), err
    assert not run_dir.exists()


def test_exit_codes_0_ok_1_job_errors_3_endpoint_down(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok = write(tmp_path, [{"name": "sim", "provider": "sim", "policy": "direct"}])
    code, _, err = cli(capsys, "run", str(ok), "--run-dir", str(tmp_path / "ok"), "--no-progress")
    assert code == 0 and "6 ok, 0 error" in err

    failing = write(tmp_path, [{"name": "sim", "provider": "sim", "policy": "direct",
                                "faults": {"schedule": ["400", "400"]}}])
    code, _, err = cli(capsys, "run", str(failing), "--run-dir", str(tmp_path / "err"), "--no-progress")
    assert code == 1 and "4 ok, 2 error" in err
    assert "errors by model and kind" in err and "fatal" in err and "rejected (sim 400)" in err
    code, out, _ = cli(capsys, "status", str(tmp_path / "err"), "--format", "json")
    assert code == 0
    assert orjson.loads(out)["errors_by_kind"] == [
        {"model": "sim", "error_kind": "fatal", "jobs": 2, "example": "fatal HTTP 400: rejected (sim 400)"}]
    code, out, _ = cli(capsys, "report", str(tmp_path / "err"), "--format", "json")
    [row] = orjson.loads(out)["rows"]
    assert row["tokens"]["prompt_tokens"] > 0 and row["tokens"]["completion_tokens"] > 0 and row["mean_latency_s"] > 0
    assert row["tool_calls_per_trajectory"] == 0 and row["terminations"] == {"answered": 4, "error": 2}

    dead = write(tmp_path, [{"name": "sim", "provider": "sim", "policy": "direct"},
                            remote("dead", f"http://127.0.0.1:{free_port()}/v1")],
                 run={"fsync": "never", "breaker": {"failures": 2, "outage_budget_s": 0.3, "probe_initial_s": 0.05}})
    run_dir = tmp_path / "dead"
    code, _, err = cli(capsys, "run", str(dead), "--run-dir", str(run_dir), "--no-progress", "--no-preflight")
    assert code == 3, err
    assert "incomplete: endpoint dead" in err and "connection refused" in err and "rerun to continue" in err
    assert {r["model"] for r in records(run_dir)} == {"sim"}


def test_selectors_narrow_the_plan_and_a_full_rerun_resumes_without_a_config_change(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, [{"name": "a", "provider": "sim", "policy": "direct"},
                            {"name": "b", "provider": "sim", "policy": "direct"}])
    run_dir = tmp_path / "run"
    code, _, err = cli(capsys, "run", str(path), "--run-dir", str(run_dir), "--no-progress",
                       "--limit", "2", "--model", "a", "--seeds", "1")
    assert code == 0, err
    first = records(run_dir)
    assert len(first) == 2 and {(r["model"], r["seed"]) for r in first} == {("a", 1)}

    code, out, _ = cli(capsys, "run", str(path), "--run-dir", str(run_dir), "--dry-run")
    assert code == 0 and "12 jobs, 2 already done" in " ".join(out.split())

    code, _, err = cli(capsys, "run", str(path), "--run-dir", str(run_dir), "--no-progress")
    assert code == 0, err
    assert "10 ok, 0 error, 2 already done" in err
    recs = records(run_dir)
    assert len(recs) == 12 and len({r["job_id"] for r in recs}) == 12

    code, _, err = cli(capsys, "run", str(path), "--run-dir", str(run_dir), "--model", "c")
    assert code == 2 and "--model c" in err


@pytest.mark.slow
def test_python_api_runs_the_demo_and_streams_its_records(tmp_path: Path) -> None:
    summary = fasteval.run(ROOT / "configs" / "demo.yaml", run_dir=tmp_path / "demo", limit=1, seeds=[0])
    assert summary.exit_code == 0 and summary.ok == 4 and summary.errors == 0  # 2 models x 2 settings
    recs = list(fasteval.load_records(tmp_path / "demo"))
    assert len(recs) == 4 and {r["model"] for r in recs} == {"sim-oracle", "sim-guess"}
    again = fasteval.run(ROOT / "configs" / "demo.yaml", run_dir=tmp_path / "demo", limit=1, seeds=[0])
    assert (again.ok, again.skipped) == (0, 4)


@pytest.mark.slow
def test_third_party_warnings_go_to_run_log_not_the_terminal(tmp_path: Path) -> None:
    # tir-synth scoring calls math_verify, which logs a WARNING per parse; a real process, so the
    # terminal is the real stderr handler that `fasteval` sets up.
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "fasteval.cli.main", "run", str(ROOT / "configs" / "demo.yaml"),
                           "--run-dir", str(run_dir), "--no-progress", "--limit", "2", "--setting", "no-tool",
                           "--seeds", "0"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr and "math_verify" not in proc.stderr
    assert "WARNING math_verify" in (run_dir / "run.log").read_text()
