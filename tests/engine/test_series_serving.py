"""A training run's checkpoints in a sweep: a series served in step order, watch mode, kill -9, rewrites.

Every test runs the real ``fasteval`` CLI with the sim as the server binary (``serve.command``) and
plays the trainer itself: it writes checkpoint folders (one slowly, in pieces) while the CLI runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from fasteval.view.report import status
from tests.providers.local.conftest import (
    env,
    fasteval_argv,
    make_checkpoint,
    records,
    serve_block,
    state,
    write_config,
)

N_TASKS = 3


def series_config(tmp: Path, **checkpoints: object) -> Path:
    entry: dict[str, object] = {"name": "run7", "provider": "vllm",
                                "serve": serve_block(tmp / "ckpts" / "checkpoint-*")}
    if checkpoints:
        entry["checkpoints"] = checkpoints
    return write_config(tmp, [entry], gpus=[0], n_tasks=N_TASKS)


def run(config: Path, run_dir: Path, *extra: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(fasteval_argv("run", str(config), "--run-dir", str(run_dir), "--no-progress", *extra),
                          capture_output=True, text=True, timeout=timeout, env=env())


def watch(config: Path, run_dir: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(fasteval_argv("run", str(config), "--run-dir", str(run_dir), "--no-progress", "--watch",
                                          "--watch-interval", "1", *extra),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env())


def started(run_dir: Path, model: str) -> datetime:
    return datetime.fromisoformat(str(state(run_dir, f"{model}-0")["started_at"]))


def write_slowly(folder: Path, pieces: int = 8, pause_s: float = 0.1) -> datetime:
    """A trainer saving a two-shard checkpoint: the index first, then shard 2 growing in pieces.

    Returns when the last byte was written (the server must not have started before it). Its
    pauses are shorter than the watch interval, as a trainer's are shorter than a user's.
    """
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "tiny", "marker": "slow"}')
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    (folder / "model.safetensors.index.json").write_bytes(orjson.dumps({"weight_map": {"a": names[0], "b": names[1]}}))
    (folder / names[0]).write_bytes(b"\0" * 64)
    time.sleep(pause_s)
    with (folder / names[1]).open("wb") as f:
        for _ in range(pieces):
            f.write(b"\1" * 4096)
            f.flush()
            time.sleep(pause_s)
    return datetime.now(UTC)


@pytest.mark.slow
def test_a_series_runs_in_step_order_a_new_checkpoint_adds_only_its_jobs_and_a_rewrite_reruns_its_own(
        tmp_path: Path) -> None:
    for step in (300, 20, 100):
        make_checkpoint(tmp_path / "ckpts" / f"checkpoint-{step}")
    config = series_config(tmp_path)
    run_dir = tmp_path / "run"
    proc = run(config, run_dir)
    assert proc.returncode == 0, proc.stderr
    assert started(run_dir, "run7@20") < started(run_dir, "run7@100") < started(run_dir, "run7@300")
    assert Counter(r["model"] for r in records(run_dir)) == {f"run7@{s}": N_TASKS for s in (20, 100, 300)}
    make_checkpoint(tmp_path / "ckpts" / "checkpoint-400")
    proc = run(config, run_dir)  # the same config: no --force, only the new step's jobs run
    assert proc.returncode == 0, proc.stderr
    assert f"{N_TASKS} ok, 0 error, {3 * N_TASKS} already done" in proc.stderr
    # step 100 is saved again under the same folder after it was evaluated: a new fingerprint, so
    # its jobs (and only its) run again and its old records are kept aside, never mixed in
    whole = (run_dir / "records.jsonl").read_bytes()
    make_checkpoint(tmp_path / "ckpts" / "checkpoint-100", marker="retrained")
    proc = run(config, run_dir)
    assert proc.returncode == 0, proc.stderr
    assert f"{N_TASKS} ok, 0 error, {3 * N_TASKS} already done" in proc.stderr
    assert "run7@100/demo/tools changed (model checkpoint:" in (run_dir / "run.log").read_text()
    assert (run_dir / "records.jsonl").read_bytes().startswith(whole) and len(records(run_dir)) == 5 * N_TASKS
    assert status(run_dir)["done"] == 4 * N_TASKS


@pytest.mark.slow
def test_watch_serves_each_checkpoint_once_complete_and_never_a_half_written_one(tmp_path: Path) -> None:
    config = series_config(tmp_path)
    (tmp_path / "ckpts").mkdir()
    run_dir = tmp_path / "run"
    proc = watch(config, run_dir, "--until-step", "3")
    try:
        make_checkpoint(tmp_path / "ckpts" / "checkpoint-1")
        last_byte = write_slowly(tmp_path / "ckpts" / "checkpoint-2")
        make_checkpoint(tmp_path / "ckpts" / "checkpoint-3")
        make_checkpoint(tmp_path / "ckpts" / "checkpoint-4")  # past --until-step: never evaluated
        out, _ = proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert "watch ended (until-step)" in out
    assert started(run_dir, "run7@2") > last_byte, "the slow checkpoint was served before its last piece landed"
    assert Counter(r["model"] for r in records(run_dir)) == {f"run7@{s}": N_TASKS for s in (1, 2, 3)}
    assert all(r["status"] == "ok" for r in records(run_dir))
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert set(manifest["checkpoints"]) == {"run7@1", "run7@2", "run7@3"}


@pytest.mark.slow
def test_watch_killed_mid_run_resumes_exactly_with_the_same_command(tmp_path: Path) -> None:
    make_checkpoint(tmp_path / "ckpts" / "checkpoint-1")
    config = series_config(tmp_path)
    run_dir = tmp_path / "run"
    proc = watch(config, run_dir, "--until-step", "2")
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "records.jsonl").exists() or not records(run_dir):
            assert proc.poll() is None and time.monotonic() < deadline, "no record before the kill"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    before = (run_dir / "records.jsonl").read_bytes()
    trainer = threading.Thread(target=make_checkpoint, args=(tmp_path / "ckpts" / "checkpoint-2",))
    trainer.start()
    again = watch(config, run_dir, "--until-step", "2")
    out, _ = again.communicate(timeout=180)
    trainer.join()
    assert again.returncode == 0, out
    recs = records(run_dir)
    assert sorted(Counter(r["job_id"] for r in recs).values()) == [1] * (2 * N_TASKS)
    whole = [line for line in before.splitlines(keepends=True) if line.endswith(b"\n")]
    assert (run_dir / "records.jsonl").read_bytes().startswith(b"".join(whole)), "a finished record was rewritten"


def lora_adapter(folder: Path, policy: str, rank: int = 8) -> Path:
    """A PEFT adapter folder (the sim reads only its name and the policy file beside it)."""
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(orjson.dumps({"peft_type": "LORA", "r": rank}).decode())
    (folder / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    (folder / "policy").write_text(policy)
    return folder


@pytest.mark.slow
def test_a_lora_series_runs_every_adapter_on_one_server_of_its_base(tmp_path: Path) -> None:
    base = make_checkpoint(tmp_path / "base")
    for step, policy in ((10, "direct"), (20, "tools"), (30, "tools")):
        lora_adapter(tmp_path / "adapters" / f"checkpoint-{step}", policy, rank=step)
    serve = serve_block(base, "--log-requests")
    serve["command"] += ["--lora-modules", "{lora_modules}"]
    entry = {"name": "run7", "provider": "vllm", "serve": serve,
             "checkpoints": {"glob": str(tmp_path / "adapters" / "checkpoint-*")}}
    config = write_config(tmp_path, [entry], gpus=[0], n_tasks=N_TASKS)
    run_dir = tmp_path / "run"
    proc = run(config, run_dir)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (run_dir / "servers").glob("*.json")) == ["run7-0.json"]  # one server, one start
    log = (run_dir / "servers" / "run7-0.log").read_text()
    assert log.count("=== fasteval: start") == 1
    assert f"run7@10={tmp_path / 'adapters' / 'checkpoint-10'}" in log
    recs = records(run_dir)
    assert Counter(r["model"] for r in recs) == {f"run7@{s}": N_TASKS for s in (10, 20, 30)}
    calls = {m: sum(len(r["trajectory"]["tool_calls"]) for r in recs if r["model"] == m) for m in ("run7@10", "run7@20")}
    assert calls["run7@10"] == 0 < calls["run7@20"], "each step's requests reached its own adapter"
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    ids = manifest["checkpoints"]
    assert ids["run7@10"]["base"] == str(base.resolve()) and len({ids[f"run7@{s}"]["fingerprint"]
                                                                 for s in (10, 20, 30)}) == 3
    (tmp_path / "adapters" / "checkpoint-20" / "adapter_model.safetensors").write_bytes(b"\1" * 128)
    proc = run(config, run_dir)  # an adapter retrained under its step's folder: its step's jobs run again
    assert proc.returncode == 0, proc.stderr
    assert f"{N_TASKS} ok, 0 error, {2 * N_TASKS} already done" in proc.stderr
    assert "run7@20/demo/tools changed (model checkpoint:" in (run_dir / "run.log").read_text()
