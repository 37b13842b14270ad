"""How a run's jobs are counted: done, errors, skipped, in flight, against the plan's total.

It sits on the engine's floor because the hot path writes it and the steering room and the
progress panel read it; neither of those may import the other.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

Group = tuple[str, str, str]
"""(model, suite, setting)."""


@dataclass(slots=True)
class Counters:
    total: int = 0
    skipped: int = 0
    done: int = 0
    errors: int = 0
    in_flight: int = 0
    started_at: float = field(default_factory=time.monotonic)
    groups: dict[Group, list[int]] = field(default_factory=dict)
    """Per model × suite × setting, only with ``log_to:``: [jobs of the plan, jobs this invocation runs,
    those ended with a record]; a group whose jobs have all ended is told to the trackers."""

    def seed_groups(self, planned: Mapping[Group, int], done: Mapping[Group, int]) -> None:
        """The plan's jobs per group, and those the run folder already held (resumed, not run again)."""
        self.groups = {g: [n, max(0, n - done.get(g, 0)), 0] for g, n in planned.items()}

    def group_ended(self, group: Group) -> int | None:
        """A job of ``group`` ended with a record: the group's planned jobs once all of them have one
        (again after a requeued one ends), else None."""
        counts = self.groups.get(group)
        if counts is None:
            return None
        counts[2] += 1
        return counts[0] if counts[2] >= counts[1] else None

    def eta_s(self) -> float | None:
        """None until enough jobs finished for a rate to mean something (the first jobs pay for
        start-up and the first finishers are the quick ones: an early ETA is noise)."""
        finished = self.done + self.errors
        elapsed = time.monotonic() - self.started_at
        if finished < max(5, 0.05 * self.total) or elapsed < 5.0:
            return None
        return (self.total - finished) / (finished / elapsed)
