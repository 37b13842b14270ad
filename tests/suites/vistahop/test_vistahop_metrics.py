"""Report figures against hand-computed values: Pass@1 mean ± std over runs, levels, utilisation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from fasteval.suites.vistahop import aggregate, aggregate_by_setting, score_reference_file, termination_state


def _rec(task: str, seed: int, score: float | None, level: str, calls: int, rounds: int,
         termination: str = "answered", status: str = "ok") -> dict[str, Any]:
    return {
        "task_id": task, "seed": seed, "status": status, "score": score, "model": "m", "setting": "search_crop",
        "metadata": {"level": level},
        "error_kind": "transient" if status == "error" else None,
        "trajectory": {"tool_calls": [{"name": "text_search_tool"}] * calls, "rounds": rounds,
                       "termination": termination},
    }


RECORDS = [
    _rec("t0", 0, 1.0, "L2", 3, 4),
    _rec("t1", 0, 0.0, "L3", 5, 6),
    _rec("t2", 0, 1.0, "L3", 10, 10, termination="max_rounds"),
    _rec("t0", 1, 1.0, "L2", 2, 3),
    _rec("t1", 1, None, "L3", 0, 1, termination="error", status="error"),
    _rec("t2", 1, 0.0, "L3", 4, 5),
]


def test_pass_at_1_is_the_mean_over_runs_with_sample_std() -> None:
    out = aggregate(RECORDS, max_rounds=10)
    # Run 0 passes 2/3, run 1 passes 1/3 (the errored record counts 0 and stays in the denominator).
    assert out["per_run"] == pytest.approx({"0": 200 / 3, "1": 100 / 3})
    assert out["pass_at_1"] == pytest.approx(50.0)
    assert out["std"] == pytest.approx(math.sqrt(2 * (50 / 3) ** 2))
    assert (out["runs"], out["n_tasks"], out["n_records"], out["errors"]) == (2, 3, 6, 1)
    assert out["error_kinds"] == {"transient": 1}


def test_level_tables_average_each_level_over_runs() -> None:
    levels = aggregate(RECORDS, max_rounds=10)["levels"]
    assert list(levels) == ["L2", "L3"]
    assert (levels["L2"]["pass_at_1"], levels["L2"]["std"]) == (pytest.approx(100.0), 0.0)
    assert levels["L3"]["per_run"] == pytest.approx({"0": 50.0, "1": 0.0})
    assert levels["L3"]["pass_at_1"] == pytest.approx(25.0)
    assert levels["L3"]["std"] == pytest.approx(math.sqrt(2 * 25.0**2))


def test_tool_calls_rounds_utilisation_and_endings() -> None:
    out = aggregate(RECORDS, max_rounds=10)
    assert out["avg_tool_calls"] == pytest.approx(24 / 6)
    assert out["avg_rounds"] == pytest.approx(29 / 6)
    assert out["utilisation"] == pytest.approx(40.0)  # 4.0 calls / 10 rounds
    assert out["termination"] == {"AnswerSubmitted": 4, "Error": 1, "MaxRounds": 1}
    assert out["calls_by_tool"] == {"text_search_tool": 24}
    # The budget is read from the records when not given; the paper's N=20 halves utilisation.
    with_budget = [{**r, "metadata": {**r["metadata"], "max_rounds": 20}} for r in RECORDS]
    assert aggregate(with_budget)["utilisation"] == pytest.approx(20.0)
    assert set(aggregate_by_setting(RECORDS)) == {"m/search_crop"}


def test_records_without_trajectory_and_levels_still_aggregate() -> None:
    flat = [{"task_id": "a", "seed": 3407, "status": "ok", "score": 1.0, "tool_calls": 2, "rounds": 3,
             "termination": "answered", "metadata": {}},
            {"task_id": "b", "seed": 3407, "status": "error", "score": None, "metadata": {}}]
    out = aggregate(flat, max_rounds=10)
    assert (out["pass_at_1"], out["std"], out["levels"]) == (50.0, 0.0, {})
    assert out["avg_tool_calls"] == 1.0 and out["termination"]["Error"] == 1
    assert aggregate([])["n_records"] == 0
    assert [termination_state(x) for x in ("answered", "context_overflow", "max_turns", "no_tool_calls", None)] == [
        "AnswerSubmitted", "Error", "MaxRounds", "AnswerSubmitted", "Error"]


def test_score_reference_file_reads_the_public_runner_results(tmp_path: Path) -> None:
    rows = [
        {"sample_id": "vistahop-0", "dataset": "vistahop", "input": "", "output": "<answer>x</answer>", "gts": ["x"],
         "finish_reason": "no_tool_calls", "num_round": 4, "llm_score": 1.0},
        {"sample_id": "vistahop-1", "dataset": "vistahop", "finish_reason": "max_turns", "num_round": 20,
         "llm_score": 0.0},
        {"sample_id": "vistahop-2", "dataset": "vistahop", "finish_reason": "error", "num_round": 0,
         "error": "HTTP 500", "llm_score": 0.0},
        {"sample_id": "mcq-0", "dataset": "mcq", "finish_reason": "stop", "num_round": 1, "em_score_mcq": 1.0},
    ]
    path = tmp_path / "results.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    out = score_reference_file(path, levels={"vistahop-0": "L2", "vistahop-1": "L3", "vistahop-2": "L3"})
    assert set(out["items"]) == {"vistahop-0", "vistahop-1", "vistahop-2", "mcq-0"}
    assert out["items"]["vistahop-1"]["termination"] == "MaxRounds"
    assert out["items"]["vistahop-2"] == {
        "dataset": "vistahop", "score": 0.0, "passed": False, "llm_score": 0.0, "em_score_mcq": None,
        "termination": "Error", "rounds": 0, "error": "HTTP 500"}
    assert out["pass_at_1"] == 50.0 and out["overall"]["errors"] == 1
    assert out["overall"]["termination"] == {"AnswerSubmitted": 2, "Error": 1, "MaxRounds": 1}
    vh = out["by_category"]["vistahop"]
    assert (vh["total"], vh["correct"], vh["llm_accuracy"], vh["em_accuracy"]) == (3, 1, pytest.approx(1 / 3), None)
    assert vh["pass_at_1"] == pytest.approx(100 / 3) and vh["avg_rounds"] == pytest.approx(8.0)
    assert out["by_category"]["mcq"]["em_accuracy"] == 1.0
    assert out["by_level"]["L2"]["pass_at_1"] == 100.0 and out["by_level"]["L3"]["pass_at_1"] == 0.0


def test_score_reference_file_names_a_broken_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text('{"sample_id": "a", "llm_score": 1.0}\n{oops\n')
    with pytest.raises(ValueError, match="line 2"):
        score_reference_file(path)
