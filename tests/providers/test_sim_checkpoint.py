"""The sim serves a checkpoint as its ``sim.json`` says (#39 item 7): a training run tried offline.

``configs/train-eval-sim.yaml`` (the README's training-run recipe on the sim) is run as shipped,
copied beside checkpoints ``python -m providers.sim.checkpoint`` wrote, and its learning curve
rises as the saves' misread rate falls.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from providers.sim.checkpoint import behaviour, write_checkpoint

REPO = Path(__file__).resolve().parents[2]


def test_a_checkpoint_names_its_behaviour_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    folder = write_checkpoint(tmp_path / "checkpoint-10", {"policy": "tools", "misread_rate": 0.25})
    assert behaviour(folder) == {"policy": "tools", "misread_rate": 0.25}
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors", "sim.json",
                                                        "trainer_state.json"]
    assert behaviour(tmp_path) == {}  # no sim.json: the server's own --model policy
    for text, why in (('{"misread": 1}', "unknown key 'misread'"), ('{"misread_rate": 2}', "between 0 and 1"),
                      ('{"policy": 3}', "wrong type"), ("[1]", "a JSON object"), ("{", "not JSON")):
        (folder / "sim.json").write_text(text)
        with pytest.raises(ValueError, match=why):
            behaviour(folder)
    proc = subprocess.run([sys.executable, "-m", "providers.sim", "--port", "0", "--checkpoint", str(folder)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "--checkpoint" in proc.stderr and "not JSON" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_the_shipped_sim_training_config_draws_a_rising_learning_curve(tmp_path: Path) -> None:
    (tmp_path / "configs").mkdir()
    shutil.copy(REPO / "configs" / "train-eval-sim.yaml", tmp_path / "configs")
    for step, rate in ((500, 1.0), (1000, 0.0)):
        proc = subprocess.run([sys.executable, "-m", "providers.sim.checkpoint",
                               str(tmp_path / "runs" / "ckpts" / "run7" / f"checkpoint-{step}"), "--misread-rate",
                               str(rate)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    (tmp_path / "runs" / "ckpts" / "run7" / "checkpoint-1500").mkdir()  # a save just begun: skipped, noted
    fasteval = [sys.executable, "-m", "fasteval.cli.main"]
    proc = subprocess.run([*fasteval, "run", "configs/train-eval-sim.yaml", "--no-progress", "--limit", "4",
                           "--seeds", "0"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "note: series run7: skipped" in proc.stderr and "checkpoint-1500: no trainer_state.json yet" in proc.stderr
    proc = subprocess.run([*fasteval, "report", "runs/train-eval-sim", "--series", "run7", "--format", "json"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    points = orjson.loads(proc.stdout)["curves"][0]["points"]
    assert [(p["step"], p["mean"]) for p in points] == [(500, 0.0), (1000, 1.0)], points
