"""What ``fasteval ctl`` asked of a sweep, from the moment its control socket opens.

The sweep builds one Steering before its runtime starts. It holds the pauses, drains and cancels;
it is the request gate every model client gets when it is built (``ModelClient(gate=...)``: a
``pause --now`` holds a trajectory before its next model request); admission asks it before each
job starts (``admit``: run it, park it while its part is paused, drop it when drained or
cancelled). Until the runtime is open it answers ``ctl`` itself: ``status`` says that the sweep is
starting and what it is doing, and pause, resume, drain and cancel take effect when jobs start.
Once the runtime is open the sweep hands it the Controller (fasteval.engine.steer.control), which
does what needs the runtime: limits, requeues, cancelling jobs in flight, the full status.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fasteval.core.job import current_job
from fasteval.core.types import Job
from fasteval.engine.ledger import Ledger

if TYPE_CHECKING:
    from fasteval.engine.steer.control import Controller

Entry = tuple[Job, Any, Any, Any]
"""What admission starts: the job, its suite run, setting and task (or load error)."""

SCOPES = ("all", "model", "suite", "endpoint")


class ControlError(ValueError):
    """A command that cannot apply (unknown model, bad value): its one-line answer to the client."""


@dataclass(slots=True, frozen=True)
class Pause:
    scope: str
    name: str
    now: bool

    def label(self) -> str:
        return ("everything" if self.scope == "all" else f"{self.scope} {self.name}") + (" (now)" if self.now else "")


class Steering:
    """The sweep's steering state and ``ctl``'s door into it; all methods run on the sweep's loop."""

    def __init__(self, models: Sequence[str], roles: Sequence[str], ledger: Ledger, serving: Any = None, *,
                 suites: Sequence[str] | None = None) -> None:
        self.models = list(models)
        """Names from the config: a pause or a drain may come while the models are still being set up."""
        self.roles = list(roles)
        self.suites = None if suites is None else list(suites)
        """The config's suites (None: not told, any name is taken)."""
        self.ledger = ledger
        self.serving = serving
        self.phase = "starting"
        """What the sweep is doing while it starts (``ctl status`` says it); empty once it runs."""
        self.pauses: set[Pause] = set()
        self.drained: set[str] = set()
        """Models (or ``*`` for all) whose unstarted jobs are dropped."""
        self.cancelled: set[str] = set()
        self.parked: list[Entry] = []
        """Jobs held back by a pause of their model, suite or endpoint."""
        self.held = False
        """True while some request must be asked about (a ``--now`` pause, a role's pause): the
        clients' fast check, so an unpaused sweep pays one attribute read per request."""
        self.controller: Controller | None = None
        self._changed = asyncio.Event()

    # -- the sweep's lifecycle --------------------------------------------------------------
    def starting(self, what: str) -> None:
        """What the sweep is doing now, while it starts."""
        self.phase = what

    def open(self, controller: Controller) -> None:
        """The runtime is open: commands that act on it go to ``controller`` from now on."""
        self.controller = controller
        self.phase = ""

    # -- the request gate (providers.client.RequestGate) --------------------------------------
    async def wait(self, endpoint: str) -> None:
        """Held before a model request while a pause covers it."""
        while self._holds_request(endpoint):
            await self.wait_change()

    # -- admission asks ---------------------------------------------------------------------
    async def admit(self, entry: Entry) -> bool:
        """May this job start now? False: it was parked (paused) or dropped (drained, cancelled).

        A pause of everything holds the launcher itself (parking a million-job plan would hold it in
        memory); a narrower pause parks that part's jobs so the others go on.
        """
        if not (self.pauses or self.drained or self.cancelled):
            return True
        job = entry[0]
        while True:
            if self.dropped(job.model):
                self._drop(job)
                return False
            pause = self._pause_for(job)
            if pause is None:
                return True
            if pause.scope != "all":
                self.parked.append(entry)
                return False
            await self.wait_change()

    def dropped(self, model: str) -> bool:
        """Are this model's unstarted jobs dropped (drained or cancelled)?"""
        return "*" in self.drained or model in self.drained or model in self.cancelled

    # -- commands (the control socket calls these) --------------------------------------------
    def state(self) -> dict[str, Any]:
        """``ctl status`` as data: the controller's once the runtime is open, what the start is doing before."""
        if self.controller is not None:
            return self.controller.state()
        ledger = self.ledger
        return {
            "starting": self.phase,
            "jobs": {"total": ledger.total, "ok": 0, "error": 0, "resumed": ledger.resumed, "in_flight": 0,
                     "waiting": ledger.waiting(), "held": 0, "not_run": 0, "requeued": 0},
            "global": {"concurrency": None, "in_flight": 0},
            **self.intents(), "models": {}, "endpoints": {},
        }

    def intents(self) -> dict[str, Any]:
        """The pauses, drains and cancels in force (part of ``ctl status``)."""
        return {"paused": [{"scope": p.scope, "name": p.name, "now": p.now} for p in sorted(self.pauses, key=str)],
                "draining": sorted(self.drained), "cancelled": sorted(self.cancelled)}

    def pause(self, scope: str, name: str, now: bool) -> list[dict[str, Any]]:
        self.check_scope(scope, name)
        new = Pause(scope, name if scope != "all" else "", now)
        if new in self.pauses:
            return []
        old = {p for p in self.pauses if (p.scope, p.name) == (new.scope, new.name)}
        self.pauses = (self.pauses - old) | {new}
        self._changed_now()
        return [{"what": f"pause {new.label()}", "old": "running" if not old else "paused", "new": "paused"}]

    def resume(self, scope: str | None, name: str) -> list[dict[str, Any]]:
        """Lift the pauses of one part (all of them without a scope); parked jobs start again."""
        gone = {p for p in self.pauses if scope is None or (p.scope, p.name) == (scope, name if scope != "all" else "")}
        if scope is not None and not gone:
            raise ControlError(f"{scope} {name} is not paused" if scope != "all" else "everything is not paused")
        self.pauses -= gone
        held, self.parked = self.parked, []
        if held and self.controller is not None:  # parked only once jobs start, so the controller is there
            self.controller.relaunch(held)
        self._changed_now()
        return [{"what": f"pause {p.label()}", "old": "paused", "new": "running"} for p in sorted(gone, key=str)]

    def drain(self, model: str | None) -> list[dict[str, Any]]:
        """Start nothing new (of ``model``, or at all); in-flight jobs finish; the sweep then ends (exit 3)."""
        if model is not None:
            self.check_scope("model", model)
        self.drained.add(model or "*")
        self._drop_parked()
        self._changed_now()
        return [{"what": f"drain {model or 'everything'}", "old": "running", "new": "draining"}]

    def cancel(self, model: str) -> tuple[int, list[dict[str, Any]]]:
        """Stop ``model``'s jobs now: no record is written for the cancelled ones, a rerun runs them."""
        self.check_scope("model", model)
        self.cancelled.add(model)
        self._drop_parked()
        n = self.controller.cancel_running(model) if self.controller is not None else 0
        self._changed_now()
        return n, [{"what": f"cancel {model}", "old": "running", "new": f"cancelled ({n} in flight)"}]

    def set_limits(self, scope: str, name: str, values: dict[str, Any]) -> list[dict[str, Any]]:
        return self._running("its endpoints are not set up yet").set_limits(scope, name, values)

    def requeue(self, kind: str | None, model: str | None) -> tuple[int, list[dict[str, Any]]]:
        return self._running("no job has ended yet").requeue(kind, model)

    async def close(self) -> None:
        if self.controller is not None:
            await self.controller.close()

    # -- internals --------------------------------------------------------------------------
    def _running(self, why: str) -> Controller:
        if self.controller is None:
            raise ControlError(f"the sweep is still starting ({self.phase}; {why}): try again in a moment")
        return self.controller

    def check_scope(self, scope: str, name: str) -> None:
        if scope not in SCOPES:
            raise ControlError(f"unknown scope {scope!r} (one of {', '.join(SCOPES)})")
        if scope == "model" and name not in self.models:
            raise ControlError(f"no model {name!r} in this sweep (models: {', '.join(sorted(self.models))})")
        endpoints = self.models + self.roles
        if scope == "endpoint" and name not in endpoints:
            raise ControlError(f"no endpoint {name!r} in this sweep (endpoints: {', '.join(sorted(endpoints))})")
        if scope == "suite" and not name:
            raise ControlError("which suite?")
        if scope == "suite" and self.suites is not None and name not in self.suites:
            raise ControlError(f"no suite {name!r} in this sweep (suites: {', '.join(sorted(self.suites))})")

    def _pause_for(self, job: Job) -> Pause | None:
        for p in self.pauses:
            if p.scope == "all" or (p.scope in ("model", "endpoint") and p.name == job.model) or \
                    (p.scope == "suite" and p.name == job.suite):
                return p
        return None

    def _holds_request(self, endpoint: str) -> bool:
        job = current_job()  # whose request this is (its model and suite), None outside a job
        for p in self.pauses:
            if p.scope == "endpoint" and p.name == endpoint and (p.now or endpoint not in self.models):
                return True  # a role has no jobs to park: its pause holds its requests
            if not p.now:
                continue
            if p.scope == "all" or (job is not None and ((p.scope == "model" and p.name == job.model)
                                                         or (p.scope == "suite" and p.name == job.suite))):
                return True
        return False

    def _drop(self, job: Job) -> None:
        self.ledger.unrun(job.model, "cancelled" if job.model in self.cancelled else "drained", suite=job.suite)
        serving = self.serving
        if serving is not None and serving.served(job.model):
            serving.forget(job.model)  # its servers stop after the last job that still runs

    def _drop_parked(self) -> None:
        keep = []
        for entry in self.parked:
            if self.dropped(entry[0].model):
                self._drop(entry[0])
            else:
                keep.append(entry)
        self.parked = keep

    async def wait_change(self) -> None:
        await self._changed.wait()

    def _changed_now(self) -> None:
        """Something changed: waiters look again, and the clients' fast check follows the pauses."""
        self.held = any(p.now or (p.scope == "endpoint" and p.name not in self.models) for p in self.pauses)
        self._changed.set()
        self._changed = asyncio.Event()

    def notify(self) -> None:
        """Wake whoever waits for a change (a relaunch finished, the sweep may settle)."""
        self._changed_now()
