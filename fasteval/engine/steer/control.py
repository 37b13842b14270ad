"""Steering a running sweep (``fasteval ctl``): pauses, limits, requeues, drains and cancels.

The sweep owns one Controller. The launcher asks it before each job starts (``admit``: run it,
park it while its model, suite or endpoint is paused, or drop it when drained or cancelled), the
model clients ask it before each request once a ``pause --now`` happened (``gate``), and a job
tells it how it ended (``finished``), so errors of this run can be requeued. The socket server
(fasteval.engine.steer.control_server) turns each command into one of the methods below; every change
is appended to the run folder's trace. Nothing here changes what a job computes: sampling,
rounds and prompts are config, and resume refuses a changed config.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fasteval.config.load import SweepConfig
from fasteval.core.job import current_job
from fasteval.core.types import Job, Record
from fasteval.engine.ledger import Counters
from providers.client import ModelClient
from providers.limits import AdaptiveLimit

Entry = tuple[Job, Any, Any, Any]
"""What the launcher starts: the job, its suite run, setting and task (or load error)."""

SCOPES = ("all", "model", "suite", "endpoint")
SETTABLE = ("concurrency", "rpm", "tpm", "max_attempts", "total_budget_s", "attempt_timeout_s")
"""Keys of ``ctl set`` for a model or endpoint; ``global`` takes ``concurrency`` only."""
BOUNDS: dict[str, float] = {"concurrency": 1_000_000, "max_attempts": 1_000, "rpm": 1e12, "tpm": 1e12,
                            "total_budget_s": 1e7, "attempt_timeout_s": 1e7}
"""The largest value each ``set`` key takes: past them no limit is meant (a million requests in
flight, 116 days), and a value past 64 bits could not even be written to the trace or an answer."""

class ControlError(ValueError):
    """A command that cannot apply (unknown model, bad value): its one-line answer to the client."""


class SweepView(Protocol):
    """What the controller reads of the sweep (fasteval.engine.run.sweep.Sweep)."""

    cfg: SweepConfig
    clients: dict[str, ModelClient]
    roles: dict[str, ModelClient]
    counters: Counters
    serving: Any


@dataclass(slots=True, frozen=True)
class Pause:
    scope: str
    name: str
    now: bool

    def label(self) -> str:
        return ("everything" if self.scope == "all" else f"{self.scope} {self.name}") + (" (now)" if self.now else "")


@dataclass(slots=True)
class ModelTally:
    """Per model, what this invocation did (the panel's and ``ctl status``'s numbers)."""

    ok: int = 0
    error: int = 0
    in_flight: int = 0
    requeued: int = 0
    not_run: int = 0
    """Drained or cancelled: left for a later resume."""


@dataclass(slots=True)
class Controller:
    """The sweep's steering state; all methods run on the sweep's event loop."""

    sweep: SweepView
    pauses: set[Pause] = field(default_factory=set)
    drained: set[str] = field(default_factory=set)
    """Models (or ``*`` for all) whose unstarted jobs are dropped."""
    cancelled: set[str] = field(default_factory=set)
    parked: list[Entry] = field(default_factory=list)
    errors: dict[str, tuple[Entry, str]] = field(default_factory=dict)
    """Jobs that ended in error in this invocation: job_id -> (entry, error kind)."""
    tally: dict[str, ModelTally] = field(default_factory=dict)
    running: dict[int, tuple[Job, asyncio.Task[None]]] = field(default_factory=dict)
    slots: AdaptiveLimit | None = None
    launch: Callable[[Entry], Awaitable[None]] | None = None
    not_run: int = 0
    changed: dict[str, Any] = field(default_factory=dict)
    """Limits set while running, by name (``m.rpm``): the live panel says them."""
    planned: dict[str, int] = field(default_factory=dict)
    """Per model: jobs of this invocation's plan not finished before it started (status's ``waiting``)."""
    display: Any = None
    result: Any = None
    """The sweep's SweepResult: a requeue takes its errors back (the exit code follows the last word)."""
    closing: bool = False
    _launching: int = 0
    _gate_pending: bool = False
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _background: set[asyncio.Task[None]] = field(default_factory=set)

    # -- hooks the sweep calls -------------------------------------------------------------
    def set_plan(self, by_model: dict[str, int], indexed: dict[tuple[Any, ...], dict[str, int]],
                 selected: tuple[list[str], list[str], list[str]], keep_errors: bool) -> None:
        """Per model, how many jobs this invocation has to run: the plan less what the run index
        already holds (ok records, and error ones with ``--keep-errors``) within the selectors."""
        suites, settings, seeds = selected
        done: dict[str, int] = {}
        for (model, suite, setting, seed), by_status in indexed.items():
            if (suites and suite not in suites) or (settings and setting not in settings) or \
                    (seeds and str(seed) not in seeds):
                continue
            n = sum(by_status.values()) if keep_errors else by_status.get("ok", 0)
            done[str(model)] = done.get(str(model), 0) + n
        self.planned = {m: max(0, n - done.get(m, 0)) for m, n in by_model.items()}

    def global_limit(self, cap: int) -> AdaptiveLimit:
        """The sweep's in-flight cap as a window ``ctl set global concurrency=N`` can move."""
        self.slots = AdaptiveLimit(cap)
        return self.slots

    async def admit(self, entry: Entry) -> bool:
        """May this job start now? False: it was parked (paused) or dropped (drained, cancelled).

        A pause of everything holds the launcher itself (parking a million-job plan would hold it in
        memory); a narrower pause parks that part's jobs so the others go on.
        """
        job = entry[0]
        if self._gate_pending:  # a pause --now sent while the sweep was starting
            self._install_gate()
        while True:
            if self.dropped(job.model):
                self._drop(job.model)
                return False
            pause = self._pause_for(job)
            if pause is None:
                return True
            if pause.scope != "all":
                self.parked.append(entry)
                return False
            await self._wait_change()

    def track(self, job: Job, task: asyncio.Task[None]) -> None:
        """A job started: counted in flight for its model, cancellable by ``ctl cancel``."""
        self._tally(job.model).in_flight += 1
        key = id(task)  # not job.job_id: a hash per call, on every job's path
        self.running[key] = (job, task)

        def done(_: asyncio.Task[None]) -> None:
            self.running.pop(key, None)
            self._tally(job.model).in_flight -= 1

        task.add_done_callback(done)

    def finished(self, entry: Entry, rec: Record) -> None:
        """A job's record is final: counted, and kept for ``requeue`` when it is an error."""
        tally = self._tally(rec.model)
        if rec.status == "ok":
            tally.ok += 1
            self.errors.pop(rec.job_id, None)
        else:
            tally.error += 1
            self.errors[rec.job_id] = (entry, rec.error_kind or "error")

    async def settled(self, idle: asyncio.Event) -> None:
        """Return when no job runs and none waits for a resume or a relaunch: the sweep may end."""
        while True:
            await idle.wait()
            if not self.parked and not self._launching:
                self.closing = True
                return
            await self._wait_change()

    async def gate(self, endpoint: str) -> None:
        """Held before a model request while a ``--now`` pause covers it (ModelClient.gate)."""
        while self._holds_request(endpoint):
            await self._wait_change()

    def notes(self) -> str:
        """The live panel's line about steering: paused parts, drains, changed limits, requeues."""
        parts = []
        if self.pauses:
            parts.append("paused: " + ", ".join(sorted(p.label() for p in self.pauses)))
        if self.parked:
            parts.append(f"{len(self.parked)} jobs held")
        if self.drained or self.cancelled:
            parts.append("draining: " + ", ".join(sorted("all" if d == "*" else d for d in self.drained | self.cancelled)))
        if self.changed:
            parts.append("limits set: " + ", ".join(f"{k}={'off' if v is None else v}" for k, v in self.changed.items()))
        requeued = sum(t.requeued for t in self.tally.values())
        if requeued:
            parts.append(f"requeued {requeued}")
        return "; ".join(parts)

    async def close(self) -> None:
        """Stop relaunches still on their way (a stop or a fault ended the sweep before they started)."""
        self.closing = True
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    def incomplete_line(self) -> str | None:
        """Why the sweep ends incomplete (exit 3) after a drain or a cancel, or None."""
        if not self.not_run:
            return None
        what = ", ".join(sorted("everything" if d == "*" else d for d in self.drained | self.cancelled))
        return f"incomplete: drained or cancelled ({what}); {self.not_run} jobs not run; rerun to continue"

    # -- commands ---------------------------------------------------------------------------
    def pause(self, scope: str, name: str, now: bool) -> list[dict[str, Any]]:
        self._check_scope(scope, name)
        new = Pause(scope, name if scope != "all" else "", now)
        if new in self.pauses:
            return []
        old = {p for p in self.pauses if (p.scope, p.name) == (new.scope, new.name)}
        self.pauses = (self.pauses - old) | {new}
        if now:
            self._install_gate()
        self._notify()
        return [{"what": f"pause {new.label()}", "old": "running" if not old else "paused", "new": "paused"}]

    def resume(self, scope: str | None, name: str) -> list[dict[str, Any]]:
        """Lift the pauses of one part (all of them without a scope); parked jobs start again."""
        gone = {p for p in self.pauses if scope is None or (p.scope, p.name) == (scope, name if scope != "all" else "")}
        if scope is not None and not gone:
            raise ControlError(f"{scope} {name} is not paused" if scope != "all" else "everything is not paused")
        self.pauses -= gone
        held = self.parked
        self.parked = []
        self._relaunch(held)
        self._notify()
        return [{"what": f"pause {p.label()}", "old": "paused", "new": "running"} for p in sorted(gone, key=str)]

    def set_limits(self, scope: str, name: str, values: dict[str, Any]) -> list[dict[str, Any]]:
        """New limits for a model or endpoint (or the run's global concurrency), effective at once."""
        if scope == "global":
            bad = set(values) - {"concurrency"}
            if bad or "concurrency" not in values:
                raise ControlError("set global takes concurrency=N only")
            if self.slots is None:
                raise ControlError("the sweep is still starting: try again in a moment")
            new = _positive_int("concurrency", values["concurrency"])
            old = self.slots.limit
            self.slots.resize(new)
            if self.display is not None:
                self.display.global_cap = new
            self.changed["global.concurrency"] = new
            return [{"what": "global.concurrency", "old": old, "new": new}]
        self._check_scope(scope, name)
        if scope not in ("model", "endpoint"):
            raise ControlError("set applies to a model, an endpoint or global")
        client = self._clients().get(name)
        if client is None:
            raise ControlError("the sweep is still starting (its models are not set up yet): try again in a moment")
        unknown = set(values) - set(SETTABLE)
        if unknown:
            raise ControlError(f"cannot set {', '.join(sorted(unknown))} (settable: {', '.join(SETTABLE)})")
        checked = {key: _parse(key, value) for key, value in values.items()}
        changes = [_apply(client, key, new) for key, new in checked.items()]
        self.changed.update((c["what"], c["new"]) for c in changes)
        return changes

    def requeue(self, kind: str | None, model: str | None) -> tuple[int, list[dict[str, Any]]]:
        """Run again now the jobs of this invocation that ended in error (of a kind, of a model)."""
        if self.closing:
            raise ControlError("the sweep is finishing: rerun it with the same command instead (it reruns errors)")
        if model is not None:
            self._check_scope("model", model)
        picked = [(jid, entry, k) for jid, (entry, k) in self.errors.items()
                  if (kind is None or k == kind) and (model is None or entry[0].model == model)]
        for jid, entry, k in picked:
            del self.errors[jid]
            tally = self._tally(entry[0].model)
            tally.error -= 1
            tally.requeued += 1
            self._forget_error(entry[0].model, k)
        self.sweep.counters.errors -= len(picked)
        self._relaunch([entry for _, entry, _ in picked])
        what = "errors" + (f" of kind {kind}" if kind else "") + (f" of model {model}" if model else "")
        if not picked:
            return 0, []
        return len(picked), [{"what": f"requeue {what}", "old": f"{len(picked)} error records", "new": "queued"}]

    def drain(self, model: str | None) -> list[dict[str, Any]]:
        """Start nothing new (of ``model``, or at all); in-flight jobs finish; the sweep then ends (exit 3)."""
        if model is not None:
            self._check_scope("model", model)
        key = model or "*"
        self.drained.add(key)
        self._drop_parked()
        self._notify()
        return [{"what": f"drain {model or 'everything'}", "old": "running", "new": "draining"}]

    def cancel(self, model: str) -> tuple[int, list[dict[str, Any]]]:
        """Stop ``model``'s jobs now: no record is written for the cancelled ones, a rerun runs them."""
        self._check_scope("model", model)
        self.cancelled.add(model)
        self._drop_parked()
        victims = [task for job, task in self.running.values() if job.model == model and not task.done()]
        for task in victims:
            task.cancel(msg="fasteval ctl cancel")
            self.not_run += 1
            self.sweep.counters.total -= 1
            self._tally(model).not_run += 1
        self._notify()
        return len(victims), [{"what": f"cancel {model}", "old": "running",
                               "new": f"cancelled ({len(victims)} in flight)"}]

    # -- reading ------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Pauses, drains, per-model tallies and per-endpoint limits: ``ctl status`` as data."""
        c = self.sweep.counters
        waiting = max(0, c.total - c.done - c.errors - c.in_flight)
        return {
            "jobs": {"total": c.total, "ok": c.done, "error": c.errors, "resumed": c.skipped,
                     "in_flight": c.in_flight, "waiting": waiting, "held": len(self.parked), "not_run": self.not_run},
            "global": {"concurrency": self.slots.limit if self.slots else None,
                       "in_flight": self.slots.in_flight if self.slots else 0},
            "paused": [{"scope": p.scope, "name": p.name, "now": p.now} for p in sorted(self.pauses, key=str)],
            "draining": sorted("*" if d == "*" else d for d in self.drained),
            "cancelled": sorted(self.cancelled),
            "models": {m: self._model_row(m) for m in sorted(set(self.planned) | set(self.tally))},
            "endpoints": {name: endpoint_row(cl) for name, cl in self._clients().items()},
        }

    # -- internals ------------------------------------------------------------------------------
    def _model_row(self, model: str) -> dict[str, int]:
        t = self.tally.get(model) or ModelTally()
        held = sum(1 for e in self.parked if e[0].model == model)
        row = {"to_run": self.planned.get(model, 0), "ok": t.ok, "error": t.error, "in_flight": t.in_flight,
               "held": held, "requeued": t.requeued, "not_run": t.not_run}
        # not started yet, held ones apart (a requeued job's error was taken back when it was requeued)
        row["waiting"] = max(0, row["to_run"] - t.ok - t.error - t.in_flight - held - t.not_run)
        return row

    def _clients(self) -> dict[str, ModelClient]:
        return self.sweep.clients | self.sweep.roles

    def _forget_error(self, model: str, kind: str) -> None:
        """Take a requeued error out of the sweep's result (its count, its row in the end-of-run table)."""
        result = self.result
        if result is None:
            return
        result.errors -= 1
        entry = result.errors_by.get(model, {}).get(kind)
        if entry is not None:
            entry[0] -= 1
            if entry[0] <= 0:
                del result.errors_by[model][kind]
                if not result.errors_by[model]:
                    del result.errors_by[model]

    def _install_gate(self) -> None:
        clients = self._clients()
        for client in clients.values():
            client.gate = self.gate
        self._gate_pending = not clients

    def _tally(self, model: str) -> ModelTally:
        tally = self.tally.get(model)
        if tally is None:
            tally = self.tally[model] = ModelTally()
        return tally

    def _check_scope(self, scope: str, name: str) -> None:
        if scope not in SCOPES:
            raise ControlError(f"unknown scope {scope!r} (one of {', '.join(SCOPES)})")
        # Names from the config: a pause or a drain may come while the models are still being set up.
        models = [m.name for m in self.sweep.cfg.models]
        if scope == "model" and name not in models:
            raise ControlError(f"no model {name!r} in this sweep (models: {', '.join(sorted(models))})")
        endpoints = models + list(self.sweep.cfg.roles)
        if scope == "endpoint" and name not in endpoints:
            raise ControlError(f"no endpoint {name!r} in this sweep (endpoints: {', '.join(sorted(endpoints))})")
        if scope == "suite" and not name:
            raise ControlError("which suite?")
        suites = [str(s.get("name")) for s in self.sweep.cfg.suites]
        if scope == "suite" and name not in suites:
            raise ControlError(f"no suite {name!r} in this sweep (suites: {', '.join(sorted(suites))})")

    def _pause_for(self, job: Job) -> Pause | None:
        for p in self.pauses:
            if p.scope == "all" or (p.scope in ("model", "endpoint") and p.name == job.model) or \
                    (p.scope == "suite" and p.name == job.suite):
                return p
        return None

    def _holds_request(self, endpoint: str) -> bool:
        job = current_job()  # whose request this is (its model and suite), None outside a job
        for p in self.pauses:
            if p.scope == "endpoint" and p.name == endpoint and (p.now or endpoint not in self.sweep.clients):
                return True  # a role has no jobs to park: its pause holds its requests
            if not p.now:
                continue
            if p.scope == "all" or (job is not None and ((p.scope == "model" and p.name == job.model)
                                                         or (p.scope == "suite" and p.name == job.suite))):
                return True
        return False

    def dropped(self, model: str) -> bool:
        """Are this model's unstarted jobs dropped (drained or cancelled)?"""
        return "*" in self.drained or model in self.drained or model in self.cancelled

    def _drop(self, model: str) -> None:
        self.not_run += 1
        self.sweep.counters.total -= 1
        self._tally(model).not_run += 1
        serving = self.sweep.serving
        if serving is not None and serving.served(model):
            serving.forget(model)  # its servers stop after the last job that still runs

    def _drop_parked(self) -> None:
        keep = []
        for entry in self.parked:
            if self.dropped(entry[0].model):
                self._drop(entry[0].model)
            else:
                keep.append(entry)
        self.parked = keep

    def _relaunch(self, entries: list[Entry]) -> None:
        """Start these jobs again in the background; the sweep does not end while they are on their way."""
        if not entries or self.launch is None or self.closing:
            return
        launch = self.launch
        self._launching += 1

        async def run() -> None:
            try:
                for entry in entries:
                    await launch(entry)
            finally:
                self._launching -= 1
                self._notify()

        task = asyncio.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _wait_change(self) -> None:
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


def endpoint_row(cl: ModelClient) -> dict[str, Any]:
    """One endpoint's current limits and load."""
    return {"in_flight": cl.limit.in_flight, "concurrency": cl.limit.limit, "ceiling": cl.limit.ceiling,
            "waiting": cl.limit.waiting, "rpm": cl.rate.rpm, "tpm": cl.rate.tpm,
            "max_attempts": cl.retry.max_attempts, "total_budget_s": cl.retry.total_budget_s,
            "attempt_timeout_s": cl.attempt_timeout_s,
            "requests": cl.stats.requests, "retries": cl.stats.retries, "rate_limited": cl.stats.rate_limited,
            "state": cl.breaker.describe() if cl.breaker is not None else "up"}


def _shown(value: Any) -> str:
    """A value as an answer quotes it: bounded (a 100 kB value is not echoed whole)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _positive_int(key: str, value: Any) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        raise ControlError(f"{key} must be a whole number, not {_shown(value)}") from None
    if n < 1 or str(n) != str(value).strip():
        raise ControlError(f"{key} must be a whole number >= 1, not {_shown(value)}")
    if n > BOUNDS[key]:
        raise ControlError(f"{key} must be at most {BOUNDS[key]:,.0f}, not {_shown(value)}")
    return n


def _rate(key: str, value: Any) -> float | None:
    if value is None or str(value).lower() in ("none", "off", "unlimited"):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ControlError(f"{key} must be a number or 'off', not {_shown(value)}") from None
    if not x > 0:  # NaN too
        raise ControlError(f"{key} must be > 0 (or 'off'), not {_shown(value)}")
    if x > BOUNDS[key]:  # infinity too
        raise ControlError(f"{key} must be at most {BOUNDS[key]:g} (or 'off'), not {_shown(value)}")
    return x


def _parse(key: str, value: Any) -> Any:
    """A ``set`` value checked before anything changes (one bad value applies none of a command's)."""
    if key in ("concurrency", "max_attempts"):
        return _positive_int(key, value)
    new = _rate(key, value)
    if key == "total_budget_s" and new is None:
        raise ControlError("total_budget_s must be a number of seconds")
    return new


def _apply(client: ModelClient, key: str, new: Any) -> dict[str, Any]:
    """Set one checked limit of one client; the change as a trace entry."""
    if key == "concurrency":
        old: Any = client.limit.ceiling
        client.limit.resize(new)
    elif key in ("rpm", "tpm"):
        old = getattr(client.rate, key)
        rates = {"rpm": client.rate.rpm, "tpm": client.rate.tpm, key: new}
        client.rate.set_rates(rates["rpm"], rates["tpm"])
    elif key == "attempt_timeout_s":
        old, client.attempt_timeout_s = client.attempt_timeout_s, new
    elif key == "max_attempts":
        old, client.retry.max_attempts = client.retry.max_attempts, new
    else:
        old, client.retry.total_budget_s = client.retry.total_budget_s, new
    return {"what": f"{client.name}.{key}", "old": old, "new": new}
