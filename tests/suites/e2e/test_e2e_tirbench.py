"""TIR-Bench end to end through ``fasteval run``: official release layout, sim model, sim extractor.

The evaluated model and the extractor are ``scripted`` sim models, so every score is known by
hand: the extractor's reply is scored by the reference rules (choice, positional jigsaw, set IoU,
integer), OCR is a substring test on the raw response with no extractor call, and a row whose
image is missing is a ``load_error`` record.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from e2e_support import (
    cli,
    latest,
    load_fixture_module,
    report_rows,
    resume_and_rescore,
    run_summary,
    write_config,
)

tir = load_fixture_module("tirbench/conftest.py")

MODEL_SCRIPT = [
    {"match": "Which colour dominates", "reply": "[r-color] Mostly grey, so option D."},
    {"match": "Restore the 2x2 jigsaw", "reply": "[r-jigsaw] I think the order is 2 1 3 4."},
    {"match": "Which patches differ", "reply": "[r-spot] Patches 2 and 7."},
    {"match": "Read the rotated text", "reply": "The text reads: hello"},
    {"match": "Thermometer reading", "reply": "[r-instrument] About seventy-two: 72 F."},
]
# Keyed on the model response inside the extraction prompt, never on the few-shot block.
EXTRACTOR_SCRIPT = [
    {"match": r"Model response: \[r-color\]", "reply": "D"},
    {"match": r"Model response: \[r-jigsaw\]", "reply": "2, 1, 3, 4"},
    {"match": r"Model response: \[r-spot\]", "reply": "2, 7"},
    {"match": r"Model response: \[r-instrument\]", "reply": "72"},
]
EXPECTED = {  # task id -> (score, extracted answer)
    "101": (1.0, "D"),            # choice: gold D
    "102": (0.5, "2, 1, 3, 4"),   # jigsaw n=2: 2 of 4 positions right (gold 2, 1, 4, 3)
    "103": (1 / 3, "2, 7"),       # spot the difference: IoU of {2, 7} and {2, 5}
    "104": (1.0, None),           # ocr: "hello" in the raw response; no extraction
    "105": (1.0, "72"),           # instrument: judge_int
}
SEEDS = 2


def _config(tmp_path: Path) -> Path:
    release = tir.write_release(tmp_path / "TIR-Bench", [*tir.GOOD_ROWS, tir.BAD_ROWS[0]])
    return write_config(tmp_path, {
        "name": "tirbench-e2e",
        "seeds": SEEDS,
        "models": [{"name": "sim-tir", "provider": "sim", "policy": "scripted", "script": MODEL_SCRIPT,
                    "default_reply": "no idea"}],
        "roles": {"extractor": {"provider": "sim", "policy": "scripted", "script": EXTRACTOR_SCRIPT,
                                "default_reply": "Z"}},
        "suites": [{"name": "tirbench", "options": {"path": str(release), "fidelity": "fixed"},
                    "settings": [{"name": "no-tool"}]}],
    })


def test_tirbench_runs_reports_resumes_and_rescores_from_the_cache(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, run_dir = _config(tmp_path), tmp_path / "run"
    code, _, err = cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 1, err  # finished, some jobs (the bad rows) errored
    assert run_summary(err) == (5 * SEEDS, SEEDS, 0, 6 * SEEDS)

    recs = latest(run_dir)
    assert len(recs) == 6 * SEEDS
    for r in recs:
        if r["task_id"] == "106":
            assert (r["status"], r["error_kind"], r["score"]) == ("error", "load_error", None)
            assert "data/missing.jpg" in r["error"]
            continue
        score, extracted = EXPECTED[r["task_id"]]
        assert r["status"] == "ok", r["error"]
        assert r["score"] == pytest.approx(score)
        assert r["score_details"]["extracted"] == extracted
        assert r["score_details"].get("extraction_attempts") == (None if extracted is None else 1)
        assert r["termination"] == "answered" and r["tool_calls"] == 0
        # text first, then the image(s), as the reference test.py sends them
        first = r["trajectory"]["messages"][0]["content"]
        assert first[0]["type"] == "text" and first[1]["type"] == "image"

    per_seed = sum(s for s, _ in EXPECTED.values()) / len(EXPECTED)
    row = report_rows(capsys, run_dir)[("sim-tir", "tirbench", "no-tool")]
    assert row["mean"] == pytest.approx(per_seed) and row["std"] == 0.0
    assert row["seed_means"] == pytest.approx([per_seed] * SEEDS)
    assert (row["n_ok"], row["n_error"], row["n_tasks"]) == (5 * SEEDS, SEEDS, 5)
    assert row["errors"] == {"load_error": SEEDS}
    lo, hi = row["ci95"]
    assert 0.0 <= lo <= per_seed <= hi <= 1.0
    metrics = row["suite_metrics"]  # TIRBench.aggregate: errors count 0 in the reference's denominator
    assert metrics["overall"] == pytest.approx(sum(s for s, _ in EXPECTED.values()) / 6)
    assert metrics["errors"] == SEEDS
    assert metrics["by_task_type"]["jigsaw"]["accuracy"] == pytest.approx(0.5)
    assert metrics["by_task_type"]["spot_difference"]["accuracy"] == pytest.approx(1 / 3)

    resume_and_rescore(capsys, config, run_dir, recs)


def test_tirbench_without_an_extractor_is_refused_before_anything_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without the extractor every non-OCR job would pay for its trajectory and then end as a
    judge_error: the run is refused at start (exit 2), and ``extraction: raw`` needs none."""
    config = _config(tmp_path)
    cfg = yaml.safe_load(config.read_text())
    del cfg["roles"]
    cfg["seeds"] = 1
    config.write_text(yaml.safe_dump(cfg))
    run_dir = tmp_path / "run"
    code, _, err = cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 2 and "scores with the role 'extractor'" in err and "nothing ran" in err
    assert not run_dir.exists()  # a refused start leaves no folder behind
    code, out, err = cli(capsys, "run", str(config), "--dry-run")
    assert code == 2 and "'extractor'" in err
    cfg["suites"][0].setdefault("options", {})["extraction"] = "raw"
    config.write_text(yaml.safe_dump(cfg))
    code, _, err = cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code in (0, 1), err
    assert {r["error_kind"] for r in latest(run_dir)} <= {None, "load_error"}
