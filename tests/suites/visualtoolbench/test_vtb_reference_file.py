"""score_reference_file recomputes APR/ARS from the reference judge output's verdicts, no model called."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from vtb_fixtures import MULTI_ID, SINGLE_ID, rubric, sample_rows, write_parquet

from fasteval.suites.visualtoolbench import score_reference_file


def _v(rid: str, result: str) -> dict[str, Any]:
    return {"rubric_id": rid, "judge_result": json.dumps({"explanation": "e", "judge_result": result})}


def _write_judge_files(tmp_path: Path) -> list[Path]:
    """run_judge_single_turn.py / run_judge_multi_turn.py output shapes."""
    single = [
        {"task_id": SINGLE_ID, "turncase": "single-turn", "eval_focus": "region_switch_qa",
         "prompt_category": "physics", "judge_result": [_v("r-1", "Met"), _v("r-2_01", "Not Met")],
         "score": 5 / 7, "accuracy": 1},
        {"task_id": "broken", "turncase": "single-turn", "eval_focus": "region_switch_qa",
         "prompt_category": "medical", "judge_result": [{"rubric_id": "b1", "judge_result": "Met, clearly"}],
         "score": 1.0, "accuracy": 1},
    ]
    multi = [
        {"task_id": MULTI_ID, "turncase": "multi-turn", "eval_focus": "temporal_reasoning",
         "prompt_category": "finance",
         # "met" (lower case) is neither Met nor Not Met to the reference: no weight, no APR failure.
         "judge_result": [[_v("m1", "Met")], [_v("m2", "met"), _v("m3", "Not Met")], [_v("m4", "Met")]],
         "score": 7 / 13, "accuracy": 0},
    ]
    paths = [tmp_path / "single_judge.json", tmp_path / "multi_judge.json"]
    paths[0].write_text(json.dumps(single))
    paths[1].write_text(json.dumps(multi))
    return paths


def _check(out: dict[str, Any]) -> None:
    assert out["items"] == {SINGLE_ID: 1.0, MULTI_ID: 1.0}
    assert out["item_details"][SINGLE_ID]["ars"] == pytest.approx(5 / 7)
    assert out["item_details"][MULTI_ID]["ars"] == pytest.approx(7 / 13)
    assert out["overall"] == 1.0 and out["n"] == 2
    assert out["by_category"] == {"STEM": 1.0, "finance": 1.0, "medical": None}
    assert out["ars"]["overall"] == pytest.approx((5 / 7 + 7 / 13) / 2)
    assert out["apr"]["by_turncase"] == {"multi-turn": 1.0, "single-turn": 1.0}
    assert out["ars"]["by_eval_focus"]["temporal_reasoning"] == pytest.approx(7 / 13)
    assert set(out["errors"]) == {"broken"}
    assert out["stored_score_mismatches"] == [MULTI_ID]


def test_weights_from_the_dataset_parquet(tmp_path: Path) -> None:
    dataset = write_parquet(tmp_path / "test.parquet", sample_rows()[:2])
    paths = _write_judge_files(tmp_path)
    out = score_reference_file(paths, rubrics=dataset)
    _check(out)
    assert "broken" in out["errors"] and "no rubric weights" in out["errors"]["broken"]


def test_weights_from_a_clean_rubrics_file_and_unreadable_verdicts(tmp_path: Path) -> None:
    clean = [
        {"task_id": SINGLE_ID, "rubrics": {"r-1": rubric("States 42 kPa", 5), "r-2_01": rubric("Numbering", 2)}},
        {"task_id": MULTI_ID, "turns": [{"rubrics": {"m1": rubric("a", 4)}},
                                        {"rubrics": {"m2": rubric("b", 5), "m3": rubric("c", 1)}},
                                        {"rubrics": {"m4": rubric("d", 3)}}]},
        {"task_id": "broken", "rubrics": {"b1": rubric("x", 3)}},
    ]
    (tmp_path / "clean.json").write_text(json.dumps(clean))
    out = score_reference_file(_write_judge_files(tmp_path), rubrics=tmp_path / "clean.json")
    _check(out)
    assert "JSON" in out["errors"]["broken"] or "Expecting" in out["errors"]["broken"]


def test_without_weights_the_stored_scores_are_used(tmp_path: Path) -> None:
    single, multi = _write_judge_files(tmp_path)
    out = score_reference_file(str(single))
    assert out["items"] == {SINGLE_ID: 1.0, "broken": 1.0}
    out = score_reference_file([single, multi])
    assert out["items"][MULTI_ID] == 0.0 and out["overall"] == pytest.approx(2 / 3)
    assert out["by_category"] == {"STEM": 1.0, "finance": 0.0, "medical": 1.0}


def test_reference_quirks_dropped_verdicts_empty_rubrics_exact_domains_and_pooled_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fasteval.cli.main import main

    clean = [
        {"task_id": "t1", "rubrics": {"a": rubric("x", 4), "b": rubric("y", 2)}},
        {"task_id": "t2", "turns": [{"rubrics": {"c": rubric("z", 3)}}, {"rubrics": {}}]},
    ]
    (tmp_path / "clean.json").write_text(json.dumps(clean))
    single = [{"task_id": "t1", "turncase": "single-turn", "eval_focus": "f", "prompt_category": "Physics",
               # b has no judge_result: the reference drops it, so it weighs nothing.
               "judge_result": [_v("a", "Met"), {"rubric_id": "b"}], "score": 1.0, "accuracy": 1}]
    multi = [{"task_id": "t2", "turncase": "multi-turn", "eval_focus": "f", "prompt_category": "physics",
              "judge_result": [[_v("c", "Met")], []], "score": 1.0, "accuracy": 1}]
    (tmp_path / "s.json").write_text(json.dumps(single))
    (tmp_path / "m.json").write_text(json.dumps(multi))
    out = score_reference_file([tmp_path / "s.json", tmp_path / "m.json"], rubrics=tmp_path / "clean.json")
    assert out["errors"] == {} and out["items"] == {"t1": 1.0, "t2": 1.0}
    assert out["item_details"]["t1"]["ars"] == 1.0  # 4 of 4: the dropped verdict has no weight
    assert out["by_category"] == {"Physics": 1.0, "STEM": 1.0}  # "Physics" is not merged into STEM
    code = main(["score-file", str(tmp_path / "s.json"), str(tmp_path / "m.json"), "--suite", "visualtoolbench",
                 "--options", json.dumps({"rubrics": str(tmp_path / "clean.json")}), "--format", "json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["n"] == 2


def test_a_judge_reply_without_judge_result_drops_the_task_on_both_paths(tmp_path: Path) -> None:
    """The reference's grade_responses raises KeyError on such a reply and loses the chunk: the
    live judge (judge_counting: reference) and score-file both drop the task, neither scores it."""
    from fasteval.suites.visualtoolbench.judge import ReferenceChunkLoss, parse_reference_verdict

    reply = json.dumps({"explanation": "forgot the verdict"})
    with pytest.raises(ReferenceChunkLoss):
        parse_reference_verdict(reply)
    rows = [{"task_id": SINGLE_ID, "turncase": "single-turn", "eval_focus": "region_switch_qa",
             "prompt_category": "physics", "judge_result": [_v("r-1", "Met"), {"rubric_id": "r-2_01",
                                                                                 "judge_result": reply}],
             "score": 5 / 7, "accuracy": 1}]
    path = tmp_path / "judge.json"
    path.write_text(json.dumps(rows))
    out = score_reference_file(path, rubrics={SINGLE_ID: [{"r-1": 5.0, "r-2_01": 2.0}]})
    assert out["items"] == {} and "no judge_result key" in out["errors"][SINGLE_ID]
