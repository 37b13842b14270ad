"""Telling someone when an unattended sweep ends or goes wrong (``notify:``, docs/config.md).

Events: ``sweep_finished`` (exit code and counts), ``endpoint_down`` (down longer than
``endpoint_down_min``), ``error_rate`` (above the threshold once ``min_jobs`` finished) and
``disk_low`` (the run folder's disk below ``disk_free_gb``). Each is sent at most once per
invocation (an endpoint's once per endpoint). An event carries names, counts and times only:
no key, no URL of an endpoint, no error text or record content, which may echo either.

A notifier must never change the run: a command or POST that fails, hangs or is missing is
abandoned after ``timeout_s`` with one warning in run.log, and the sweep's outcome and exit
code stay what they were. A command runs without a shell, with the event on its standard input
and an environment stripped of the variables the config names as keys and of key-like ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from fasteval.config.load import SweepConfig
from fasteval.config.notify import NotifySpec
from fasteval.core.redact import redact_text, secret_env_names, secret_like_env_names
from fasteval.runfolder.diskfaults import RunLogHandler
from fasteval.runfolder.names import RUN_LOG

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Health:
    """What the watcher reads of a running sweep."""

    done: int
    errors: int
    down_s: dict[str, float] = field(default_factory=dict)
    """Endpoint name -> seconds it has been down (only endpoints down now)."""


@dataclass(slots=True)
class Notifier:
    spec: NotifySpec
    sweep: str
    """The config's name, so one receiver can tell sweeps apart."""
    run_dir: Path
    hidden_env: frozenset[str] = frozenset()
    """Environment variables a command does not inherit (the config's keys, key-like names)."""
    sent: set[str] = field(default_factory=set)

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        return {"event": kind, "sweep": self.sweep, "run_dir": str(self.run_dir),
                "time": datetime.now(UTC).isoformat(timespec="seconds"), **fields}

    async def send(self, key: str, event: dict[str, Any]) -> bool:
        """Deliver ``event`` once per ``key`` to every notifier; False when it was sent before.

        Never raises: a notifier's failure is a warning, not the run's problem.
        """
        if key in self.sent:
            return False
        self.sent.add(key)
        body = orjson.dumps(event)
        jobs = []
        if self.spec.command:
            jobs.append(self._run_command(body))
        url = self.spec.url or (os.environ.get(self.spec.url_env) if self.spec.url_env else None)
        if url:
            jobs.append(self._post(url, body))
        elif self.spec.url_env:
            log.warning("notify: %s is not set; event %s not posted", self.spec.url_env, event["event"])
        for outcome in await asyncio.gather(*jobs, return_exceptions=True):
            if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                raise outcome  # cancellation of the run itself
        return True

    async def _run_command(self, body: bytes) -> None:
        env = {k: v for k, v in os.environ.items() if k not in self.hidden_env}
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.spec.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL, env=env, start_new_session=True)
        except OSError as e:
            log.warning("notify: cannot run %s: %s", self.spec.command[0], e.strerror or e)
            return
        try:
            await asyncio.wait_for(proc.communicate(body), self.spec.timeout_s)
        except (TimeoutError, OSError) as e:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: whatever it started goes too
            await proc.wait()
            why = f"took longer than {self.spec.timeout_s:g} s" if isinstance(e, TimeoutError) else str(e)
            log.warning("notify: %s %s; abandoned", self.spec.command[0], why)
            return
        if proc.returncode:
            log.warning("notify: %s exited %s", self.spec.command[0], proc.returncode)

    async def _post(self, url: str, body: bytes) -> None:
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=self.spec.timeout_s)
        try:
            # A redirect is not followed: the event goes to the URL the config names, never to
            # wherever that server sends it (another origin, a plain-HTTP one).
            async with aiohttp.ClientSession(timeout=timeout) as session, session.post(
                    url, data=body, headers={"Content-Type": "application/json"}, allow_redirects=False) as resp:
                if 300 <= resp.status < 400:
                    log.warning("notify: the URL answered HTTP %s (a redirect, not followed: the event was not "
                                "delivered; give the URL it moved to)", resp.status)
                elif resp.status >= 400:
                    log.warning("notify: the URL answered HTTP %s", resp.status)
        except (TimeoutError, aiohttp.ClientError, ValueError) as e:
            # the URL may be a secret webhook: name the failure, never the address
            why = f"no answer within {self.spec.timeout_s:g} s" if isinstance(e, TimeoutError) else type(e).__name__
            log.warning("notify: POST failed: %s", redact_text(why))

    async def check(self, health: Health, free_bytes: int | None) -> None:
        """Send whichever of the running sweep's events its state now calls for."""
        spec = self.spec
        if spec.endpoint_down_min is not None:
            for endpoint, seconds in health.down_s.items():
                if seconds >= 60 * spec.endpoint_down_min:
                    await self.send(f"down:{endpoint}", self.event(
                        "endpoint_down", endpoint=endpoint, down_min=round(seconds / 60, 1)))
        finished = health.done + health.errors
        if spec.error_rate is not None and finished >= max(spec.min_jobs, 1):
            rate = health.errors / finished
            if rate > spec.error_rate:
                await self.send("error_rate", self.event("error_rate", error_rate=round(rate, 4),
                                                         threshold=spec.error_rate, errors=health.errors,
                                                         finished=finished))
        if spec.disk_free_gb is not None and free_bytes is not None and free_bytes < spec.disk_free_gb * 1e9:
            await self.send("disk_low", self.event("disk_low", free_gb=round(free_bytes / 1e9, 2),
                                                   threshold_gb=spec.disk_free_gb))


def free_bytes(path: Path) -> int | None:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


@contextlib.asynccontextmanager
async def watching(notifier: Notifier, health: Callable[[], Health]) -> AsyncIterator[None]:
    """Check the sweep every ``check_s`` while the block runs, and once when it ends normally.

    A check that fails is logged, not raised.
    """

    async def loop() -> None:
        while True:
            await asyncio.sleep(notifier.spec.check_s)
            try:
                free = await asyncio.to_thread(free_bytes, notifier.run_dir)
                await notifier.check(health(), free)
            except Exception as e:  # a watcher bug must not end the sweep
                log.warning("notify: check failed: %s", e)

    async def last_check() -> None:
        try:
            await notifier.check(health(), await asyncio.to_thread(free_bytes, notifier.run_dir))
        except Exception as e:
            log.warning("notify: check failed: %s", e)

    task = asyncio.create_task(loop()) if notifier.spec.watches else None
    try:
        yield
        if task is not None:  # a sweep shorter than check_s is judged too, once, at its end
            await last_check()
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _endpoint_name(label: str, names: list[str]) -> str:
    """A breaker's label (``name (base_url)``) as the model or role name alone: no address in an event."""
    return next((n for n in sorted(names, key=len, reverse=True) if label == n or label.startswith(n + " (")),
                "an endpoint")


def finished_event(notifier: Notifier, exit_code: int, result: Any, started: float,
                   names: list[str] | None = None) -> dict[str, Any]:
    """``sweep_finished`` from a SweepResult: counts and error kinds, no error text, no address."""
    summary: dict[str, Any] = {"wall_s": round(time.monotonic() - started, 1)}
    if result is not None:
        down = sorted({_endpoint_name(label, names or []) for label in result.down})
        summary.update(ok=result.ok, errors=result.errors, already_done=result.skipped, not_run=result.not_run,
                       interrupted=result.interrupted, down=down,
                       errors_by_kind={m: {k: v[0] for k, v in kinds.items()} for m, kinds in result.errors_by.items()})
    return notifier.event("sweep_finished", exit_code=exit_code, summary=summary)


def tell_finished(cfg: SweepConfig, run_dir: Path, exit_code: int, result: Any, started: float) -> None:
    """Send ``sweep_finished`` (from the CLI, after the sweep's loop has closed); never raises.

    The sweep's run.log is closed by then: it is opened again for these lines, so a notifier that
    fails or times out at the end is in run.log like one that failed during the run.
    """
    spec = cfg.notify
    if spec is None or not spec.finished:
        return
    notifier = Notifier(spec, str(cfg.raw.get("name") or cfg.path.stem), run_dir,
                        frozenset(secret_env_names(cfg.raw) | secret_like_env_names()))
    with _run_log(run_dir):
        try:
            names = [m.name for m in cfg.models] + list(cfg.roles)
            asyncio.run(notifier.send("finished", finished_event(notifier, exit_code, result, started, names)))
        except Exception as e:  # the run's outcome is decided; a notifier cannot change it
            log.warning("notify: %s", e)


@contextlib.contextmanager
def _run_log(run_dir: Path) -> Iterator[None]:
    """This module's lines also in ``run_dir``'s run.log, if the sweep made one (never a new folder)."""
    path = run_dir / RUN_LOG
    handler: RunLogHandler | None = None
    if path.is_file():
        try:
            handler = RunLogHandler(path)
        except OSError:
            handler = None  # a folder that took no log: the terminal still has the line
    if handler is not None:
        log.addHandler(handler)
    try:
        yield
    finally:
        if handler is not None:
            log.removeHandler(handler)
            handler.close()
