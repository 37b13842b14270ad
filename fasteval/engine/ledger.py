"""The run ledger: every count of one sweep invocation, kept in one place.

The plan's jobs (within the selectors) are ``planned``; those the run folder already holds are
``resumed``; the rest are this invocation's (``to_run``). Each of those starts (``in_flight``) and
ends once: ok or error (a record written), or not run, with why (no record: a rerun runs it). A
requeue takes an error back. The progress panel, the sweep's result, ``ctl status``, notify events
and the final summary line read these numbers; nothing else keeps a count of a run's jobs, and only
this module's methods change one (``tests/architecture/test_ledger.py`` fails on a count written
anywhere else).

It sits on the engine's floor because the hot path writes it and the steering room and the
progress panel read it; neither of those may import the other.
"""

from __future__ import annotations

import time
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fasteval.core.types import Job, Record

Group = tuple[str, str, str]
"""(model, suite, setting)."""

WHY_NOT_RUN = ("endpoint down", "batch pending", "drained", "cancelled", "interrupted", "stopped")
"""Why a job of this invocation has no record: its endpoint was given up on, its request waits in a
provider batch (``--no-wait``), ``ctl drain``, ``ctl cancel``, Ctrl-C (or SIGTERM), or a fault no
job can survive (a full disk)."""


@dataclass(slots=True)
class Tally:
    """One model's or one suite's jobs in this invocation (``ctl status``'s rows)."""

    to_run: int = 0
    """The plan's jobs not finished before this invocation started (seeded from the run index)."""
    ok: int = 0
    error: int = 0
    in_flight: int = 0
    requeued: int = 0
    not_run: int = 0


class IndexCounts(Protocol):
    """What the ledger's seed reads of the run index (``runfolder.index.RunIndex.counts``)."""

    def counts(self, by: Sequence[str] = (), **filters: Any) -> dict[tuple[Any, ...], dict[str, int]]: ...


@dataclass(slots=True)
class Ledger:
    """The counts of one sweep invocation; every method runs on the sweep's event loop."""

    planned: int = 0
    """Jobs of the plan within the selectors, done before or not."""
    resumed: int = 0
    """Jobs of the plan the run folder already held: skipped (counted as the plan streams past them)."""
    started: int = 0
    """Job starts, a requeued job's second start included."""
    in_flight: int = 0
    ok: int = 0
    error: int = 0
    """Jobs that ended in error (a requeued one is taken back until it ends again)."""
    requeued: int = 0
    not_run: dict[str, int] = field(default_factory=dict)
    """Why (one of WHY_NOT_RUN) -> jobs of this invocation left without a record."""
    down: dict[str, str] = field(default_factory=dict)
    """Endpoints given up on: name -> reason."""
    errors_by: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    """model -> error_kind -> [count, one example message]: the end-of-run table."""
    models: dict[str, Tally] = field(default_factory=dict)
    suites: dict[str, Tally] = field(default_factory=dict)
    started_at: float = field(default_factory=time.monotonic)
    groups: dict[Group, Tally] = field(default_factory=dict)
    """Per model × suite × setting, only with ``log_to:`` (``seed_groups``): a group whose jobs of this
    invocation have all ended with a record is told to the experiment trackers (``whole``)."""
    group_planned: dict[Group, int] = field(default_factory=dict)
    """The plan's jobs per group, done before or not: the run index holds that many once it is whole."""

    # -- the seed ----------------------------------------------------------------------------
    def seed(self, planned: int, by: Mapping[str, Mapping[str, int]], done: Mapping[str, Mapping[str, int]]) -> None:
        """The plan's totals (``by``: per ``model`` and ``suite``) less what the run folder held (``done``)."""
        self.planned = planned
        for dim, tallies in (("model", self.models), ("suite", self.suites)):
            finished = done.get(dim, {})
            for name, n in by.get(dim, {}).items():
                tallies.setdefault(name, Tally()).to_run = max(0, n - finished.get(name, 0))

    def seed_groups(self, planned: Mapping[Group, int], done: Mapping[Group, int]) -> None:
        """Each group's planned jobs, less those the run folder held (``already_done``'s ``group``)."""
        self.group_planned = dict(planned)
        self.groups = {g: Tally(to_run=max(0, n - done.get(g, 0))) for g, n in planned.items()}

    # -- the hot path ------------------------------------------------------------------------
    def skip(self, n: int = 1) -> None:
        """The plan passed ``n`` jobs the run folder already holds (it counts them a block at a time)."""
        self.resumed += n

    def start(self, job: Job) -> None:
        self.started += 1
        self.in_flight += 1
        self._model(job.model).in_flight += 1
        self._suite(job.suite).in_flight += 1
        if (group := self.groups.get((job.model, job.suite, job.setting))) is not None:
            group.in_flight += 1

    def end(self, job: Job, rec: Record | None, why: str = "interrupted", *, endpoint: str = "",
            reason: str = "") -> None:
        """A started job is over: counted by its record's status, or as not run for ``why``."""
        self.in_flight -= 1
        model, suite = self._model(job.model), self._suite(job.suite)
        model.in_flight -= 1
        suite.in_flight -= 1
        if (group := self.groups.get((job.model, job.suite, job.setting))) is not None:
            group.in_flight -= 1
            if rec is None:
                group.not_run += 1
            elif rec.status == "ok":
                group.ok += 1
            else:
                group.error += 1
        if rec is None:
            self.unrun(job.model, why, endpoint=endpoint, reason=reason, suite=job.suite)
        elif rec.status == "ok":
            self.ok += 1
            model.ok += 1
            suite.ok += 1
        else:
            self.error += 1
            model.error += 1
            suite.error += 1
            kind = rec.error_kind or "error"
            self.errors_by.setdefault(job.model, {}).setdefault(kind, [0, rec.error or ""])[0] += 1

    def unrun(self, model: str, why: str, *, endpoint: str = "", reason: str = "", suite: str | None = None) -> None:
        """A job of this invocation will have no record (``why``: one of WHY_NOT_RUN)."""
        self.not_run[why] = self.not_run.get(why, 0) + 1
        self._model(model).not_run += 1
        if suite is not None:
            self._suite(suite).not_run += 1
        if endpoint:
            self.down[endpoint] = reason

    def requeue(self, job: Job, kind: str) -> None:
        """An error of this invocation runs again: its count and its row in the end-of-run table go back."""
        self.error -= 1
        self.requeued += 1
        model, suite = self._model(job.model), self._suite(job.suite)
        model.error -= 1
        model.requeued += 1
        suite.error -= 1
        suite.requeued += 1
        if (group := self.groups.get((job.model, job.suite, job.setting))) is not None:
            group.error -= 1
            group.requeued += 1
        kinds = self.errors_by.get(job.model, {})
        entry = kinds.get(kind)
        if entry is not None:
            entry[0] -= 1
            if entry[0] <= 0:
                del kinds[kind]
                if not kinds:
                    del self.errors_by[job.model]

    def settle(self, why: str) -> int:
        """At the end: the jobs of this invocation never started (the plan's rest, held, deferred) are
        not run for ``why``; how many. ``resumed`` must be whole by then (the plan walked to its end)."""
        rest = max(0, self.to_run - self.ok - self.error - self.in_flight - self.not_run_total)
        if rest:
            self.not_run[why] = self.not_run.get(why, 0) + rest
        return rest

    # -- reading -----------------------------------------------------------------------------
    def whole(self, job: Job) -> int | None:
        """Asked after ``job`` ended: its group's planned jobs once every job of the group this
        invocation runs has ended with a record (again after a requeued one ends), else None."""
        key = (job.model, job.suite, job.setting)
        group = self.groups.get(key)
        if group is None or group.in_flight or group.ok + group.error < group.to_run:
            return None
        return self.group_planned[key]

    @property
    def to_run(self) -> int:
        """This invocation's jobs: the plan less what the run folder held."""
        return self.planned - self.resumed

    @property
    def not_run_total(self) -> int:
        return sum(self.not_run.values())

    @property
    def total(self) -> int:
        """The jobs this invocation takes to a record: the panel's and ``ctl status``'s denominator."""
        return self.to_run - self.not_run_total

    @property
    def finished(self) -> int:
        return self.ok + self.error

    def waiting(self, held: int = 0) -> int:
        """Not started yet (``held``: parked by a pause, apart)."""
        return max(0, self.total - self.finished - self.in_flight - held)

    def eta_s(self) -> float | None:
        """None until enough jobs finished for a rate to mean something (the first jobs pay for
        start-up and the first finishers are the quick ones: an early ETA is noise)."""
        finished = self.finished
        elapsed = time.monotonic() - self.started_at
        if finished < max(5, 0.05 * self.total) or elapsed < 5.0:
            return None
        return (self.total - finished) / (finished / elapsed)

    def row(self, tally: Tally, held: int = 0) -> dict[str, int]:
        """One model's (or suite's) ``ctl status`` row; ``waiting``: not started yet, held ones apart."""
        row = {"to_run": tally.to_run, "ok": tally.ok, "error": tally.error, "in_flight": tally.in_flight,
               "held": held, "requeued": tally.requeued, "not_run": tally.not_run}
        row["waiting"] = max(0, tally.to_run - tally.ok - tally.error - tally.in_flight - held - tally.not_run)
        return row

    def _model(self, name: str) -> Tally:
        tally = self.models.get(name)
        if tally is None:
            tally = self.models[name] = Tally()
        return tally

    def _suite(self, name: str) -> Tally:
        tally = self.suites.get(name)
        if tally is None:
            tally = self.suites[name] = Tally()
        return tally


def already_done(index: IndexCounts, models: Container[str], selected: tuple[Sequence[str], Sequence[str], Sequence[str]],
                 keep_errors: bool) -> dict[str, dict[Any, int]]:
    """Per ``model``, per ``suite`` and per ``group`` (model, suite, setting), the jobs the run folder
    holds of the planned ``models`` within the selectors (suites, settings, seeds): ok records, and
    error ones too with ``--keep-errors``. The ledger's seed.

    The one place the ledger reads the run index: its ``counts``, answered from the index's
    aggregates (no job's row is read, however many are done).
    """
    suites, settings, seeds = selected
    out: dict[str, dict[Any, int]] = {"model": {}, "suite": {}, "group": {}}
    for (model, suite, setting, seed), by_status in index.counts(by=("model", "suite", "setting", "seed")).items():
        if str(model) not in models or (suites and suite not in suites) or (settings and setting not in settings) or \
                (seeds and str(seed) not in seeds):
            continue
        n = sum(by_status.values()) if keep_errors else by_status.get("ok", 0)
        for dim, name in (("model", str(model)), ("suite", str(suite)),
                          ("group", (str(model), str(suite), str(setting)))):
            out[dim][name] = out[dim].get(name, 0) + n
    return out
