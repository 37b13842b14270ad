"""examples/own-tasks (a CSV and a folder of images, one task per scorer) runs as docs/own-tasks.md
says: every record names its scorer, right and wrong answers score as they should, the judge's
reason is on its record, a rerun adds nothing and a rescore asks the judge nothing (its cache)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from e2e_support import cli, latest, resume_and_rescore, write_config

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "own-tasks"
EXPECTED = {  # task: (scorer, score) under the example's scripted answers
    "colour": ("exact", 1.0), "describe": ("contains", 1.0), "bars": ("numeric", 0.0),
    "visitors": ("numeric", 1.0), "share": ("numeric", 1.0), "heights": ("regex", 1.0),
    "largest": ("choice", 1.0), "area": ("math", 1.0), "any-colour": ("any_of(contains)", 1.0),
    "depth": ("judge", 0.0),
}


@pytest.mark.slow
def test_the_own_tasks_example_scores_each_task_by_its_scorer(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "own-tasks"
    shutil.copytree(EXAMPLE, folder)
    config = write_config(folder, yaml.safe_load((EXAMPLE / "own-tasks.yaml").read_text()))
    run_dir = tmp_path / "run"
    code, _, err = cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 0, err
    first = latest(run_dir)
    assert len(first) == 2 * len(EXPECTED)
    for r in first:
        assert (r["score_details"]["scorer"], r["score"]) == EXPECTED[r["task_id"]], r["task_id"]
    depth = next(r for r in first if r["task_id"] == "depth")
    check = depth["score_details"]["checks"][0]
    assert (check["verdict"], check["reason"]) == ("incorrect", "it does not name the red square.")
    share = next(r for r in first if r["task_id"] == "share")
    assert share["score_details"]["checks"][0]["reference"] == "25%"
    resume_and_rescore(capsys, config, run_dir, first)


def test_a_pattern_past_its_time_limit_is_a_scorer_error_record_and_rescore_retries_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Our own rule failing is filed as ``scorer_error`` (not a judge's ``judge_error``) on the
    live run and on a rescore alike, and a rescore takes the record up again."""
    (tmp_path / "tasks.csv").write_text(
        'id,prompt,answer,scorer\n'
        'slow,Say the letters.,(a|aa)+$,"{""name"": ""regex"", ""timeout_s"": 0.2}"\n'
        'fine,Say ok.,ok,exact\n')
    config = write_config(tmp_path, {
        "name": "slow-pattern", "seeds": 1,
        "models": [{"name": "sim-reader", "provider": "sim", "policy": "scripted",
                    "script": [{"match": "letters", "reply": "a" * 5000 + "b"}], "default_reply": "ok"}],
        "suites": [{"name": "jsonl", "options": {"path": "tasks.csv"}}]})
    run_dir = tmp_path / "run"
    code, _, err = cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 1, err  # a finished run holding errors
    by_task = {r["task_id"]: r for r in latest(run_dir)}
    assert (by_task["fine"]["status"], by_task["fine"]["score"]) == ("ok", 1.0)
    slow = by_task["slow"]
    assert (slow["status"], slow["error_kind"]) == ("error", "scorer_error"), slow
    assert slow["error"].startswith("scorer_error: the task's pattern ran past 0.2 s")
    code, _, err = cli(capsys, "rescore", str(run_dir))
    assert code == 0, err
    again = {r["task_id"]: r for r in latest(run_dir)}["slow"]
    assert again["error_kind"] == "scorer_error" and "rescored_at" in again["score_details"], again
