"""``fasteval compare``: B against A on the jobs both ran, per suite × setting, with a verdict and a gate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fasteval.runfolder.index import open_index
from fasteval.view.compare import Side, checkpoint_series, compare
from fasteval.view.paired_stats import mcnemar_exact, paired_bootstrap_ci
from tests.view.sweep_fixture import run_cli

pytestmark = pytest.mark.slow


def _compare(*args: str, code: int = 0) -> dict[str, Any]:
    proc = run_cli("compare", *args, "--format", "json")
    assert proc.returncode == code, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def _groups(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{g['suite']}/{g['setting']}": g for g in result["groups"]}


def test_a_checkpoint_series_compares_each_step_with_the_one_before(series_run: Path) -> None:
    out = _compare(str(series_run), "--series", "ck")
    first, second = out["comparisons"]
    assert (first["a"]["model"], first["b"]["model"]) == ("ck@100", "ck@200")
    assert (second["a"]["model"], second["b"]["model"]) == ("ck@200", "ck@300")
    tools = _groups(first)["demo/tools"]
    assert tools["binary"] and tools["test"] == "mcnemar" and tools["verdict"] == "better"
    assert (tools["n_items"], tools["n_lost"], tools["n_gained"]) == (12, 0, 12)
    assert tools["mcnemar_p"] == mcnemar_exact(0, 12) == pytest.approx(2 / 4096, rel=1e-12)
    assert tools["diff"] == 1.0 and tools["ci"] == [1.0, 1.0]
    assert len(tools["gained"]) == 12 and tools["lost"] == []
    assert _groups(first)["demo/no-tools"]["verdict"] == "no detectable difference"
    assert all(g["verdict"] == "no detectable difference" and g["diff"] == 0 for g in second["groups"])
    assert out["gate"] == "pass"
    assert _compare(str(series_run))["comparisons"] == out["comparisons"]  # one run, no --series: every series


def test_gate_fails_on_a_regression_and_names_the_items_that_flipped(series_run: Path) -> None:
    proc = run_cli("compare", f"{series_run}:ck@200", f"{series_run}:ck@100", "--gate")
    assert proc.returncode == 1, proc.stderr
    assert "worse" in proc.stdout and "gate: FAIL (1 worse at alpha=0.05)" in proc.stdout
    assert "demo/tools lost (A solved, B not): demo-0-0000" in proc.stdout
    ok = run_cli("compare", f"{series_run}:ck@100", f"{series_run}:ck@200", "--gate")
    assert ok.returncode == 0 and "gate: pass" in ok.stdout
    out = _compare(f"{series_run}:ck@200", f"{series_run}:ck@100", "--gate", code=1)
    assert out["gate"] == "fail" and _groups(out["comparisons"][0])["demo/tools"]["n_lost"] == 12


def test_across_run_folders_only_shared_jobs_are_paired(series_run: Path, tmp_path: Path) -> None:
    # Last night's run had only the first half of tonight's records.
    partial = tmp_path / "partial"
    shutil.copytree(series_run, partial, ignore=shutil.ignore_patterns("index.sqlite*"))
    lines = (partial / "records.jsonl").read_bytes().splitlines(keepends=True)
    (partial / "records.jsonl").write_bytes(b"".join(lines[: len(lines) // 2]))
    out = _compare(str(partial), str(series_run))
    assert [(c["a"]["model"], c["b"]["model"]) for c in out["comparisons"]] == [
        ("ck@100", "ck@100"), ("ck@200", "ck@200"), ("ck@300", "ck@300")]
    assert sum(c["n_shared_jobs"] for c in out["comparisons"]) == len(lines) // 2
    assert sum(c["only_b"] for c in out["comparisons"]) == len(lines) - len(lines) // 2
    assert all(g["diff"] == 0 and g["verdict"] == "no detectable difference"
               for c in out["comparisons"] for g in c["groups"])


def test_fractional_items_use_the_bootstrap_and_errors_are_left_out(demo_run: Path) -> None:
    # tir-synth on two seeds: seed means of IoU-style scores are not 0/1, so McNemar does not apply.
    result = compare(Side(demo_run, "sim-guess"), Side(demo_run, "sim-oracle"), n_resamples=2000)
    for g in result["groups"]:
        assert g["test"].startswith("mcnemar" if g["binary"] else "bootstrap")
        assert (g["mcnemar_p"] is None) == (not g["binary"])
    tool = next(g for g in result["groups"] if g["setting"] == "tool")
    # Recomputed from the index: per task, the mean over seeds of each side, then B - A.
    per: dict[str, dict[str, list[float]]] = {}
    with open_index(demo_run) as idx:
        for r in idx.rows(suite="tir-synth", setting="tool", status="ok"):
            if r.model in ("sim-guess", "sim-oracle"):
                per.setdefault(r.task_id, {}).setdefault(r.model, []).append(float(r.score or 0.0))
    tasks = sorted(t for t, v in per.items() if len(v) == 2)
    a = [float(np.mean(per[t]["sim-guess"])) for t in tasks]
    b = [float(np.mean(per[t]["sim-oracle"])) for t in tasks]
    assert tool["n_items"] == len(tasks)
    # 8 tasks: too few for the bootstrap to decide, however clear the gap looks.
    assert not tool["binary"] and tool["diff"] > 0.9 and tool["verdict"] == "no detectable difference"
    assert "fewer than 10 items" in tool["test"]
    assert abs(tool["diff"] - (np.mean(b) - np.mean(a))) < 1e-12
    assert tool["ci"] == list(paired_bootstrap_ci(a, b, n_resamples=2000))
    flaky = compare(Side(demo_run, "sim-oracle"), Side(demo_run, "sim-flaky"), n_resamples=200)
    assert sum(g["n_excluded"] for g in flaky["groups"]) > 0  # sim-flaky's error records have no score to pair


def test_sides_that_name_nothing_are_one_line_usage_errors(series_run: Path, demo_run: Path, tmp_path: Path) -> None:
    for args, said in [((f"{demo_run}:sim-oracle", f"{series_run}:ck@200"), "share no job"),((str(tmp_path / "nope"), str(series_run)), "not a run folder"),
                       ((f"{series_run}:ck@999", str(series_run)), "no model 'ck@999'"),
                       ((str(series_run), "--series", "run7"), "no checkpoint series 'run7'"),
                       ((str(series_run), f"{series_run}:ck@100", "--alpha", "2"), "--alpha")]:
        proc = run_cli("compare", *args)
        assert proc.returncode == 2, (args, proc.stdout)
        assert said in proc.stderr and proc.stderr.count("\n") == 1


def test_checkpoint_series_orders_steps_numerically() -> None:
    assert checkpoint_series(["run7@2000", "run7@500", "base", "run8@1", "x@y@10", "x@y@9"]) == {
        "run7": ["run7@500", "run7@2000"], "x@y": ["x@y@9", "x@y@10"]}


def test_a_series_in_the_table_ends_with_one_summary_of_every_step(series_run: Path) -> None:
    """#39 item 15: ``compare --series`` printed one table per pair of steps and no summary."""
    proc = run_cli("compare", str(series_run), "--series", "ck")
    assert proc.returncode == 0, proc.stderr
    summary = proc.stdout.split("summary: 2 comparisons")[1]
    rows = [line for line in summary.splitlines() if "ck@" in line]
    assert any("ck@100" in r and "ck@200" in r and "better" in r for r in rows), summary
    assert any("ck@200" in r and "ck@300" in r for r in rows), summary
