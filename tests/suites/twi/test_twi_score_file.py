"""``fasteval score-file`` on each reference's own prediction files (benchmarks-twi.md §6)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import releases as rel

_SUPPORT = Path(__file__).resolve().parents[1] / "e2e" / "e2e_support.py"
if "twi_e2e_support" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("twi_e2e_support", _SUPPORT)
    assert _spec is not None and _spec.loader is not None
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["twi_e2e_support"] = _mod
    _spec.loader.exec_module(_mod)
support = sys.modules["twi_e2e_support"]


def score_file(capsys: pytest.CaptureFixture[str], suite: str, path: Path, fidelity: str = "reference",
               options: dict[str, Any] | None = None) -> tuple[int, Any, str]:
    args = ["score-file", "--suite", suite, "--fidelity", fidelity, "--format", "json", str(path)]
    if options:
        args += ["--options", json.dumps(options)]
    code, out, err = support.cli(capsys, *args)
    return code, orjson.loads(out) if code == 0 else None, err


def test_vstar_vlmevalkit_and_lmms_eval_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"index": 0, "question": "Color?", "A": "purple", "B": "black", "C": "white", "D": "red", "answer": "B",
             "category": "direct_attributes", "prediction": "<answer>B</answer>"},
            {"index": 1, "question": "Side?", "A": "left", "B": "right", "answer": "A",
             "category": "relative_position", "prediction": "The answer is A"},
            {"index": 2, "question": "Color?", "A": "red", "B": "blue", "answer": "B",
             "category": "direct_attributes", "prediction": ""}]
    tsv = rel.write_tsv(tmp_path / "m_VStarBench.tsv", rows)
    code, ref, err = score_file(capsys, "vstar", tsv)
    assert code == 0, err
    assert ref["items"] == {"0": 0.0, "1": 1.0, "2": 0.0}  # the tag is no answer; empty cell reads 'nan'
    assert ref["overall"] == pytest.approx(1 / 3) and ref["by_category"]["relative_position"] == 1.0
    code, fixed, _ = score_file(capsys, "vstar", tsv, "fixed")
    assert fixed["items"] == {"0": 1.0, "1": 1.0, "2": 0.0}
    code, _, err = score_file(capsys, "vstar", tsv, options={"judge": "judge"})
    assert code == 2 and "exact_matching" in err

    samples = tmp_path / "samples.jsonl"
    samples.write_text("\n".join(json.dumps(r) for r in [
        {"doc_id": 0, "target": "B", "filtered_resps": [["Based on the image"]],
         "doc": {"category": "direct_attributes", "text": "Color?\n(A) purple\n(B) black"}},
        {"doc_id": 1, "target": "A", "filtered_resps": [["<answer>A</answer>"]],
         "doc": {"category": "relative_position", "text": "Side?\n(A) left\n(B) right"}}]))
    code, lm, err = score_file(capsys, "vstar", samples, options={"scorer": "lmms-eval"})
    assert code == 0, err
    assert lm["items"] == {"0": 1.0, "1": 0.0}  # "Based" reads as B; the tag as nothing
    code, lm_fixed, _ = score_file(capsys, "vstar", samples, "fixed", options={"scorer": "lmms-eval"})
    assert lm_fixed["items"] == {"0": 0.0, "1": 1.0}


def test_hrbench_cycle_average_and_circular(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{k: v for k, v in r.items() if k != "image"} for r in rel.hrbench_rows()]
    for r in rows:
        r["prediction"] = f"**{r['answer']}**" if r["index"] != 4 else "no idea"
    path = rel.write_tsv(tmp_path / "m_HRBench4K.tsv", rows)
    code, out, err = score_file(capsys, "hrbench", path)
    assert code == 0, err
    assert out["overall"] == pytest.approx(7 / 8) and out["by_category"] == {"single": 1.0, "cross": 0.75}
    assert out["by_cycle"]["cycle1"] == {"all": 0.5, "single": 1.0, "cross": 0.0}
    assert out["circular"]["all"] == 0.5


def test_mme_official_and_vlmevalkit_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = [{**item, "Output": out} for item, out in zip(rel.MME_ITEMS, ["Best answer: C", "", "B"], strict=True)]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(items))
    code, out, err = score_file(capsys, "mme-realworld", path)
    assert code == 0, err
    assert list(out["items"].values()) == [0.0, 1.0, 1.0]  # "Best" gives B; empty output is A (gold A)
    assert out["by_task"] == {"Perception": 0.5, "Reasoning": 1.0}
    assert out["by_subcategory"]["Perception/Monitoring/vehicle/attribute"] == 1.0
    # the official script prints an E count for every task and task/subtask of its lists, 0 included
    subtasks = ("Monitoring", "Autonomous_Driving", "OCR with Complex Context", "Diagram and Table", "Remote Sensing")
    assert out["e_choices"] == {k: 0 for t in ("Perception", "Reasoning") for k in (t, *(f"{t}/{s}" for s in subtasks))}
    code, fixed, _ = score_file(capsys, "mme-realworld", path, "fixed")
    assert list(fixed["items"].values()) == [1.0, 0.0, 1.0]
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps([{**items[0], "Subtask": "Charts"}]))
    code, _, err = score_file(capsys, "mme-realworld", odd)
    assert code == 2 and "KeyError" in err
    code, ours, _ = score_file(capsys, "mme-realworld", odd, "fixed")
    assert code == 0 and ours["by_category"] == {"Perception/Charts": 1.0}

    rows = [{"index": n, "question": i["Text"], **{k: c[4:] for k, c in zip("ABCDE", i["Answer choices"],
                                                                          strict=True)},
             "answer": i["Ground truth"], "category": f"{i['Task']}/{i['Subtask']}", "l2-category": i["Category"],
             "prediction": p} for n, (i, p) in enumerate(zip(rel.MME_ITEMS, ["<answer>c</answer>", "A", ""],
                                                              strict=True))]
    tsv = rel.write_tsv(tmp_path / "m_MME-RealWorld.tsv", rows)
    code, _, err = score_file(capsys, "mme-realworld", tsv, options={"scorer": "vlmevalkit"})
    assert code == 2 and "TypeError" in err  # one empty prediction stops VLMEvalKit's evaluation
    code, fixed, err = score_file(capsys, "mme-realworld", tsv, "fixed", options={"scorer": "vlmevalkit"})
    assert code == 0, err
    assert fixed["items"] == {"0": 0.0, "1": 1.0, "2": 0.0}


def test_treebench_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    preds = ["<think>the cup <box>[40,30,80,70]</box></think><answer>D</answer>", "<answer>b</answer>"]
    rows = [{**r, "prediction": p} for r, p in zip(rel.TREE_ROWS, preds, strict=True)]
    path = rel.write_tsv(tmp_path / "m_TreeBench.tsv", rows)
    code, out, err = score_file(capsys, "treebench", path)
    assert code == 0, err
    assert out["items"] == {"7": {"score": 1.0, "iou": 1.0}, "8": {"score": 1.0, "iou": 0.0}}
    assert out["overall"] == 1.0 and out["miou"] == 0.5
    code, tvgr, _ = score_file(capsys, "treebench", path, options={"scorer": "treevgr"})
    assert tvgr["items"]["8"] == {"score": 1.0, "iou": 0.0}
    assert tvgr["by_category"] == {"Perception/Material": 1.0, "Reasoning/Perspective Transform": 1.0}


def test_visualprobe_stats_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stats = [{"id": 0, "doc_id": 123, "data_source": "visual_probe_hard", "pass_at_k": 0.5,
              "rollouts": [{"output": "x", "score": 1.0, "acc_reward": 1.0}, {"output": "y", "acc_reward": 0.0}]},
             {"id": 2, "doc_id": 7, "data_source": "visual_probe_easy", "pass_at_k": 1.0,
              "rollouts": [{"acc_reward": 1.0}, {"acc_reward": 1.0}]}]
    path = tmp_path / "stats.json"
    path.write_text(json.dumps(stats))
    code, out, err = score_file(capsys, "visualprobe", path)
    assert code == 0, err
    assert out["items"] == {"visual_probe_hard/123": 0.5, "visual_probe_easy/7": 1.0}
    assert out["by_category"] == {"visual_probe_easy": 1.0, "visual_probe_hard": 0.5}
    code, hard, _ = score_file(capsys, "visualprobe", path, options={"level": "hard"})
    assert list(hard["items"]) == ["visual_probe_hard/123"]
