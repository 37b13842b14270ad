"""Resume after a real SIGKILL, torn-line repair, config-change refusal, shard + merge, secrets."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fasteval.config.endpoint import EndpointSpec
from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from fasteval.runfolder.merge import MergeConflict, merge_runs
from fasteval.runfolder.records import repair_tail
from fasteval.view.report import report, status
from providers.sim import SimModel, SimServer

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]


def make_config(tmp: Path, *, n_tasks: int = 6, seeds: int = 2, latency_ms: float = 0.0, **extra: Any) -> Path:
    cfg = {
        "seeds": seeds,
        "models": [
            {"name": "sim-tools", "provider": "sim", "policy": "tools", "latency_ms": latency_ms},
            {"name": "sim-direct", "provider": "sim", "policy": "direct", "latency_ms": latency_ms},
        ],
        "suites": [{"name": "demo", "options": {"n_tasks": n_tasks, "image_size": [320, 240]},
                    "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}],
        "run": {"max_concurrency": 8, "fsync": "always"},
        **extra,
    }
    p = tmp / "sweep.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def lines(run_dir: Path) -> list[bytes]:
    return (run_dir / "records.jsonl").read_bytes().splitlines(keepends=True)


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FASTEVAL, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_resume_after_sigkill_runs_every_job_exactly_once(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, n_tasks=8, seeds=3, latency_ms=40)
    run_dir = tmp_path / "run"
    before_kill: list[bytes] = []
    for delay in (1.2, 0.8, 0.8):
        proc = subprocess.Popen([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if (run_dir / "records.jsonl").exists():
            before_kill = [ln for ln in lines(run_dir) if ln.endswith(b"\n")]
    done = run_cli("run", str(cfg), "--run-dir", str(run_dir), "--no-progress")
    assert done.returncode == 0, done.stderr
    final = lines(run_dir)
    ids = [orjson.loads(ln)["job_id"] for ln in final]
    assert len(ids) == len(set(ids)) == 8 * 3 * 2  # every job exactly once
    assert all(ln.endswith(b"\n") for ln in final)
    assert final[: len(before_kill)] == before_kill  # finished records untouched, byte for byte
    st = orjson.loads(run_cli("status", str(run_dir), "--format", "json").stdout)
    assert (st["total"], st["done"], st["error"], st["remaining"]) == (48, 48, 0, 0)


@pytest.mark.slow
def test_sigint_stops_cleanly_and_resume_finishes(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, n_tasks=8, seeds=3, latency_ms=150)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # interrupt once the sweep is demonstrably running (first record written), however slow startup is
    records = run_dir / "records.jsonl"
    for _ in range(600):
        if records.exists() and records.stat().st_size > 0:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "rerun the same command to resume" in err
    partial = len(lines(run_dir))
    assert run_cli("run", str(cfg), "--run-dir", str(run_dir), "--no-progress").returncode == 0
    assert len(lines(run_dir)) == 48 >= partial


async def test_torn_last_line_is_repaired_before_appending(tmp_path: Path) -> None:
    cfg = load_config(make_config(tmp_path, n_tasks=2, seeds=1))
    run_dir = tmp_path / "run"
    await run_sweep(cfg, RunOptions(run_dir=run_dir, progress=False))
    good = lines(run_dir)
    first_id = orjson.loads(good[0])["job_id"]
    # simulate a kill in the middle of writing: drop the last record and leave half of it
    (run_dir / "records.jsonl").write_bytes(b"".join(good[:-1]) + good[-1][: len(good[-1]) // 2])
    res = await run_sweep(cfg, RunOptions(run_dir=run_dir, progress=False))
    assert res.ok == 1 and res.skipped == len(good) - 1
    final = lines(run_dir)
    assert final[:-1] == good[:-1] and len(final) == len(good)
    assert orjson.loads(final[0])["job_id"] == first_id


def test_repair_tail_cases(tmp_path: Path) -> None:
    p = tmp_path / "r.jsonl"
    p.write_bytes(b'{"job_id": 1}\n{"job_id": 2}\n')
    assert repair_tail(p) == 0
    p.write_bytes(b'{"job_id": 1}\n{"job_')
    assert repair_tail(p) == len(b'{"job_') and p.read_bytes() == b'{"job_id": 1}\n'
    p.write_bytes(b'{"job_')
    assert repair_tail(p) == 6 and p.read_bytes() == b""


async def test_an_edited_config_runs_only_what_changed_without_a_flag(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    await run_sweep(load_config(make_config(tmp_path, n_tasks=2, seeds=1)), RunOptions(run_dir=run_dir, progress=False))
    # more tasks: the suite's data changed, so its groups are new fingerprints and run again
    changed = load_config(make_config(tmp_path, n_tasks=3, seeds=1))
    res = await run_sweep(changed, RunOptions(run_dir=run_dir, progress=False))
    assert res.ok == 6 and res.skipped == 0
    assert status(run_dir)["done"] == 6  # the 4 old records are kept aside, not counted
    # operational knobs change nothing
    ops = load_config(make_config(tmp_path, n_tasks=3, seeds=1))
    ops.raw["run"]["max_concurrency"] = 3
    again = await run_sweep(ops, RunOptions(run_dir=run_dir, progress=False))
    assert again.ok == 0 and again.skipped == 6
    cli = run_cli("run", str(make_config(tmp_path, n_tasks=3, seeds=1)), "--run-dir", str(run_dir), "--no-progress")
    assert cli.returncode == 0, cli.stderr


async def test_shards_merged_equal_an_unsharded_run(tmp_path: Path) -> None:
    cfg = load_config(make_config(tmp_path, n_tasks=5, seeds=2))
    await run_sweep(cfg, RunOptions(run_dir=tmp_path / "full", progress=False))
    for i in range(3):
        await run_sweep(cfg, RunOptions(run_dir=tmp_path / f"s{i}", shard=(i, 3), progress=False))
    shard_ids = [{orjson.loads(ln)["job_id"] for ln in lines(tmp_path / f"s{i}")} for i in range(3)]
    assert not (shard_ids[0] & shard_ids[1]) and all(shard_ids)
    merge_runs(tmp_path / "merged", [tmp_path / f"s{i}" for i in range(3)])

    def key(run: Path) -> set[tuple[Any, ...]]:
        return {(r["job_id"], r["score"], r["answer"], r["status"]) for r in map(orjson.loads, lines(run))}

    assert key(tmp_path / "merged") == key(tmp_path / "full")
    assert status(tmp_path / "merged")["total"] == 20
    # token counts may differ between runs (the sim numbers its tool calls per process); latency is
    # wall-clock; tool calls follow the sim's request counter: the scores must agree, these need not
    varying = {"ci95", "tokens", "cost_usd", "mean_latency_s", "tool_calls_per_trajectory"}
    strip = [{k: v for k, v in row.items() if k not in varying} for row in report(tmp_path / "full")["rows"]]
    assert strip == [{k: v for k, v in row.items() if k not in varying} for row in report(tmp_path / "merged")["rows"]]
    # a disagreeing duplicate is refused
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_bytes((tmp_path / "s0" / "manifest.json").read_bytes())
    rec = orjson.loads(lines(tmp_path / "s0")[0])
    rec["answer"] = "something else"
    (bad / "records.jsonl").write_bytes(orjson.dumps(rec) + b"\n")
    with pytest.raises(MergeConflict, match="different"):
        merge_runs(tmp_path / "merged2", [tmp_path / "s0", bad])


async def test_api_keys_never_reach_records_manifest_or_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-THIS-MUST-NOT-LEAK-1234567890"
    monkeypatch.setenv("FASTEVAL_TEST_KEY", secret)
    server = SimServer([SimModel("remote-tools", policy="tools")])
    await server.start()
    try:
        cfg_path = tmp_path / "sweep.yaml"
        cfg_path.write_text(yaml.safe_dump({
            "models": [{"name": "remote", "provider": "openai", "base_url": server.base_url,
                        "model": "remote-tools", "api_key_env": "FASTEVAL_TEST_KEY"}],
            "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [320, 240]}}]}))
        run_dir = tmp_path / "run"
        res = await run_sweep(load_config(cfg_path), RunOptions(run_dir=run_dir, progress=False))
        assert res.ok == 4
    finally:
        await server.stop()
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"models": [{"name": "x", "provider": "openai", "base_url": "http://127.0.0.1:9/v1",
                                               "api_key": secret}], "suites": [{"name": "demo"}]}))
    out = run_cli("run", str(bad), "--run-dir", str(tmp_path / "bad-run"))
    assert out.returncode == 2 and "api_key_env" in out.stderr and secret not in out.stderr
    assert not (tmp_path / "bad-run" / "manifest.json").exists() or secret.encode() not in (
        tmp_path / "bad-run" / "manifest.json").read_bytes()


async def test_provider_errors_become_error_records_and_rerun_on_resume(tmp_path: Path) -> None:
    cfg_path = tmp_path / "sweep.yaml"
    cfg_path.write_text(yaml.safe_dump({
        "models": [{"name": "flaky", "provider": "sim", "policy": "tools",
                    "faults": {"schedule": ["401"]}, "retry": {"max_attempts": 2}}],
        "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [320, 240]}}],
        "run": {"max_concurrency": 1}}))
    run_dir = tmp_path / "run"
    res = await run_sweep(load_config(cfg_path), RunOptions(run_dir=run_dir, progress=False))
    assert (res.ok, res.errors) == (3, 1)
    err = [orjson.loads(ln) for ln in lines(run_dir) if orjson.loads(ln)["status"] == "error"][0]
    assert err["error_kind"] == "auth" and err["answer"] is None and err["score"] is None
    assert err["trajectory"]["termination"] == "error"
    kept = await run_sweep(load_config(cfg_path), RunOptions(run_dir=run_dir, progress=False, keep_errors=True))
    assert kept.total == 0
    # the endpoint is fixed (no more 401): the errored job, and only it, runs again
    fixed = load_config(cfg_path)
    fixed.models[0] = EndpointSpec.of(fixed.models[0].name, {**fixed.models[0].options, "faults": {}})
    again = await run_sweep(fixed, RunOptions(run_dir=run_dir, progress=False))  # faults shape no result
    assert (again.ok, again.errors) == (1, 0)
    st = status(run_dir)
    assert (st["done"], st["error"], st["remaining"]) == (4, 0, 0)
