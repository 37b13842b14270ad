"""Eight processes write one store at once, each killed at random and restarted: nothing lost, nothing twice.

Each writer is a real process using the sweep's own mirror (``StoreMirror``: its thread, its
segment, fsync before entries) on records of fingerprints only it makes; a restarted writer, like
a restarted sweep, writes only what the store does not hold yet. SIGKILL lands anywhere: in a
line, between a line and its entry, between batches. No lock is taken anywhere.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fasteval.store.reader import list_segments, open_view
from fasteval.store.segments import ENTRY, parse_line

WRITERS, PER_WRITER = 8, 400

_WRITER = r"""
import hashlib, random, sys, time
from pathlib import Path
import orjson
from fasteval.core.types import Record
from fasteval.store.reader import open_view
from fasteval.store.segments import ensure_store
from fasteval.store.writer import StoreMirror

root, w, n = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
ensure_store(root)
fps = [hashlib.sha256(f"{w}/{i}".encode()).hexdigest()[:32] for i in range(n)]
held = open_view(root).match(fps)
todo = [i for i in range(n) if held[i] < 0]
mirror = StoreMirror(root, Path(f"/nonexistent/run{w}"), f"run{w}", Path("/nonexistent/blobs"))
rng = random.Random()
while todo:
    k = rng.randint(1, 25)
    batch = []
    for i in todo[:k]:
        rec = Record(job_id=f"w{w}-{i}", model=f"m{w}", suite="s", setting="d", task_id=f"t{i}", seed=0,
                     status="ok", score=i / n, answer="x" * rng.randint(0, 3000), fingerprint=fps[i],
                     components={"model": "%016x" % w, "suite": "0" * 16, "setting": "1" * 16})
        batch.append((orjson.dumps(rec) + b"\n", rec))
    mirror.offer(batch)
    todo = todo[k:]
    time.sleep(rng.random() * 0.01)
mirror.close()
"""


def _spawn(root: Path, w: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", _WRITER, str(root), str(w), str(PER_WRITER)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_eight_writers_killed_at_random_and_restarted_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    rng = random.Random(41)
    procs = {w: _spawn(root, w) for w in range(WRITERS)}
    kills = 0
    deadline = time.monotonic() + 240
    while procs and time.monotonic() < deadline:
        time.sleep(rng.uniform(0.05, 0.4))
        for w, p in list(procs.items()):
            code = p.poll()
            if code == 0:
                del procs[w]
            elif code is not None:
                raise AssertionError(f"writer {w} failed: {p.stderr.read().decode()[-2000:] if p.stderr else ''}")
            elif kills < 24 and rng.random() < 0.3:
                p.send_signal(signal.SIGKILL)
                p.wait()
                kills += 1
                procs[w] = _spawn(root, w)  # restarted, as a resumed sweep would be
    assert not procs, "writers did not finish in time"
    assert kills >= 8
    view = open_view(root)
    assert len(view) == WRITERS * PER_WRITER == view.ok, "every fingerprint is there, once, ok"
    # nothing twice: every whole line in every segment is a distinct fingerprint
    seen: set[str] = set()
    torn = 0
    for seg in list_segments(root):
        data = seg.path.read_bytes()
        lines = data.split(b"\n")
        torn += bool(lines[-1])  # a writer killed inside its last line
        for line in lines[:-1]:
            doc = parse_line(line + b"\n")
            assert doc is not None, "only a segment's last line may be torn"
            assert doc["fingerprint"] not in seen, "a record was written twice"
            seen.add(doc["fingerprint"])
        entries = np.frombuffer(seg.path.with_suffix(".fps").read_bytes()[:len(
            seg.path.with_suffix(".fps").read_bytes()) // ENTRY.itemsize * ENTRY.itemsize], dtype=ENTRY)
        assert all(e["offset"] + e["length"] <= len(data) for e in entries), "an entry points past its line"
    assert len(seen) == WRITERS * PER_WRITER
    # each record reads back whole, under the fingerprint its entry names
    for i in range(0, len(view), 97):
        doc = view.read(i)
        assert doc is not None and doc["record"]["fingerprint"] == doc["fingerprint"]
