"""How a run's jobs are counted: done, errors, skipped, in flight, against the plan's total.

It sits on the engine's floor because the hot path writes it and the steering room and the
progress panel read it; neither of those may import the other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(slots=True)
class Counters:
    total: int = 0
    skipped: int = 0
    done: int = 0
    errors: int = 0
    in_flight: int = 0
    started_at: float = field(default_factory=time.monotonic)

    def eta_s(self) -> float | None:
        """None until enough jobs finished for a rate to mean something (the first jobs pay for
        start-up and the first finishers are the quick ones: an early ETA is noise)."""
        finished = self.done + self.errors
        elapsed = time.monotonic() - self.started_at
        if finished < max(5, 0.05 * self.total) or elapsed < 5.0:
            return None
        return (self.total - finished) / (finished / elapsed)
