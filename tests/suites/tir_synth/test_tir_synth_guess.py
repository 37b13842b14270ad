"""The guess policy answers in format without tools, and scores below the oracle's 1.0."""

from __future__ import annotations

from pathlib import Path

from fasteval.core.types import Task, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import ScoreContext
from fasteval.suites.tir_synth import TIRSynth
from providers.sim import POLICIES, SimModel


async def test_guess_scores_well_below_full_marks_and_never_calls_tools(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "blobs")
    suite = TIRSynth({"seed": 0, "n_per_type": 3}, blobs)
    setting = suite.default_settings()[0]
    model = SimModel(name="guess", policy="guess")
    scores: list[float] = []
    for task in suite.load():
        assert isinstance(task, Task)
        for seed in range(5):
            body = {"messages": [{"role": "user", "content": task.turns[0].text}], "seed": seed,
                    "tools": [{"type": "function", "function": {"name": "python_image_processing"}}]}
            reply = POLICIES["guess"](model, body, 0)
            assert not reply.get("tool_calls") and reply["content"]
            score = await suite.score(task, Trajectory(answers=[reply["content"]]), setting, ScoreContext(blobs))
            assert score.value is not None and score.error is None
            scores.append(score.value)
    mean = sum(scores) / len(scores)
    assert 0.0 < mean < 0.6


async def test_suite_scores_a_missing_answer_as_zero(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "blobs")
    suite = TIRSynth({"types": ["jigsaw"], "n_per_type": 1}, blobs)
    task = next(t for t in suite.load() if isinstance(t, Task))
    score = await suite.score(task, Trajectory(answers=[]), suite.default_settings()[0], ScoreContext(blobs))
    assert score.value == 0.0 and score.details["no_response"]
    exact = await suite.score(task, Trajectory(answers=[str(task.reference)]), suite.default_settings()[0],
                              ScoreContext(blobs))
    assert exact.value == 1.0 and exact.details["rule"] == "jigsaw"
