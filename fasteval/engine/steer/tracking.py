"""``log_to:``: the sweep tells its experiment trackers each group's scores as the group completes.

The trackers run in a process of their own (``fasteval.trackers.worker``): their libraries block
(database writes, HTTP with retries, seconds of imports), start threads and exit hooks of their
own, and one can hang; a process keeps all of that off the sweep's event loop and can be killed.
The sweep's side is a bounded queue of small JSON messages and one task writing them to the
worker's stdin: sending never waits, a full queue drops the message (one warning), and at the end
the worker gets ``timeout_s`` to finish before it is killed. Whatever a tracker does, it is a line
in run.log; the run's outcome and exit code never depend on it.

Nothing of the run's content goes to the worker: group names and counts, the run folder (which it
reads through the run index, as ``report`` does), the config's fingerprint and our version. The
worker's environment lacks every key the config names and every key-like variable except the
trackers' own (``WANDB_*``, ``MLFLOW_*``, cloud storage credentials for their artifact stores).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from fasteval.config.load import SweepConfig
from fasteval.config.log_to import LogTo
from fasteval.core.redact import redact_text, secret_env_names, secret_like_env_names
from fasteval.core.terminal import clean
from fasteval.trackers.scores import run_tags
from fasteval.trackers.sinks import MissingExtra, installed

log = logging.getLogger("fasteval")

QUEUE = 10_000
"""Messages held for a worker that falls behind (one per completed group; a sweep has far fewer)."""
KILL_AFTER_S = 5.0
"""Past ``timeout_s``, how long the worker has to exit on its own before it is killed."""
TRACKER_ENV = ("WANDB_", "MLFLOW_", "DATABRICKS_", "AWS_", "AZURE_", "GOOGLE_APPLICATION_CREDENTIALS")
"""Variables a tracker reads for itself (its token, its artifact store's credentials): kept."""


def worker_env(config: dict[str, Any], environ: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's environment: the config's keys and key-like variables out, the trackers' own kept."""
    env = dict(os.environ if environ is None else environ)
    hidden = secret_env_names(config) | {n for n in secret_like_env_names(env) if not n.startswith(TRACKER_ENV)}
    return {k: v for k, v in env.items() if k not in hidden}


class Tracking:
    """The sweep's end of the trackers' worker: ``group_done`` never waits; ``close`` is bounded."""

    def __init__(self, spec: LogTo, run_dir: Path, tags: dict[str, str], env: dict[str, str], sweep_name: str) -> None:
        self.spec = spec
        self.run_dir = run_dir
        self.tags = tags
        self.env = env
        self.sweep_name = sweep_name
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUE)
        self.proc: asyncio.subprocess.Process | None = None
        self.dropped = 0
        self.sent_groups = 0
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        trackers = []
        for t in self.spec.trackers:
            if installed(t.kind):
                trackers.append(t.named(self.sweep_name).as_dict())
            else:  # the run goes on; `fasteval export RUN --to ...` sends it later
                log.warning("log_to: %s; the sweep runs without it (fasteval export %s --to %s sends it later)",
                            MissingExtra(t.kind), self.run_dir, t.kind)
        if not trackers:
            return
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "fasteval.trackers.worker", stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=self.env,
                start_new_session=True)
        except OSError as e:
            log.warning("log_to: the trackers' process did not start (%s); the sweep runs without them", e)
            return
        self._send({"op": "open", "run_dir": str(self.run_dir), "trackers": trackers, "tags": self.tags,
                    "resume": True, "timeout_s": self.spec.timeout_s})
        self._tasks = [asyncio.create_task(self._write()), asyncio.create_task(self._read_warnings())]

    def group_done(self, model: str, suite: str, setting: str, expected: int) -> None:
        """The ledger says the group has every job of the plan: log its headline (never waits)."""
        if self.proc is not None:
            self.sent_groups += 1
            self._send({"op": "group", "model": model, "suite": suite, "setting": setting, "expected": expected})

    def _send(self, msg: dict[str, Any] | None) -> None:
        try:
            self.queue.put_nowait(None if msg is None else orjson.dumps(msg) + b"\n")
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1:
                log.warning("log_to: the trackers fall behind; their messages are being dropped")

    async def _write(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        stdin = self.proc.stdin
        while True:
            line = await self.queue.get()
            if line is None:
                break
            try:
                stdin.write(line)
                await stdin.drain()
            except (ConnectionError, OSError):
                return  # the worker died: its stderr said why
        with contextlib.suppress(ConnectionError, OSError):
            stdin.close()

    async def _read_warnings(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while True:
            try:
                line = await self.proc.stderr.readline()
            except (ValueError, OSError):  # a line past the stream's limit: the rest is noise
                continue
            if not line:
                return
            text = clean(redact_text(line.decode(errors="replace").strip()))[:500]
            if text:
                log.warning("log_to: %s", text)

    async def close(self) -> None:
        """Finish: the leaderboard is logged and the trackers closed within ``timeout_s`` (the worker
        names one that hangs and exits); a worker that does not exit soon after is killed."""
        if self.proc is None:
            return
        self._send({"op": "finish"})
        self._send(None)
        try:
            await asyncio.wait_for(self.proc.wait(), self.spec.timeout_s + KILL_AFTER_S)
        except TimeoutError:
            log.warning("log_to: the trackers' process did not exit within %g s; killed (the run is complete: "
                        "fasteval export %s --to ... sends it again)", self.spec.timeout_s + KILL_AFTER_S, self.run_dir)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()
        for task in self._tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.dropped:
            log.warning("log_to: %d tracker messages were dropped", self.dropped)


@contextlib.asynccontextmanager
async def tracking(cfg: SweepConfig, run_dir: Path, manifest: dict[str, Any]) -> AsyncIterator[Tracking | None]:
    """The sweep's trackers for the block (None when the config has no ``log_to:``)."""
    if cfg.log_to is None:
        yield None
        return
    sweep_name = str(cfg.raw.get("name") or cfg.path.stem)
    t = Tracking(cfg.log_to, run_dir, run_tags(manifest, run_dir), worker_env(cfg.raw), sweep_name)
    await t.start()
    try:
        yield t
    finally:
        await t.close()

