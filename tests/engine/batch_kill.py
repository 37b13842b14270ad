"""The ``kill -9`` loop the batch restart tests share: a real ``fasteval run`` killed at random
points of its gather/create/poll/download cycle, then run to the end; and its records read back
with a check that no job was recorded twice."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]


def kill_loop(argv: list[str], journal: Path, env: dict[str, str], rng: random.Random, rounds: int = 4) -> int:
    """Start ``argv`` up to ``rounds`` times, each killed with SIGKILL a random moment after it
    journaled something of its own; how many were killed (one that ended on its own stops it)."""
    kills = 0
    for _ in range(rounds):
        seen = journal.stat().st_size if journal.exists() else 0
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and \
                (journal.stat().st_size if journal.exists() else 0) <= seen:
            time.sleep(0.01)  # until this process has journaled something of its own
        time.sleep(rng.uniform(0.0, 0.6))  # then somewhere in gather/upload/create/poll/download
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
    return kills


def records_once(run_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """(task_id, seed) -> record, failing on a job recorded twice."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for line in (run_dir / "records.jsonl").read_bytes().splitlines():
        r = orjson.loads(line)
        assert (r["task_id"], r["seed"]) not in out, "a job recorded twice"
        out[(r["task_id"], r["seed"])] = r
    return out
