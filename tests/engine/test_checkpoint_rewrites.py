"""A checkpoint rewritten in place: same names, same sizes, other weights.

A trainer that saves a step again (a re-export, a retrain with the same shapes) into the folder a
run folder already evaluated; a trainer that preallocates its shards at full size and fills them
while ``--watch`` looks. The real CLI runs with the sim as the server binary (``serve.command``);
the weights are real safetensors files (the published layout: a little-endian u64, the JSON
header, the tensors' bytes), larger than what is hashed whole.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from fasteval.view.report import status
from providers.local.fingerprint import checkpoint_identity
from tests.providers.local.conftest import env, fasteval_argv, records, serve_block, state, write_config

N_TASKS = 2
TENSORS = {"embed": 6 * 1024 * 1024, "layers.0.norm": 2048, "layers.0.mlp": 10 * 1024 * 1024, "head": 4 * 1024 * 1024}
"""Tensor name -> float32 elements (about 80 MB in all: past the 32 MiB hashed whole)."""


def _layout() -> tuple[bytes, dict[str, tuple[int, int]]]:
    header: dict[str, object] = {}
    spans: dict[str, tuple[int, int]] = {}
    offset = 0
    for name, n in TENSORS.items():
        header[name] = {"dtype": "F32", "shape": [n], "data_offsets": [offset, offset + 4 * n]}
        spans[name] = (offset, offset + 4 * n)
        offset += 4 * n
    raw = orjson.dumps(header)
    return struct.pack("<Q", len(raw)) + raw, spans


def write_weights(path: Path, seed: int) -> None:
    """A safetensors file whose every tensor holds bytes drawn from ``seed``."""
    head, spans = _layout()
    with path.open("wb") as f:
        f.write(head)
        for name, (start, end) in spans.items():
            f.write(_bytes(seed, name, end - start))


def rewrite_tensor(path: Path, name: str, seed: int) -> None:
    """Overwrite one tensor in place (the file keeps its size)."""
    head, spans = _layout()
    start, end = spans[name]
    with path.open("r+b") as f:
        f.seek(len(head) + start)
        f.write(_bytes(seed, name, end - start))


def _bytes(seed: int, name: str, n: int) -> bytes:
    block = (f"{seed}:{name}:".encode() * 64)[:4096]
    return (block * (n // 4096 + 1))[:n]


def make_step(folder: Path, seed: int = 1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "tiny"}')
    write_weights(folder / "model.safetensors", seed)
    return folder


def _run(config: Path, run_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(fasteval_argv("run", str(config), "--run-dir", str(run_dir), "--no-progress", *extra),
                          capture_output=True, text=True, timeout=180, env=env())


def _series(tmp: Path) -> Path:
    entry = {"name": "run7", "provider": "vllm", "serve": serve_block(tmp / "ckpts" / "checkpoint-*")}
    return write_config(tmp, [entry], gpus=[0], n_tasks=N_TASKS)


@pytest.mark.slow
def test_same_size_weights_rewritten_in_place_are_a_changed_checkpoint(tmp_path: Path) -> None:
    step = make_step(tmp_path / "ckpts" / "checkpoint-100")
    config = _series(tmp_path)
    run_dir = tmp_path / "run"
    proc = _run(config, run_dir, "--limit", "1")
    assert proc.returncode == 0, proc.stderr
    size = (step / "model.safetensors").stat().st_size
    write_weights(step / "model.safetensors", seed=2)  # retrained with the same shapes
    assert (step / "model.safetensors").stat().st_size == size
    proc = _run(config, run_dir)  # a changed fingerprint: every job of the step runs on the new weights
    assert proc.returncode == 0, proc.stderr
    assert f"{N_TASKS} ok, 0 error, 0 already done" in proc.stderr
    assert "run7@100/demo/tools changed (model checkpoint:" in (run_dir / "run.log").read_text()
    assert len(records(run_dir)) == 1 + N_TASKS  # the old weights' record kept, aside: never counted with these
    assert status(run_dir)["done"] == N_TASKS


def test_the_fingerprint_follows_every_tensor_and_not_the_copy(tmp_path: Path) -> None:
    step = make_step(tmp_path / "a")
    first = checkpoint_identity(str(step))["fingerprint"]
    for name in TENSORS:  # one tensor retrained, a layer norm of 8 KiB included
        rewrite_tensor(step / "model.safetensors", name, seed=7)
        changed = checkpoint_identity(str(step))["fingerprint"]
        assert changed != first, f"a rewrite of {name} alone went unnoticed"
        make_step(step)
        assert checkpoint_identity(str(step))["fingerprint"] == first
    copy = tmp_path / "b"
    shutil.copytree(step, copy, copy_function=shutil.copyfile)  # new files, new modification times
    os.utime(copy / "model.safetensors", (1, 1))
    assert checkpoint_identity(str(copy))["fingerprint"] == first


@pytest.mark.slow
def test_a_run_folder_from_before_content_fingerprints_resumes_without_a_false_change(tmp_path: Path) -> None:
    make_step(tmp_path / "ckpts" / "checkpoint-100")
    config = _series(tmp_path)
    run_dir = tmp_path / "run"
    assert _run(config, run_dir, "--limit", "1").returncode == 0
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    legacy = checkpoint_identity(str(tmp_path / "ckpts" / "checkpoint-100"), legacy=True)
    manifest["checkpoints"]["run7@100"] = legacy  # what the older fasteval recorded: names and sizes
    assert "scheme" not in legacy
    (run_dir / "manifest.json").write_bytes(orjson.dumps(manifest))
    proc = _run(config, run_dir)
    assert proc.returncode == 0, proc.stderr
    assert f"{N_TASKS - 1} ok, 0 error, 1 already done" in proc.stderr
    assert "scheme" in orjson.loads((run_dir / "manifest.json").read_bytes())["checkpoints"]["run7@100"]


@pytest.mark.slow
def test_watch_waits_for_preallocated_shards_being_filled(tmp_path: Path) -> None:
    """Both shards are full size from the start; a writer fills them for a few seconds."""
    config = _series(tmp_path)
    (tmp_path / "ckpts").mkdir()
    run_dir = tmp_path / "run"
    folder = tmp_path / "ckpts" / "checkpoint-1"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "tiny"}')
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    (folder / "model.safetensors.index.json").write_bytes(orjson.dumps({"weight_map": {"a": names[0], "b": names[1]}}))
    pieces, piece = 40, 64 * 1024
    for n in names:
        with (folder / n).open("wb") as f:
            f.truncate(pieces * piece)  # preallocated: the sizes never change from here on
    finished: list[datetime] = []

    def trainer() -> None:
        for n in names:
            with (folder / n).open("r+b") as f:
                for i in range(pieces):
                    f.seek(i * piece)
                    f.write(b"\1" * piece)
                    f.flush()
                    time.sleep(0.1)  # shorter than the watch interval, as a trainer's pauses are
        finished.append(datetime.now(UTC))

    writer = threading.Thread(target=trainer)
    proc = subprocess.Popen(fasteval_argv("run", str(config), "--run-dir", str(run_dir), "--no-progress", "--watch",
                                          "--watch-interval", "1", "--until-step", "1"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env())
    writer.start()
    try:
        out, _ = proc.communicate(timeout=180)
    finally:
        proc.kill()
        writer.join()
    assert proc.returncode == 0, out
    start = datetime.fromisoformat(str(state(run_dir, "run7@1-0")["started_at"]))
    assert start > finished[0], f"served at {start}, while its shards were written until {finished[0]}"
    assert Counter(r["model"] for r in records(run_dir)) == {"run7@1": N_TASKS}
