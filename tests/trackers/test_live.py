"""``log_to:``: a sweep tells MLflow, W&B and TensorBoard each group's scores as the group completes.

One real series sweep logs to all three at once: each checkpoint's scores at its step, equal to the
report's, in the order the checkpoints finished (live, not at the end), and the leaderboard; a
rerun resumes the same tracker runs. Trackers that hang, fail or are not installed are lines in
run.log and change nothing of the run. The trackers' process never sees the config's keys.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fasteval.runfolder.names import RUN_LOG, TRACKERS
from tests.trackers import wandb_log
from tests.trackers.conftest import series_config, write_checkpoint
from tests.trackers.test_export_to import MEAN, expected
from tests.view.sweep_fixture import FASTEVAL, run_cli

pytestmark = pytest.mark.slow  # one real sweep per module or session, then the library's reader


def test_a_series_sweep_logs_each_checkpoint_at_its_step_as_it_completes(tmp_path: Path,
                                                                          mlflow_uri: str) -> None:
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    uri = mlflow_uri
    cfg = series_config(tmp_path, log_to={"mlflow": {"uri": uri}, "tensorboard": {"logdir": "tb"},
                                          "wandb": {"mode": "offline", "dir": "wb", "project": "evals"}})
    (tmp_path / "wb").mkdir()
    run_dir = tmp_path / "run"
    proc = run_cli("run", str(cfg), "--run-dir", str(run_dir), "--no-progress", cwd=tmp_path,
                   env={"WANDB_SILENT": "true"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "log_to" not in (run_dir / RUN_LOG).read_text()  # no tracker had anything to say
    ids = json.loads((run_dir / TRACKERS).read_text())
    assert set(ids) == {"mlflow", "wandb"}  # the runs a rerun resumes (TensorBoard appends to its folder)
    want = expected(run_dir)

    client = MlflowClient(tracking_uri=uri)
    first: dict[int, int] = {}
    for (name, step), value in want.items():
        history = {m.step: m for m in client.get_metric_history(ids["mlflow"], name)}
        assert history[step].value == pytest.approx(value), (name, step)
        if name == MEAN:
            first[step] = history[step].timestamp
    # live: each checkpoint was logged when its jobs were done, one after the other, not all at the end
    assert first[100] < first[200] < first[300]
    run = client.get_run(ids["mlflow"])
    assert run.data.tags["fasteval.config_hash"] and run.info.status == "FINISHED"
    assert run.data.tags["fasteval.partial"] == "false"  # every planned job has a record
    assert "fasteval/leaderboard.json" in [a.path for a in client.list_artifacts(ids["mlflow"], "fasteval")]

    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    for (name, step), value in want.items():
        assert {e.step: e.value for e in acc.Scalars(name)}[step] == pytest.approx(value, abs=1e-6)

    [log] = list((tmp_path / "wb").glob(f"wandb/offline-run-*-{ids['wandb']}/run-{ids['wandb']}.wandb"))
    got = {(k, row["fasteval/step"]): v for row in wandb_log.history(log) if "fasteval/step" in row
           for k, v in row.items() if k.startswith("fasteval/") and k != "fasteval/step"}
    for key, value in want.items():
        assert got[key] == pytest.approx(value), key

    # a rerun (nothing left to do) logs into the same runs
    again = run_cli("run", str(cfg), "--run-dir", str(run_dir), "--no-progress", cwd=tmp_path,
                    env={"WANDB_SILENT": "true"})
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((run_dir / TRACKERS).read_text()) == ids
    assert len(client.search_runs([run.info.experiment_id])) == 1


@pytest.fixture
def silent_server() -> Iterator[int]:
    """An HTTP port that accepts connections and never answers: a tracking server that hangs."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()


def test_trackers_that_hang_fail_or_are_missing_change_nothing_of_the_run(tmp_path: Path, silent_server: int) -> None:
    (tmp_path / "not-a-folder").write_text("a file where the log folder should be")
    shadow = tmp_path / "shadow" / "wandb"  # wandb missing from this installation
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named wandb')\n")
    cfg = series_config(tmp_path, log_to={"mlflow": {"uri": f"http://127.0.0.1:{silent_server}"},
                                          "tensorboard": {"logdir": "not-a-folder/tb"},
                                          "wandb": {"mode": "offline"}, "timeout_s": 3})
    run_dir = tmp_path / "run"
    t0 = time.monotonic()
    proc = run_cli("run", str(cfg), "--run-dir", str(run_dir), "--no-progress", cwd=tmp_path,
                   env={"PYTHONPATH": f"{shadow.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                        "MLFLOW_HTTP_REQUEST_TIMEOUT": "600"})
    wall = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "run7@300" in run_cli("report", str(run_dir), "--format", "json").stdout  # every checkpoint ran
    log = (run_dir / RUN_LOG).read_text()
    assert "log_to: mlflow: did not finish within 3 s; abandoned" in log
    assert "log_to: tensorboard: not logged to" in log
    assert "pip install 'fasteval[wandb]'" in log
    assert wall < 300  # the hung tracker was killed, not waited for (its client would retry for minutes)


def test_watch_logs_each_new_checkpoint_at_its_step_into_the_same_runs(tmp_path: Path, mlflow_uri: str) -> None:
    from mlflow.tracking import MlflowClient

    cfg = series_config(tmp_path, steps=(100,), log_to={"mlflow": {"uri": mlflow_uri}, "tensorboard": {"logdir": "tb"}})
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress", "--watch",
                             "--watch-interval", "0.5", "--until-step", "200"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        client = MlflowClient(tracking_uri=mlflow_uri)
        deadline = time.monotonic() + 120
        while not _logged(client, run_dir, 100):  # the first round: checkpoint 100 at step 100
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.5)
        write_checkpoint(tmp_path, 200)  # the trainer saves the next one; the watcher takes it
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    ids = json.loads((run_dir / TRACKERS).read_text())
    history = {m.step: m.value for m in client.get_metric_history(ids["mlflow"], MEAN)}
    want = expected(run_dir)
    assert history == {100: pytest.approx(want[MEAN, 100]), 200: pytest.approx(want[MEAN, 200])}
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "tb"))  # one event file per round, read as one run
    acc.Reload()
    assert sorted({e.step for e in acc.Scalars(MEAN)}) == [100, 200]


def _logged(client: object, run_dir: Path, step: int) -> bool:
    try:
        run_id = json.loads((run_dir / TRACKERS).read_text())["mlflow"]
        return any(m.step == step for m in client.get_metric_history(run_id, MEAN))  # type: ignore[attr-defined]
    except (OSError, ValueError, KeyError):
        return False
