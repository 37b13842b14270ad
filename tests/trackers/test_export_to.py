"""``fasteval export RUN --to mlflow|wandb|tensorboard``, read back with each tracker's own reader.

The series' headline lands at each checkpoint's step under the series' name, the plain model's at
step 0, each equal to the report's; the config's fingerprint and our version go with it; a tracker
whose library is missing is one line naming the extra to install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fasteval.core.version import fasteval_version
from fasteval.runfolder.records import read_manifest
from fasteval.view.report import report
from tests.trackers import wandb_log
from tests.view.sweep_fixture import FASTEVAL, run_cli

pytestmark = pytest.mark.slow  # one real sweep per module or session, then the library's reader

MEAN = "fasteval/run7/demo/tools/mean"


def expected(run_dir: Path) -> dict[tuple[str, int], float]:
    """(metric, step) -> value, from the report: what every tracker must hold."""
    out: dict[tuple[str, int], float] = {}
    for row in report(run_dir)["rows"]:
        model, step = (row["model"].split("@")[0], int(row["model"].split("@")[1])) if "@" in row["model"] \
            else (row["model"], 0)
        base = f"fasteval/{model}/{row['suite']}/{row['setting']}"
        out[f"{base}/mean", step] = row["mean"]
        out[f"{base}/std", step] = row["std"]
        out[f"{base}/n_seeds", step] = row["n_seeds"]
        out[f"{base}/n_error", step] = row["n_error"]
    return out


def test_mlflow_holds_each_metric_at_each_step(series_run: Path, tmp_path: Path, mlflow_uri: str) -> None:
    from mlflow.tracking import MlflowClient

    uri = mlflow_uri
    proc = run_cli("export", str(series_run), "--to", "mlflow", "--uri", uri, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = json.loads(proc.stdout)
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(done["run_id"])
    manifest = read_manifest(series_run)
    assert manifest is not None
    assert run.data.tags["fasteval.config_hash"] == manifest["config_hash"]
    assert run.data.tags["fasteval.version"] == fasteval_version() and run.data.tags["fasteval.partial"] == "false"
    assert run.info.status == "FINISHED" and client.get_experiment(run.info.experiment_id).name == "tracked"
    want = expected(series_run)
    for (name, step), value in want.items():
        history = {m.step: m.value for m in client.get_metric_history(done["run_id"], name)}
        assert history[step] == pytest.approx(value), (name, step)
    curve = {m.step: m.value for m in client.get_metric_history(done["run_id"], MEAN)}
    assert sorted(curve) == [100, 200, 300] and curve[200] > curve[100]
    artifacts = [a.path for a in client.list_artifacts(done["run_id"], "fasteval")]
    assert "fasteval/leaderboard.json" in artifacts


def test_mlflow_attaches_to_a_training_runs_own_run_and_leaves_it_running(
        series_run: Path, tmp_path: Path, mlflow_uri: str) -> None:
    """``--run-id``: the eval curve lands in the trainer's run beside its loss, which stays the trainer's."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_uri)
    train = client.create_run(client.create_experiment("training")).info.run_id
    for step, loss in ((100, 2.0), (200, 1.5), (300, 1.2)):
        client.log_metric(train, "train/loss", loss, step=step)
    proc = run_cli("export", str(series_run), "--to", "mlflow", "--uri", mlflow_uri, "--run-id", train, "--json",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["run_id"] == train
    run = client.get_run(train)
    assert run.info.status == "RUNNING", "an attached run is the trainer's to end"
    assert {m.step for m in client.get_metric_history(train, "train/loss")} == {100, 200, 300}
    curve = {m.step: m.value for m in client.get_metric_history(train, MEAN)}
    assert sorted(curve) == [100, 200, 300] and curve[200] == pytest.approx(expected(series_run)[MEAN, 200])
    missing = run_cli("export", str(series_run), "--to", "mlflow", "--uri", mlflow_uri, "--run-id", "0" * 32,
                      cwd=tmp_path)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr[-2000:]
    assert "mlflow: could not open the tracker's run" in missing.stderr


def test_tensorboard_holds_each_scalar_at_each_checkpoint_step(series_run: Path, tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    proc = run_cli("export", str(series_run), "--to", "tensorboard", "--logdir", str(tmp_path / "tb"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    for (name, step), value in expected(series_run).items():
        scalars = {e.step: e.value for e in acc.Scalars(name)}
        assert scalars[step] == pytest.approx(value, abs=1e-6), (name, step)  # TensorBoard keeps float32
    assert [e.step for e in acc.Scalars(MEAN)] == [100, 200, 300]
    assert "fasteval/leaderboard" in acc.Tags()["tensors"] and "fasteval/run" in acc.Tags()["tensors"]


def test_a_wandb_offline_run_holds_the_same_values(series_run: Path, tmp_path: Path) -> None:
    proc = run_cli("export", str(series_run), "--to", "wandb", "--mode", "offline", "--project", "evals",
                   "--json", env={"WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_id = json.loads(proc.stdout)["run_id"]
    [log] = list(tmp_path.glob(f"wandb/offline-run-*-{run_id}/run-{run_id}.wandb"))
    got: dict[tuple[str, int], Any] = {}
    for row in wandb_log.history(log):
        step = row.get("fasteval/step")
        for key, value in row.items():
            if key.startswith("fasteval/") and key != "fasteval/step" and step is not None:
                got[key, step] = value
    for (name, step), value in expected(series_run).items():
        assert got[name, step] == pytest.approx(value), (name, step)
    tags = wandb_log.config(log)["fasteval"]
    manifest = read_manifest(series_run)
    assert manifest is not None and tags["fasteval.config_hash"] == manifest["config_hash"]
    assert list(log.parent.glob("files/media/table/fasteval/leaderboard_*.table.json"))


def test_a_missing_tracker_library_is_one_line_naming_the_extra(series_run: Path, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "wandb"  # an installation without wandb: importing it fails
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named wandb')\n")
    env = {**os.environ, "PYTHONPATH": f"{shadow.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([*FASTEVAL, "export", str(series_run), "--to", "wandb"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: wandb: the wandb package is not installed; pip install 'fasteval[wandb]'"
    assert sys.executable  # the same interpreter, only the library hidden
