"""tir-synth multiple choice under both rules (#39 item 14).

The reference rule (TIR-Bench's) snaps any text to the nearest option letter by edit distance, so
a junk answer scores at chance; our fixed rule takes a letter or an option's text and calls
anything else wrong. Every record carries both, the report's table and the leaderboard show both.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml

from fasteval.cli.main import main
from fasteval.core.types import Task, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import ScoreContext, Setting
from fasteval.suites.tir_synth import TIRSynth

MC_TYPES = ["proportion", "color", "rotation_game"]


async def test_junk_scores_at_chance_by_the_reference_rule_and_zero_by_the_fixed_one(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "blobs")
    suite = TIRSynth({"seed": 0, "n_per_type": 12, "types": MC_TYPES}, blobs)
    tasks = [t for t in suite.load() if isinstance(t, Task)]
    setting = Setting(name="no-tool", tools=[])
    ref, fixed = [], []
    for task in tasks:
        for junk in ("I cannot tell", "zz", "the image is blurry"):
            score = await suite.score(task, Trajectory(answers=[junk]), setting, ScoreContext(blobs))
            ref.append(score.details["scores"]["reference"])
            fixed.append(score.details["scores"]["fixed"])
            assert score.value == score.details["scores"]["reference"]  # the setting's fidelity: reference
    assert sum(ref) > 0, "the reference rule snaps junk to a letter: some land on the gold"
    assert sum(fixed) == 0
    right = tasks[0]
    text = next(line.split(". ", 1)[1] for line in right.turns[0].text.splitlines()
                if line.startswith(f"{right.reference}. "))
    for answer in (str(right.reference), text, f"The answer is {right.reference}."):
        score = await suite.score(right, Trajectory(answers=[answer]), Setting(name="f", tools=[], fidelity="fixed"),
                                  ScoreContext(blobs))
        assert score.value == 1.0 and score.details["scores"]["fixed"] == 1.0, (answer, score.details)


@pytest.mark.parametrize("fidelity", ["reference", "fixed"])
def test_report_and_leaderboard_show_both_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                fidelity: str) -> None:
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({
        "seeds": 2, "models": [{"name": "junk", "provider": "sim", "policy": "scripted",
                                "default_reply": "no idea"}],
        "suites": [{"name": "tir-synth", "options": {"seed": 0, "n_per_type": 6, "types": MC_TYPES},
                    "settings": [{"name": "no-tool", "tools": [], "fidelity": fidelity}]}],
        "run": {"fsync": "never"}}))
    assert main(["run", str(cfg), "--run-dir", str(tmp_path / "run"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "run"), "--format", "json"]) == 0
    row = orjson.loads(capsys.readouterr().out)["rows"][0]
    tables = row["suite_metrics"]
    assert tables["fixed"] == 0.0 and tables["reference"] > 0.0, tables
    assert row["mean"] == tables[fidelity]  # the headline is the setting's rule
    assert set(tables["multiple_choice_by_task_type"]) == set(MC_TYPES)
    assert main(["report", str(tmp_path / "run"), "--leaderboard"]) == 0
    assert "fixed 0.0 ± 0.0, ref " in capsys.readouterr().out


def test_the_tables_take_records_of_odd_shapes() -> None:
    """A hand-edited record (score_details or metadata not a mapping) counts 0, never stops the report."""
    good = {"status": "ok", "seed": 0, "metadata": {"task_type": "color"},
            "score_details": {"rule": "choice", "scores": {"reference": 1.0, "fixed": 0.0}}}
    odd = [{"status": "ok", "seed": 0, "metadata": "x", "score_details": "junk"},
           {"status": "ok", "seed": 0, "metadata": None, "score_details": {"scores": "junk", "rule": 3}}]
    tables = TIRSynth.aggregate([good, *odd])
    assert tables is not None and tables["n"] == 3 and tables["reference"] == 1 / 3 and tables["fixed"] == 0.0
    assert list(tables["multiple_choice_by_task_type"]) == ["color"]
