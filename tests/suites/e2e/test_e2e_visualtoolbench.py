"""VisualToolBench end to end through ``fasteval run``: HF parquet, sim models, a sim rubric judge.

The judge is a ``scripted`` sim keyed on (rubric, model answer) inside the judge prompt, so ARS
and APR are known by hand. One model answers from a script; another calls the calculator (the
only VisualToolBench tool the sim can use offline) and answers with its output, which fills the
paper's tool-use table (proactivity, success rate, volume). A row with broken rubric JSON is a
``load_error`` record.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_support import (
    cli,
    latest,
    load_fixture_module,
    report_rows,
    resume_and_rescore,
    run_summary,
    write_config,
)

vtb = load_fixture_module("visualtoolbench/vtb_fixtures.py")

MODEL_SCRIPT = [
    {"match": "gauge on the left", "reply": "It reads 42 kPa."},
    {"match": "highest revenue", "reply": "March."},
    {"match": "And the lowest", "reply": "July."},
    {"match": "Compare with this chart", "reply": "Both peak in March."},
]


def _verdict(met: bool) -> str:
    return json.dumps({"explanation": "scripted", "judge_result": "Met" if met else "Not Met"})


def _rule(rubric: str, answer: str, met: bool) -> dict[str, str]:
    return {"match": rf"### Rubric criterion\n{rubric}\n\n### Model answer\n{answer}", "reply": _verdict(met)}


JUDGE_SCRIPT = [
    _rule("States 42 kPa", "It reads 42 kPa", True),   # single, weight 5
    _rule("Says March", r"March\.", True),              # multi turn 1, weight 4
    _rule("Says July", r"July\.", False),               # multi turn 2, weight 5: fails APR
    _rule("Is concise", r"July\.", True),               # multi turn 2, weight 1
]
# Everything else, including "Uses numbering" (2) and "Notes the shared March peak" (3): Not Met.
SEEDS = 2
SINGLE, MULTI, BAD = vtb.SINGLE_ID, vtb.MULTI_ID, vtb.BAD_ID


def _config(tmp_path: Path) -> Path:
    data = vtb.write_parquet(tmp_path / "test.parquet", vtb.sample_rows())
    return write_config(tmp_path, {
        "name": "vtb-e2e",
        "seeds": SEEDS,
        "models": [
            {"name": "sim-answer", "provider": "sim", "policy": "scripted", "script": MODEL_SCRIPT},
            {"name": "sim-calc", "provider": "sim", "policy": "tools", "tool_uses": 1,
             "default_reply": "I cannot tell."},
        ],
        "roles": {"judge": {"provider": "sim", "policy": "scripted", "script": JUDGE_SCRIPT,
                            "default_reply": _verdict(False)}},
        "suites": [{"name": "visualtoolbench", "options": {"path": str(data), "fidelity": "reference"},
                    "settings": [{"name": "no-tool"},
                                 {"name": "calc", "tools": ["calculator"], "max_rounds": 3}]}],
    })


def test_visualtoolbench_runs_reports_resumes_and_rescores_from_the_cache(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, run_dir = _config(tmp_path), tmp_path / "run"
    code, _, err = cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 1, err  # finished, some jobs (the bad rows) errored
    jobs = 2 * 2 * 3 * SEEDS  # models × settings × rows × seeds
    assert run_summary(err) == (jobs * 2 // 3, jobs // 3, 0, jobs)

    recs = latest(run_dir)
    for r in recs:
        if r["task_id"] == BAD:
            assert (r["status"], r["error_kind"]) == ("error", "load_error")
            assert "rubrics_by_turn[1]" in r["error"]
            continue
        assert r["status"] == "ok", r["error"]
        d = r["score_details"]
        if r["model"] == "sim-answer":
            if r["task_id"] == SINGLE:
                assert (r["score"], d["ars"], d["judge_calls"]) == (1.0, pytest.approx(5 / 7), 2)
                assert [v["met"] for v in d["verdicts"][0]] == [True, False]
            else:  # Says July (weight 5) not met: APR 0 although 5 of 13 weight is met
                assert (r["score"], d["ars"], d["judge_calls"]) == (0.0, pytest.approx(5 / 13), 4)
                assert [[v["met"] for v in t] for t in d["verdicts"]] == [[True], [False, True], [False]]
                assert len(r["trajectory"]["answers"]) == 3
        else:
            assert (r["score"], d["ars"]) == (0.0, 0.0)
        if (r["model"], r["setting"]) == ("sim-calc", "calc"):
            calls = r["trajectory"]["tool_calls"]
            assert [c["name"] for c in calls] == ["calculator"] * (1 if r["task_id"] == SINGLE else 3)
            assert all(c["status"] == "ok" for c in calls)
            assert '"result"' in r["answer"]  # answered with the calculator's output
        else:
            assert r["tool_calls"] == 0
        if r["setting"] == "no-tool":
            assert r["trajectory"]["messages"][0]["role"] == "user"  # no system prompt without tools

    rows = report_rows(capsys, run_dir)
    answer = rows[("sim-answer", "visualtoolbench", "no-tool")]
    assert (answer["mean"], answer["std"], answer["n_ok"], answer["n_error"]) == (0.5, 0.0, 2 * SEEDS, SEEDS)
    m = answer["suite_metrics"]
    assert m["overall"]["apr"] == 0.5 and m["overall"]["ars"] == pytest.approx((5 / 7 + 5 / 13) / 2)
    assert m["overall"]["errors"] == SEEDS and m["overall"]["apr_by_seed"] == [0.5] * SEEDS
    assert m["by_domain"]["STEM"]["apr"] == 1.0 and m["by_domain"]["finance"]["apr"] == 0.0
    assert m["by_turncase"]["single-turn"]["apr"] == 1.0 and m["by_turncase"]["multi-turn"]["apr"] == 0.0
    assert m["tools"]["proactivity"] == 0.0
    tools = rows[("sim-calc", "visualtoolbench", "calc")]["suite_metrics"]["tools"]
    assert (tools["proactivity"], tools["success_rate"], tools["volume"]) == (1.0, 1.0, 2.0)
    assert tools["per_tool"]["calculator"]["calls"] == 4 * SEEDS

    resume_and_rescore(capsys, config, run_dir, recs)
