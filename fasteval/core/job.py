"""One job's context: what its requests carry through layers that never see the job itself.

A job's requests pass through the model client (which counts the job's retries), a served model's
router (which keeps the job on the replica holding its prefix cache), a batch lane (which numbers
the job's requests so their batch ids are stable across reruns, and notes the batches they rode
in) and the sweep's controller (which holds a paused model's or suite's requests). None of them
is handed the job: the job runner opens one ``JobContext`` around everything the job does, in a
context variable, so the agent loop passes nothing down and concurrent jobs never see each
other's counts. Code outside a job (a rescore, a benchmark) finds no context and behaves as a
job of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["JobContext", "Pin", "current_job", "job_context"]


class Pin(Protocol):
    """A replica a router holds for a job (sticky routing); let go when the job ends."""

    def unpin(self) -> None: ...


@dataclass(slots=True, eq=False)
class JobContext:
    """The job's id and the counters its requests fill in, read into its record at the end."""

    job_id: str
    model: str = ""
    suite: str = ""
    retries: int = 0
    """Retries caused by this job's own requests (its model, judge and extractor calls)."""
    pins: dict[int, Pin] = field(default_factory=dict)
    """Sticky routing: per router (by ``id``), the replica this job's requests go to."""
    requests: dict[str, int] = field(default_factory=dict)
    """Per batch lane, how many requests this job sent into it (the n of each request's custom_id)."""
    batch_ids: set[str] = field(default_factory=set)
    """The provider batches this job's requests rode in (batch discount)."""
    batched: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per batch lane, the tokens its batches served this job (``batch_prompt_tokens``, ...): batch-priced."""
    fallbacks: int = 0
    """Requests answered interactively after their batch failed (full price)."""

    def next_request(self, lane: str) -> int:
        """The number of this job's next request in ``lane`` (0, 1, ...): the same on a rerun."""
        n = self.requests.get(lane, 0)
        self.requests[lane] = n + 1
        return n

    def close(self) -> None:
        """Let go of what routers hold for the job (its replicas take new trajectories again)."""
        for pin in self.pins.values():
            pin.unpin()
        self.pins.clear()


_CURRENT: ContextVar[JobContext | None] = ContextVar("fasteval_job", default=None)


def current_job() -> JobContext | None:
    """The job whose code is running (None outside one)."""
    return _CURRENT.get()


@contextmanager
def job_context(job_id: str, *, model: str = "", suite: str = "") -> Iterator[JobContext]:
    """Requests made inside (and in the tasks started inside) belong to this job."""
    job = JobContext(job_id, model, suite)
    token = _CURRENT.set(job)
    try:
        yield job
    finally:
        job.close()
        _CURRENT.reset(token)
