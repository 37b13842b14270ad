"""The live trackers' own process: ``python -m fasteval.trackers.worker``, fed JSON lines on stdin.

The sweep starts it (``fasteval.engine.steer.tracking``) so that the trackers' libraries (seconds
of imports, blocking network and database calls, their own threads and exit hooks) never run on
the sweep's event loop or in its process, and so that one that hangs can be killed. Messages:

- ``{"op": "open", "run_dir", "trackers": [TrackerSpec fields], "tags", "resume": bool, "timeout_s"}``:
  each tracker on a thread of its own opens its run (a failure drops that tracker, with one line;
  one that hangs holds up no other);
- ``{"op": "group", "model", "suite", "setting", "expected"}``: the sweep's ledger says this group
  has all its jobs; its headline is read from the run index (waiting, briefly, for the index to
  hold ``expected`` jobs of it: the sweep writes records a moment after it counts them) and logged;
- ``{"op": "finish"}``: the leaderboard, then every tracker closed; one that has not finished
  ``timeout_s`` later is named and left behind, and the process exits.

Every problem is one line on stderr (``<tracker>: <what>``), which the sweep copies into run.log;
an end of input without ``finish`` (the sweep was killed) closes the trackers all the same. With
``resume``, the trackers' run ids are kept in the run folder (``trackers.json``) so a resumed sweep
and every round of ``--watch`` log into the same runs.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
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
from fasteval.trackers.send import is_partial, log_groups, log_leaderboard
from fasteval.trackers.sinks import open_sink

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


class TrackerThread:
    """One tracker on a thread of its own: one that hangs (an unreachable server, a lock) holds up
    nobody else's values; one that fails is dropped with one line."""

    def __init__(self, spec: TrackerSpec, tags: dict[str, str], resume_id: str | None,
                 on_open: Callable[[str, str], None]) -> None:
        self.spec = spec
        self.queue: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        self._args = (tags, resume_id, on_open)
        self.thread = threading.Thread(target=self._run, name=f"tracker-{spec.kind}", daemon=True)
        self.thread.start()

    def put(self, op: str, payload: Any) -> None:
        self.queue.put((op, payload))

    def _run(self) -> None:
        tags, resume_id, on_open = self._args
        kind = self.spec.kind
        try:
            sink = open_sink(self.spec, tags, resume_id)
        except Exception as e:  # any failure of a tracker's library is that tracker's, not the run's
            warn(kind, f"not logged to ({type(e).__name__}: {e})")
            return
        if sink.run_id and not self.spec.run_id:
            on_open(kind, sink.run_id)
        try:
            while (item := self.queue.get()) is not None:
                op, payload = item
                if op == "group":
                    log_groups(sink, [payload])
                elif op == "leaderboard":
                    log_leaderboard(sink, *payload)
            sink.close()
        except Exception as e:
            warn(kind, f"dropped after a failure ({type(e).__name__}: {e})")


class Worker:
    def __init__(self) -> None:
        self.trackers: list[TrackerThread] = []
        self.run_dir: Path | None = None
        self.series: set[str] = set()
        self.timeout_s = 60.0
        self._index: RunIndex | None = None
        self._state: dict[str, str] = {}
        self._lock = threading.Lock()
        self._resume = False

    def open(self, msg: dict[str, Any]) -> None:
        self.run_dir = Path(msg["run_dir"])
        self.timeout_s = float(msg.get("timeout_s") or 60.0)
        manifest = read_manifest(self.run_dir) or {}
        self.series = series_names(manifest.get("config") or {})
        self._resume = bool(msg.get("resume"))
        self._state = read_state(self.run_dir) if self._resume else {}
        for fields in msg.get("trackers") or []:
            spec = TrackerSpec(**fields)
            resume_id = None if spec.run_id else self._state.get(spec.kind)
            self.trackers.append(TrackerThread(spec, dict(msg.get("tags") or {}), resume_id, self._opened))

    def _opened(self, kind: str, run_id: str) -> None:
        """A tracker's run id, kept in the run folder so a resumed sweep logs into the same run."""
        if not self._resume or self.run_dir is None:
            return
        with self._lock:
            self._state[kind] = run_id
            try:
                write_state(self.run_dir, self._state)
            except OSError as e:
                warn(kind, f"could not keep the run's id in {TRACKERS} ({e}); a rerun starts a new one")

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
        for t in self.trackers:
            t.put("group", score)

    def finish(self) -> None:
        """The leaderboard to every tracker, then each closed within ``timeout_s`` (else named and left)."""
        if self.run_dir is not None and self.trackers:
            index = self.index()
            scores: list[GroupScore] = list(group_scores(index, self.series))
            partial = is_partial(read_manifest(self.run_dir) or {}, index)
            for t in self.trackers:
                t.put("leaderboard", (scores, partial))
        self.close()
        deadline = time.monotonic() + max(0.5, self.timeout_s - 1.0)
        for t in self.trackers:
            t.thread.join(max(0.0, deadline - time.monotonic()))
            if t.thread.is_alive():
                warn(t.spec.kind, f"did not finish within {self.timeout_s:g} s; abandoned")

    def close(self) -> None:
        for t in self.trackers:
            t.queue.put(None)
        if self._index is not None:
            self._index.close()
            self._index = None


def main() -> None:
    add_secrets_from_env(secret_like_env_names())  # a tracker's own token, echoed in an error, is masked
    worker = Worker()
    finished = False
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
                finished = True
                break
        except Exception as e:  # reading the run folder failed: say so, keep serving the next message
            warn("trackers", f"{op} failed ({type(e).__name__}: {e})")
    if not finished:  # the sweep went away without a finish: close what is open, within the same bound
        worker.close()
        for t in worker.trackers:
            t.thread.join(worker.timeout_s)
    sys.stderr.flush()
    # A tracker left hanging, or a library's exit hook (W&B's waits for its service), must not keep
    # this process alive: everything that finished has flushed, so leave without the hooks.
    os._exit(0)


if __name__ == "__main__":
    main()
