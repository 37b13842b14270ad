"""Admission: when each planned job of a sweep starts, under the sweep's global in-flight cap.

A job becomes a task only when a slot is free, so a million-job plan never holds a million idle
coroutines. Jobs of an endpoint that is down wait at the back, so they do not hold slots other
endpoints could use; jobs of a served model whose GPUs are busy wait until the serving says their
turn has come. The controller (``fasteval ctl``) is asked before each start and starts resumed
and requeued jobs through the same door.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from fasteval.core.types import Job, Task
from fasteval.suites.base import LoadError, Setting

if TYPE_CHECKING:
    from fasteval.engine.ledger import Ledger
    from fasteval.engine.plan import SuiteRun
    from fasteval.engine.run.serving import Serving
    from fasteval.engine.steer.steering import Steering
    from providers import AdaptiveLimit, ModelClient

Planned = tuple[Job, "SuiteRun", Setting, Task | LoadError]
"""One job of the plan with what running it needs: its suite run, setting and task (or load error)."""

RunJob = Callable[[Job, "SuiteRun", Setting, Task | LoadError], Coroutine[Any, Any, None]]


class Admission:
    """Starts planned jobs as slots free up; knows which are running, and when none is."""

    def __init__(self, slots: AdaptiveLimit, clients: Mapping[str, ModelClient], steering: Steering,
                 serving: Serving | None, run_job: RunJob, ledger: Ledger) -> None:
        self.slots = slots
        """The global cap; ``ctl set global concurrency=N`` moves it while jobs run."""
        self.clients = clients
        self.steering = steering
        self.serving = serving
        self.run_job = run_job
        self.ledger = ledger
        """Told of a job left unrun because its endpoint gave up."""
        self.running: dict[asyncio.Task[None], Job] = {}
        """The jobs running, by their task (``ctl cancel`` picks a model's)."""
        self.idle = asyncio.Event()
        """Set while no job runs."""
        self.idle.set()
        self.deferred: list[Planned] = []
        """Jobs whose endpoint's breaker was open when the plan reached them: started at the end."""
        self.waiting_gpus: dict[str, list[Planned]] = {}
        """Jobs of served models not admitted to GPUs yet, by model."""

    async def feed(self, planned: Iterable[Planned]) -> None:
        """Start every job of the plan in order, then the deferred ones, then the served ones waiting."""
        serving = self.serving
        for entry in planned:
            model = entry[0].model
            breaker = self.clients[model].breaker
            if breaker is not None and breaker.is_open:
                self.deferred.append(entry)
                continue
            if serving is not None and serving.served(model) and serving.admission(model) != "run":
                self.waiting_gpus.setdefault(model, []).append(entry)
                continue
            await self.start(entry)
        for entry in self.deferred:
            await self.start(entry)
        while serving is not None and self.waiting_gpus:  # served models waiting for GPUs, in turn
            for model in list(self.waiting_gpus):
                if serving.admission(model) != "defer" or self.steering.dropped(model):  # drained: let go
                    for entry in self.waiting_gpus.pop(model):
                        await self.start(entry)
            if self.waiting_gpus:
                await serving.wait_change()

    async def start(self, entry: Planned) -> None:
        """Start one job once a slot is free, unless its endpoint is gone or the controller holds it."""
        job = entry[0]
        breaker = self.clients[job.model].breaker
        if breaker is not None and breaker.gave_up:  # its endpoint is gone: leave the job unrun
            self.ledger.unrun(job.model, "endpoint down", endpoint=breaker.endpoint, reason=breaker.reason,
                              suite=job.suite)
            return
        if not await self.steering.admit(entry):  # paused, drained or cancelled
            return
        await self.slots.acquire()
        coro = self.run_job(*entry)
        if self.serving is not None and self.serving.served(job.model):
            coro = self.serving.track(job.model, coro)
        task = asyncio.create_task(coro)
        self.running[task] = job
        self.idle.clear()
        task.add_done_callback(self._finished)

    async def cancel_running(self) -> bool:
        """Cancel the jobs still running and wait for them; True when there were any (interrupted)."""
        if not self.running:
            return False
        for t in list(self.running):
            t.cancel()
        await asyncio.gather(*self.running, return_exceptions=True)
        return True

    def _finished(self, task: asyncio.Task[None]) -> None:
        del self.running[task]
        self.slots.release()
        if not self.running:
            self.idle.set()
