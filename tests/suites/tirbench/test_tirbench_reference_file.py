"""Re-scoring a reference harness output file, and the per-task-type table of our records."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from fasteval.suites.tirbench.reference_file import aggregate, score_reference_file


def _reference_output(tmp_path: Path) -> Path:
    """Rows as the reference test.py + extract_answer.py leave them, keyed "0".."N-1"."""
    rows: list[dict[str, Any]] = [
        {"id": 11, "task": "color", "prompt": "A. red B. green C. blue D. grey", "answer": "D",
         "model_response": "grey, D", "extracted_answer": "D"},
        {"id": 12, "category": "jigsaw", "prompt": "2x2", "answer": "2, 1, 4, 3", "metadata": {"difficulty": 2},
         "model_response": "2 1 3 4", "extracted_answer": "2, 1, 3, 4"},
        {"id": 13, "task": "spot_difference", "prompt": "?", "answer": "[2, 5]", "meta_data": {},
         "model_response": "2, 5 and 9", "extracted_answer": "[2, 5, 9]"},
        {"id": 14, "task": "ocr", "prompt": "?", "answer": "MOBI", "image_1": "data/ocr/60.jpg",
         "model_response": ["the word is mobi"]},
        {"id": 15, "task": "instrument", "prompt": "?", "answer": 72,
         "model_response": "error", "extracted_answer": None},
        {"id": 16, "task": "math", "prompt": "?", "answer": "12",
         "model_response": "twelve", "extracted_answer": "**12**"},
        {"task": "word_search", "prompt": "?", "answer": "[3, 4]",
         "model_response": "at row 3, column 4", "extracted_answer": "[3, 4]"},
    ]
    path = tmp_path / "TIR_collection_model.json"
    path.write_text(json.dumps({str(i): row for i, row in enumerate(rows)}), encoding="utf-8")
    return path


def test_reference_file_scores_with_reference_fidelity(tmp_path: Path) -> None:
    result = score_reference_file(_reference_output(tmp_path), "reference")
    assert result["items"] == pytest.approx(
        {"11": 1.0, "12": 0.5, "13": 2 / 3, "14": 1.0, "15": 0.0, "16": 1.0, "6": 1.0}
    )
    assert result["overall"] == pytest.approx((1 + 0.5 + 2 / 3 + 1 + 0 + 1 + 1) / 7)
    assert list(result["by_category"]) == [
        "color", "math", "word_search", "ocr", "instrument", "spot_difference", "jigsaw"
    ]
    assert result["by_category"]["jigsaw"] == 0.5 and result["by_category"]["ocr"] == 1.0


def test_reference_file_fixed_fidelity_drops_ocr_override(tmp_path: Path) -> None:
    result = score_reference_file(_reference_output(tmp_path), "fixed")
    assert result["items"]["14"] == 0.0
    assert result["overall"] == pytest.approx((1 + 0.5 + 2 / 3 + 0 + 0 + 1 + 1) / 7)


def test_reference_file_must_be_an_object(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("[]")
    with pytest.raises(ValueError, match="keyed"):
        score_reference_file(path, "reference")


def _record(task_id: str, seed: int, task_type: str, score: float | None, status: str = "ok") -> dict[str, Any]:
    return {"task_id": task_id, "seed": seed, "status": status, "score": score,
            "metadata": {"task_type": task_type}}


def test_aggregate_hand_computed_table() -> None:
    records = [
        _record("t1", 0, "color", 1.0), _record("t2", 0, "color", 0.0),
        _record("t3", 0, "jigsaw", 0.5), _record("t4", 0, "jigsaw", None, status="error"),
        _record("t1", 1, "color", 1.0), _record("t2", 1, "color", 1.0),
        _record("t3", 1, "jigsaw", 0.25), _record("t4", 1, "jigsaw", 1.0),
    ]
    table = aggregate(records)
    # seed 0: (1 + 0 + 0.5 + 0) / 4 = 0.375; seed 1: (1 + 1 + 0.25 + 1) / 4 = 0.8125
    assert table["per_seed"] == {0: 0.375, 1: 0.8125}
    assert table["overall"] == pytest.approx(0.59375)
    assert table["overall_std"] == pytest.approx(0.4375 / math.sqrt(2))
    assert (table["n"], table["errors"]) == (8, 1)
    color, jigsaw = table["by_task_type"]["color"], table["by_task_type"]["jigsaw"]
    assert color["accuracy"] == pytest.approx(0.75) and color["errors"] == 0
    assert color["std"] == pytest.approx(0.5 / math.sqrt(2))
    assert jigsaw["accuracy"] == pytest.approx((0.25 + 0.625) / 2) and jigsaw["errors"] == 1
    assert jigsaw["accuracy_excluding_errors"] == pytest.approx((0.5 + 0.25 + 1.0) / 3)
    assert list(table["by_task_type"]) == ["color", "jigsaw"]


def test_aggregate_single_seed_has_zero_std_and_rejects_empty() -> None:
    table = aggregate([_record("a", 3, "maze", 1.0), _record("b", 3, "maze", 0.0)])
    assert (table["overall"], table["overall_std"]) == (0.5, 0.0)
    with pytest.raises(ValueError):
        aggregate([])


@pytest.mark.slow
def test_score_file_cli_prints_the_public_json(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = _reference_output(tmp_path)
    out = subprocess.run([sys.executable, "-m", "fasteval.cli.main", "score-file", "--suite", "tirbench", str(path),
                          "--format", "json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) >= {"items", "overall", "by_category"}
    assert data["items"]["12"] == 0.5 and math.isclose(data["overall"], (1 + 0.5 + 2 / 3 + 1 + 0 + 1 + 1) / 7)
    bad = subprocess.run([sys.executable, "-m", "fasteval.cli.main", "score-file", "--suite", "demo", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no reference output format" in bad.stderr
