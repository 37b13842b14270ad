"""The live trackers' own process: ``python -m fasteval.trackers.worker``, fed JSON lines on stdin.

The sweep starts it (``fasteval.engine.steer.tracking``) so that the trackers' libraries (seconds
of imports, blocking network and database calls, their own threads and exit hooks) never run on
the sweep's event loop or in its process, and so that one that hangs can be killed. Messages:

- ``{"op": "open", "run_dir", "trackers": [TrackerSpec fields], "tags", "resume": bool}``: open
  each tracker's run (a failure drops that tracker, with one line);
- ``{"op": "group", "model", "suite", "setting", "expected"}``: the sweep's ledger says this group
  has all its jobs; its headline is read from the run index (waiting, briefly, for the index to
  hold ``expected`` jobs of it: the sweep writes records a moment after it counts them) and logged;
- ``{"op": "finish"}``: the leaderboard, then every tracker closed.

Every problem is one line on stderr (``<tracker>: <what>``), which the sweep copies into run.log;
an end of input without ``finish`` (the sweep was killed) closes the trackers all the same. With
``resume``, the trackers' run ids are kept in the run folder (``trackers.json``) so a resumed sweep
and every round of ``--watch`` log into the same runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from fasteval.config.log_to import TrackerSpec
from fasteval.core.redact import add_secrets_from_env, redact_text, secret_like_env_names
from fasteval.core.terminal import clean
from fasteval.runfolder.index import RunIndex, open_index
from fasteval.runfolder.names import TRACKERS
from fasteval.runfolder.records import read_manifest
from fasteval.runfolder.safe_open import open_nofollow, refuse_symlink
from fasteval.trackers.scores import GroupScore, group_score, group_scores, series_names
from fasteval.trackers.send import log_groups, log_leaderboard
from fasteval.trackers.sinks import Sink, open_sink

WAIT_FOR_RECORDS_S = 10.0
"""How long a group's event waits for the run index to hold all its jobs before it logs what is there."""


def warn(kind: str, what: str) -> None:
    """One line for run.log: bounded, secrets masked, no control characters."""
    sys.stderr.write(clean(redact_text(f"{kind}: {what}"))[:500] + "\n")
    sys.stderr.flush()


def read_state(run_dir: Path) -> dict[str, str]:
    path = run_dir / TRACKERS
    try:
        refuse_symlink(path, TRACKERS)
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def write_state(run_dir: Path, state: dict[str, str]) -> None:
    tmp = run_dir / (TRACKERS + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, TRACKERS)
    with os.fdopen(fd, "wb") as f:
        f.write(orjson.dumps(state, option=orjson.OPT_SORT_KEYS))
    os.replace(tmp, run_dir / TRACKERS)


class Worker:
    def __init__(self) -> None:
        self.sinks: list[Sink] = []
        self.run_dir: Path | None = None
        self.series: set[str] = set()
        self._index: RunIndex | None = None

    def open(self, msg: dict[str, Any]) -> None:
        self.run_dir = Path(msg["run_dir"])
        manifest = read_manifest(self.run_dir) or {}
        self.series = series_names(manifest.get("config") or {})
        state = read_state(self.run_dir) if msg.get("resume") else {}
        for fields in msg.get("trackers") or []:
            spec = TrackerSpec(**fields)
            try:
                sink = open_sink(spec, dict(msg.get("tags") or {}), None if spec.run_id else state.get(spec.kind))
            except Exception as e:  # any failure of a tracker's library is that tracker's, not the run's
                warn(spec.kind, f"not logged to ({type(e).__name__}: {e})")
                continue
            self.sinks.append(sink)
            if sink.run_id and not spec.run_id:
                state[spec.kind] = sink.run_id
        if msg.get("resume") and state:
            try:
                write_state(self.run_dir, state)
            except OSError as e:
                warn("trackers", f"could not keep the runs' ids in {TRACKERS} ({e}); a rerun starts new ones")

    def index(self) -> RunIndex:
        assert self.run_dir is not None
        if self._index is None:
            self._index = open_index(self.run_dir)
        else:
            self._index.refresh()
        return self._index

    def group(self, msg: dict[str, Any]) -> None:
        model, suite, setting, expected = msg["model"], msg["suite"], msg["setting"], int(msg.get("expected") or 0)
        deadline = time.monotonic() + WAIT_FOR_RECORDS_S
        while True:
            index = self.index()
            if index.count(model=model, suite=suite, setting=setting) >= expected or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        score = group_score(index, model, suite, setting, self.series)
        self.each(lambda sink: log_groups(sink, [score]))

    def finish(self) -> None:
        if self.run_dir is not None and self.sinks:
            scores: list[GroupScore] = list(group_scores(self.index(), self.series))
            self.each(lambda sink: log_leaderboard(sink, scores))
        self.close()

    def each(self, call: Any) -> None:
        """``call(sink)`` on every tracker; one that fails is dropped, with one line."""
        for sink in list(self.sinks):
            try:
                call(sink)
            except Exception as e:
                warn(sink.kind, f"dropped after a failure ({type(e).__name__}: {e})")
                self.sinks.remove(sink)

    def close(self) -> None:
        self.each(lambda sink: sink.close())
        self.sinks = []
        if self._index is not None:
            self._index.close()
            self._index = None


def main() -> int:
    add_secrets_from_env(secret_like_env_names())  # a tracker's own token, echoed in an error, is masked
    worker = Worker()
    try:
        for line in sys.stdin.buffer:
            try:
                msg = orjson.loads(line)
                op = msg["op"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                warn("trackers", "a message that is not one (ignored)")
                continue
            try:
                if op == "open":
                    worker.open(msg)
                elif op == "group":
                    worker.group(msg)
                elif op == "finish":
                    worker.finish()
                    return 0
            except Exception as e:  # reading the run folder failed: say so, keep serving the next message
                warn("trackers", f"{op} failed ({type(e).__name__}: {e})")
    finally:
        worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
