"""A training run evaluated as it lands: ``fasteval run --watch`` on real vLLM (the CPU build).

The test plays the trainer. The tiny calculator checkpoint saves intermediate steps
(tests/tiny_models/calculator.py, ``SAVE_STEPS``); they are copied into a watched folder one
by one as ``checkpoint-N``, the last one written slowly in pieces. The watch serves each on real
vLLM and scores it; it is killed with ``kill -9`` once the first checkpoint's first records are
written (one job at a time, so the step is half done) and the same command resumes. Three vLLM
starts (the first step twice, around the kill, and the last step): a few minutes on a CPU node.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import yaml

from providers.local.launcher import group_members
from tests.tiny_models.calculator import step_checkpoints
from tests.vllm.conftest import calculator_tasks, env, fasteval, records, serve_block, wait_for

N_TASKS = 8
INTERVAL_S = 4


def copy_step(src: Path, dest: Path, *, pause_s: float = 0.0, chunk: int = 256 * 1024) -> datetime:
    """Write a step folder as a trainer would: small files, then the weights in chunks; returns when
    the last byte landed. Only what an HF Trainer step folder holds (not our build's extras)."""
    dest.mkdir(parents=True)
    files = [p for p in src.iterdir() if p.is_file() and p.name not in ("DONE", "recipe.json")]
    for f in sorted(files, key=lambda p: p.suffix == ".safetensors"):  # the weights last
        with f.open("rb") as r, (dest / f.name).open("wb") as w:
            while block := r.read(chunk):
                w.write(block)
                w.flush()
                if pause_s and f.suffix == ".safetensors":
                    time.sleep(pause_s)
    return datetime.now(UTC)


def tasks() -> list[dict[str, Any]]:
    """Half calculator questions with the tool offered (tool calls), half without (its answer, learnt
    early in training, is ``no tool``: the score). The tiny model copies digits badly at every
    step, so the calculator half scores 0 throughout; what rises is the rest."""
    plain = [{"id": f"n{i:03d}", "prompt": f"What is {20 + i} + {i}?", "answer": "no tool"}
             for i in range(N_TASKS // 2)]
    return calculator_tasks(N_TASKS - len(plain)) + plain


def series_config(tmp: Path, vllm: str, watched: Path) -> Path:
    data = tmp / "tasks.jsonl"
    data.write_text("".join(orjson.dumps(t).decode() + "\n" for t in tasks()))
    serve = serve_block(watched / "checkpoint-*", vllm)
    cfg: dict[str, Any] = {
        "seeds": 1,
        "models": [{"name": "tiny", "provider": "vllm", "serve": serve,
                    "params": {"temperature": 0.0, "max_tokens": 48}}],
        "suites": [{"name": "jsonl", "options": {"path": str(data), "max_rounds": 3}}],
        "run": {"max_concurrency": 1}}  # one job at a time: the kill after the first record lands mid-step
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def mean_score(recs: list[dict[str, Any]], model: str) -> float:
    scores = [float(r.get("score") or 0.0) for r in recs if r["model"] == model]
    assert len(scores) == N_TASKS, (model, len(scores))
    return sum(scores) / len(scores)


def test_watch_serves_each_step_on_vllm_once_complete_and_resumes_after_kill_9(tmp_path: Path, vllm: str,
                                                                                checkpoint: Path) -> None:
    steps = step_checkpoints(checkpoint)
    first, last = min(steps), max(steps)
    watched = tmp_path / "ckpts"
    watched.mkdir()
    config = series_config(tmp_path, vllm, watched)
    run_dir = tmp_path / "run"
    argv = fasteval("run", str(config), "--run-dir", str(run_dir), "--no-progress", "--watch",
                    "--watch-interval", str(INTERVAL_S), "--until-step", str(last), "--idle-timeout", "900")
    copy_step(steps[first], watched / f"checkpoint-{first}")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env())
    try:
        wait_for(lambda: len(records(run_dir)) >= 1 or proc.poll() is not None, 600, "the first step's records")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        pgid = int(orjson.loads((run_dir / "servers" / f"tiny@{first}-0.json").read_bytes())["pgid"])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        wait_for(lambda: not group_members(pgid), 30, "the vLLM server to go after kill -9")
    finally:
        if proc.poll() is None:
            proc.kill()
    before = (run_dir / "records.jsonl").read_bytes()
    landed: dict[str, datetime] = {}

    def trainer() -> None:  # the last step arrives while the watch runs, its weights in slow pieces
        time.sleep(INTERVAL_S)
        landed["last"] = copy_step(steps[last], watched / f"checkpoint-{last}", pause_s=INTERVAL_S / 8,
                                   chunk=128 * 1024)

    writer = threading.Thread(target=trainer)
    writer.start()
    again = subprocess.run(argv, capture_output=True, text=True, timeout=1500, env=env())
    writer.join()
    assert again.returncode == 0, again.stderr
    assert "watch ended (until-step)" in again.stderr
    recs = records(run_dir)
    assert sorted(Counter(r["job_id"] for r in recs).values()) == [1] * (2 * N_TASKS)
    whole = b"".join(line for line in before.splitlines(keepends=True) if line.endswith(b"\n"))
    assert (run_dir / "records.jsonl").read_bytes().startswith(whole), "a finished record was rewritten"
    state = orjson.loads((run_dir / "servers" / f"tiny@{last}-0.json").read_bytes())
    assert datetime.fromisoformat(state["started_at"]) > landed["last"], "served before its last byte landed"
    # the curve rises with training: the score and the tool calls
    assert mean_score(recs, f"tiny@{last}") > mean_score(recs, f"tiny@{first}")
    curve = subprocess.run(fasteval("report", str(run_dir), "--series", "tiny", "--format", "json"),
                           capture_output=True, text=True, timeout=120, env=env())
    assert curve.returncode == 0, curve.stderr
    doc = orjson.loads(curve.stdout)["curves"][0]
    assert [p["step"] for p in doc["points"]] == [first, last] and doc["best"]["step"] == last
    calls = [p["tool_calls_per_trajectory"] for p in doc["points"]]
    assert calls[1] > calls[0], calls
    shutil.rmtree(watched)
