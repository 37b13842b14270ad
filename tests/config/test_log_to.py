"""``log_to:`` is typed at load, checked like the rest of a config, and not part of the run's identity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.config.log_to import TrackerSpec
from fasteval.core.errors import ConfigError


def write(tmp_path: Path, log_to: Any, name: str = "sweep") -> Path:
    cfg: dict[str, Any] = {"name": "evals", "seeds": 1,
                           "models": [{"name": "m", "provider": "sim", "policy": "tools"}],
                           "suites": [{"name": "demo", "options": {"n_tasks": 1}}]}
    if log_to is not None:
        cfg["log_to"] = log_to
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_trackers_are_typed_with_paths_from_the_config_folder_and_no_identity(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, {"mlflow": {}, "wandb": {"project": "p", "mode": "offline", "dir": "wb"},
                                       "tensorboard": {"logdir": "tb"}, "timeout_s": 5}))
    assert cfg.log_to is not None and cfg.log_to.timeout_s == 5
    assert cfg.log_to.trackers == (
        TrackerSpec(kind="mlflow"), TrackerSpec(kind="wandb", project="p", mode="offline", dir=str(tmp_path / "wb")),
        TrackerSpec(kind="tensorboard", logdir=str(tmp_path / "tb")))
    assert cfg.log_to.trackers[0].named("evals").experiment == "evals"  # the config's name by default
    plain = load_config(write(tmp_path, None, "plain"))
    assert plain.log_to is None and plain.hash() == cfg.hash()  # adding a tracker is no config change


@pytest.mark.parametrize(("log_to", "where"), [
    ({}, "log_to: name at least one tracker"),
    ({"mlflow": {}, "timeout_s": 0}, "log_to.timeout_s"),
    ({"wandb": {"mode": "sometimes"}}, "log_to.wandb.mode"),
    ({"mlfow": {}}, "mlflow"),  # did you mean
    ({"mlflow": {"uri": "https://u:sk-proj-abcdefghijklmnopqrstuvwxyz012345@mlflow.example"}}, "log_to.mlflow.uri"),
])
def test_mistakes_and_secrets_stop_the_config(tmp_path: Path, log_to: Any, where: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, log_to))
    assert where in str(e.value)
