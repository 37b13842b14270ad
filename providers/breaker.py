"""A circuit breaker per endpoint: a dead server pauses its jobs instead of turning them into errors.

After ``failures`` consecutive connection or auth failures the breaker opens: requests wait in
``admit()`` instead of being sent, and one probe task retries the endpoint with exponential
backoff. A successful probe (or request) closes it and the waiting jobs go on. If the endpoint
stays down longer than ``outage_budget_s``, the breaker gives up: waiting and later jobs raise
``EndpointDown``, which the sweep treats as "not attempted": no record, the sweep finishes the
other endpoints' work and ends incomplete (exit 3); a rerun resumes exactly those jobs.

``EndpointDown`` is the public way to say "this job could not run because its endpoint is gone":
a server supervisor whose model's servers are exhausted raises it too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from fasteval.core.errors import OutOfDescriptors, descriptor_fault
from providers.base import ProviderError

log = logging.getLogger("fasteval.breaker")


class EndpointDown(BaseException):
    """A job was not run because its endpoint is down: write no record; the sweep ends incomplete.

    A BaseException, like CancelledError, on purpose: it means "this job did not happen", so the
    catch-alls that turn a judge's or a tool's failure into a value on the record must let it by.
    """

    def __init__(self, endpoint: str, reason: str) -> None:
        super().__init__(f"endpoint {endpoint} down: {reason}")
        self.endpoint = endpoint
        self.reason = reason


class EndpointUnreachable(ProviderError):
    """A connection-level failure (refused, reset, DNS): counts toward opening the breaker."""

    def __init__(self, message: str) -> None:
        super().__init__("transient", message)

    def __str__(self) -> str:
        return str(self.args[0])


def connection_error(exc: BaseException, where: str) -> EndpointUnreachable | OutOfDescriptors:
    """One readable line for a connection failure (the raw exception goes to run.log).

    A socket that could not be made because this process is out of file descriptors is no fault
    of the endpoint's: OutOfDescriptors, which the sweep turns into a clean stop.
    """
    import aiohttp  # here: suites and reports import this module without ever connecting

    log.info("connection to %s failed: %r", where, exc)
    if (fault := descriptor_fault(exc)) is not None:
        return OutOfDescriptors(fault, "opening a connection")
    if isinstance(exc, aiohttp.ClientConnectorError):
        addr = f"{exc.host}:{exc.port}"
        os_err = exc.os_error
        if isinstance(os_err, ConnectionRefusedError):
            return EndpointUnreachable(f"connection refused ({addr})")
        reason = getattr(os_err, "strerror", None) or type(os_err).__name__
        return EndpointUnreachable(f"cannot connect ({addr}): {reason}")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return EndpointUnreachable(f"server disconnected ({where})")
    if isinstance(exc, ConnectionResetError | aiohttp.ClientOSError):
        return EndpointUnreachable(f"connection reset ({where})")
    return EndpointUnreachable(f"connection failed ({where}): {type(exc).__name__}")


def is_outage(err: BaseException) -> bool:
    """Failures that say the endpoint (not the request) is broken."""
    return isinstance(err, EndpointUnreachable) or (isinstance(err, ProviderError) and err.kind == "auth")


@dataclass(slots=True)
class BreakerPolicy:
    failures: int = 5
    outage_budget_s: float = 1800.0
    probe_initial_s: float = 1.0
    probe_max_s: float = 60.0


Probe = Callable[[], Awaitable[None]]
"""Checks the endpoint once; raises when it is still down."""


class CircuitBreaker:
    """Opens after consecutive outage failures; probes with backoff; gives up after the budget."""

    def __init__(self, endpoint: str, policy: BreakerPolicy | None = None, probe: Probe | None = None) -> None:
        self.endpoint = endpoint
        self.policy = policy or BreakerPolicy()
        self.probe = probe
        self.consecutive = 0
        self.down_since: float | None = None
        self.down_since_wall: datetime | None = None
        self.reason = ""
        self.gave_up = False
        self.outages = 0
        self._outage_started: float | None = None
        """When the endpoint last stopped serving real requests: a probe that passes while requests
        still fail (a 401 on chat but not on /models) must not restart the outage budget."""
        self._closed = asyncio.Event()
        self._closed.set()
        self._probe_task: asyncio.Task[None] | None = None

    @property
    def is_open(self) -> bool:
        return self.down_since is not None

    def describe(self) -> str:
        """For the panel: ``up`` or ``down since 03:12 — connection refused (127.0.0.1:8000)``."""
        if self.down_since_wall is None:
            return "up"
        state = "gave up" if self.gave_up else "down since"
        return f"{state} {self.down_since_wall:%H:%M} — {self.reason}"

    async def admit(self) -> None:
        """Wait while the endpoint is down; raise EndpointDown once the breaker has given up."""
        if self.gave_up:
            raise EndpointDown(self.endpoint, self.reason)
        if not self._closed.is_set():
            await self._closed.wait()
            if self.gave_up:
                raise EndpointDown(self.endpoint, self.reason)

    def on_success(self) -> None:
        self.consecutive = 0
        self._outage_started = None
        if self.is_open and not self.gave_up:
            self._close()

    def on_failure(self, err: BaseException) -> None:
        if not is_outage(err):
            self.consecutive = 0
            return
        self.consecutive += 1
        if self.consecutive >= self.policy.failures and not self.is_open:
            self._open(str(err))

    def give_up(self, reason: str) -> None:
        """Mark the endpoint gone for this sweep (a supervisor whose servers are exhausted)."""
        self.reason = reason or self.reason
        if self.down_since is None:
            self.down_since, self.down_since_wall = time.monotonic(), datetime.now()
        self.gave_up = True
        self._closed.set()

    def _open(self, reason: str) -> None:
        self.down_since, self.down_since_wall, self.reason = time.monotonic(), datetime.now(), reason
        if self._outage_started is None:
            self._outage_started = self.down_since
        self.outages += 1
        self._closed.clear()
        log.warning("endpoint %s down: %s; its jobs wait while a probe retries", self.endpoint, reason)
        self._probe_task = asyncio.get_running_loop().create_task(self._probe_loop())

    def _close(self) -> None:
        log.warning("endpoint %s is back after %.0f s", self.endpoint, time.monotonic() - (self.down_since or 0))
        self.down_since = self.down_since_wall = None
        self.consecutive = 0
        self._closed.set()

    async def _probe_loop(self) -> None:
        delay = self.policy.probe_initial_s
        while self.is_open and not self.gave_up:
            started = self._outage_started or self.down_since or time.monotonic()
            left = self.policy.outage_budget_s - (time.monotonic() - started)
            if left <= 0:
                log.error("endpoint %s down for longer than the outage budget (%.0f s): giving up",
                          self.endpoint, self.policy.outage_budget_s)
                self.give_up(self.reason)
                return
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, self.policy.probe_max_s)
            if self.probe is None:
                # Nothing to probe with: half-open, let the waiting requests try again. If they fail
                # the breaker reopens, and the outage clock (_outage_started) keeps running.
                self._close()
                return
            try:
                await self.probe()
            except Exception as e:  # still down: keep the first reason unless this one says more
                log.info("probe of %s failed: %r", self.endpoint, e)
                continue
            if self.is_open:
                self._close()
            return

    async def close(self) -> None:
        if self._probe_task is not None:
            self._probe_task.cancel()
            try:
                await self._probe_task
            except (asyncio.CancelledError, Exception):
                pass
            self._probe_task = None
