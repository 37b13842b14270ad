"""A real checkpoint series the tracker tests send: three checkpoints served by the sim and a plain model.

Each checkpoint folder names the sim policy its server answers with (``serve.command``), as
tests/view/test_curves.py does: step 100 answers blind, steps 200 and 300 use the tools, so the
eval curve rises between the first two steps. The demo suite (no sandbox) keeps it to seconds.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.view.sweep_fixture import run_cli

POLICIES = {100: "guess", 200: "tools", 300: "tools"}


def write_checkpoint(root: Path, step: int) -> None:
    """A checkpoint folder as a trainer leaves it (weights, then the marker file) naming its sim policy."""
    folder = root / "ckpts" / f"checkpoint-{step}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"\0" * 16)
    (folder / "policy").write_text(POLICIES[step])
    (folder / "trainer_state.json").write_text("{}")


def series_config(root: Path, steps: tuple[int, ...] = tuple(POLICIES), **extra: Any) -> Path:
    """A config of the series (``run7``, its checkpoints under ``root/ckpts``) and a plain sim model."""
    for step in steps:
        write_checkpoint(root, step)
    command = ["sh", "-c", "exec {python} -m providers.sim --port {port} --model {served_model_name}:$(cat {model}/policy)"]
    config = {"name": "tracked", "seeds": 2,
              "models": [{"name": "run7", "provider": "vllm", "checkpoints": {"marker": "trainer_state.json"},
                          "serve": {"model": "ckpts/checkpoint-*", "command": command, "startup_timeout_s": 60}},
                         {"name": "api", "provider": "sim", "policy": "tools"}],
              "suites": [{"name": "demo", "options": {"n_tasks": 3, "image_size": [64, 48], "multi_turn_every": 0},
                          "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}],
              "run": {"gpus": [0], "fsync": "never"}, **extra}
    path = root / "sweep.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="session")
def series_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tracked")
    proc = run_cli("run", str(series_config(root)), "--run-dir", str(root / "run"), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return root / "run"


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow SQLite store, its schema created once (MLflow's migrations take seconds)."""
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def mlflow_uri(mlflow_template: Path, tmp_path: Path) -> str:
    """A private copy of the empty store, as a tracking URI."""
    shutil.copy(mlflow_template, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path / 'mlflow.db'}"
