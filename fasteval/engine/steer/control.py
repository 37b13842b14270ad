"""Steering a running sweep (``fasteval ctl``): limits, requeues, cancels, and the status of it all.

The sweep builds one Controller once its runtime is open, from what it steers: the run's ledger,
the model clients, the serving pool, the global slots, admission's launch function and the jobs
it runs. ``fasteval.engine.steer.steering.Steering`` (built before, so that clients hold it as their
request gate from their build) keeps the pauses, drains and cancels and hands the commands that act
on the runtime to this Controller. The socket server (fasteval.engine.steer.control_server) turns
each command into one method; every change is appended to the run folder's trace. Nothing here
changes what a job computes: sampling, rounds and prompts are config, and resume refuses a changed
config. Limits set here last as long as this sweep: a resume starts from the config's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fasteval.core.types import Job
from fasteval.engine.ledger import Ledger
from fasteval.engine.steer.steering import ControlError, Entry, Steering
from providers import AdaptiveLimit, ModelClient

SETTABLE = ("concurrency", "rpm", "tpm", "max_attempts", "total_budget_s", "attempt_timeout_s")
"""Keys of ``ctl set`` for a model or endpoint; ``global`` takes ``concurrency`` only."""
BOUNDS: dict[str, float] = {"concurrency": 1_000_000, "max_attempts": 1_000, "rpm": 1e12, "tpm": 1e12,
                            "total_budget_s": 1e7, "attempt_timeout_s": 1e7}
"""The largest value each ``set`` key takes: past them no limit is meant (a million requests in
flight, 116 days), and a value past 64 bits could not even be written to the trace or an answer."""

FOR_THIS_SWEEP = "for this sweep: a resume starts from the config's limits (put them there to keep them)"
"""What ``ctl set`` says of how long its change lasts (docs/cli.md: why limits are not carried over)."""


class Controller:
    """The steering that needs the runtime; all methods run on the sweep's event loop."""

    def __init__(self, steering: Steering, ledger: Ledger, clients: Mapping[str, ModelClient],
                 slots: AdaptiveLimit, launch: Callable[[Entry], Awaitable[None]],
                 running: Mapping[asyncio.Task[None], Job]) -> None:
        """``clients``: models and roles by name; ``slots``: the global in-flight cap; ``launch``:
        admission's door for relaunched jobs; ``running``: admission's jobs in flight."""
        self.steering = steering
        self.ledger = ledger
        self.clients = clients
        self.slots = slots
        self.launch = launch
        self.running = running
        self.errors: dict[str, tuple[Entry, str]] = {}
        """Jobs that ended in error in this invocation: job_id -> (entry, error kind)."""
        self.changed: dict[str, Any] = {}
        """Limits set while running, by name (``m.rpm``): the live panel says them."""
        self.closing = False
        self._launching = 0
        self._background: set[asyncio.Task[None]] = set()

    # -- hooks the sweep calls -------------------------------------------------------------
    def errored(self, entry: Entry, kind: str) -> None:
        """A job ended in error: kept for ``requeue``."""
        self.errors[entry[0].job_id] = (entry, kind)

    async def settled(self, idle: asyncio.Event) -> None:
        """Return when no job runs and none waits for a resume or a relaunch: the sweep may end."""
        while True:
            await idle.wait()
            if not self.steering.parked and not self._launching:
                self.closing = True
                return
            await self.steering.wait_change()

    def notes(self) -> str:
        """The live panel's line about steering: paused parts, drains, changed limits, requeues."""
        st = self.steering
        parts = []
        if st.pauses:
            parts.append("paused: " + ", ".join(sorted(p.label() for p in st.pauses)))
        if st.parked:
            parts.append(f"{len(st.parked)} jobs held")
        if st.drained or st.cancelled:
            parts.append("draining: " + ", ".join(sorted("all" if d == "*" else d for d in st.drained | st.cancelled)))
        if self.changed:
            parts.append("limits set: " + ", ".join(f"{k}={'off' if v is None else v}" for k, v in self.changed.items()))
        if self.ledger.requeued:
            parts.append(f"requeued {self.ledger.requeued}")
        return "; ".join(parts)

    async def close(self) -> None:
        """Stop relaunches still on their way (a stop or a fault ended the sweep before they started)."""
        self.closing = True
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    def incomplete_line(self) -> str | None:
        """Why the sweep ends incomplete (exit 3) after a drain or a cancel, or None."""
        n = sum(self.ledger.not_run.get(why, 0) for why in ("drained", "cancelled"))
        if not n:
            return None
        st = self.steering
        what = ", ".join(sorted("everything" if d == "*" else d for d in st.drained | st.cancelled))
        return f"incomplete: drained or cancelled ({what}); {n} jobs not run; rerun to continue"

    # -- commands (through Steering) --------------------------------------------------------
    def set_limits(self, scope: str, name: str, values: dict[str, Any]) -> list[dict[str, Any]]:
        """New limits for a model or endpoint (or the run's global concurrency), effective at once."""
        if scope == "global":
            bad = set(values) - {"concurrency"}
            if bad or "concurrency" not in values:
                raise ControlError("set global takes concurrency=N only")
            new = _positive_int("concurrency", values["concurrency"])
            old = self.slots.limit
            self.slots.resize(new)  # the panel reads its cap from these slots
            self.changed["global.concurrency"] = new
            return [{"what": "global.concurrency", "old": old, "new": new}]
        self.steering.check_scope(scope, name)
        if scope not in ("model", "endpoint"):
            raise ControlError("set applies to a model, an endpoint or global")
        client = self.clients.get(name)
        if client is None:
            raise ControlError(f"no endpoint {name!r} in this sweep")
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
            self.steering.check_scope("model", model)
        picked = [(jid, entry, k) for jid, (entry, k) in self.errors.items()
                  if (kind is None or k == kind) and (model is None or entry[0].model == model)]
        for jid, entry, k in picked:
            del self.errors[jid]
            self.ledger.requeue(entry[0], k)
        self.relaunch([entry for _, entry, _ in picked])
        what = "errors" + (f" of kind {kind}" if kind else "") + (f" of model {model}" if model else "")
        if not picked:
            return 0, []
        return len(picked), [{"what": f"requeue {what}", "old": f"{len(picked)} error records", "new": "queued"}]

    def cancel_running(self, model: str) -> int:
        """Cancel ``model``'s jobs in flight (each ends not run, ``cancelled``, in the ledger); how many."""
        victims = [task for task, job in self.running.items() if job.model == model and not task.done()]
        for task in victims:
            task.cancel(msg="fasteval ctl cancel")
        return len(victims)

    def relaunch(self, entries: list[Entry]) -> None:
        """Start these jobs again in the background; the sweep does not end while they are on their way."""
        if not entries or self.closing:
            return
        launch = self.launch
        self._launching += 1

        async def run() -> None:
            try:
                for entry in entries:
                    await launch(entry)
            finally:
                self._launching -= 1
                self.steering.notify()

        task = asyncio.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- reading ------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Pauses, drains, the ledger's counts per model and suite, per-endpoint limits: ``ctl status`` as data."""
        ledger = self.ledger
        held: dict[str, int] = {}
        for entry in self.steering.parked:  # per model and per suite
            for name in (f"m:{entry[0].model}", f"s:{entry[0].suite}"):
                held[name] = held.get(name, 0) + 1
        n_held = len(self.steering.parked)
        return {
            "jobs": {"total": ledger.total, "ok": ledger.ok, "error": ledger.error, "resumed": ledger.resumed,
                     "in_flight": ledger.in_flight, "waiting": ledger.waiting(n_held), "held": n_held,
                     "not_run": ledger.not_run_total, "requeued": ledger.requeued},
            "not_run": dict(ledger.not_run),
            "global": {"concurrency": self.slots.limit, "in_flight": self.slots.in_flight},
            **self.steering.intents(),
            "models": {m: ledger.row(t, held.get(f"m:{m}", 0)) for m, t in sorted(ledger.models.items())},
            "suites": {s: ledger.row(t, held.get(f"s:{s}", 0)) for s, t in sorted(ledger.suites.items())},
            "endpoints": {name: endpoint_row(cl) for name, cl in self.clients.items()},
            "limits_set": dict(self.changed),
        }


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
