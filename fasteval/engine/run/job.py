"""One job from open to record: its context and tools, the agent loop, the score, its close.

``JobRunner.run`` is a job's whole life. It opens the job (its ``JobContext``, the one context
its requests carry: the id for sticky routing and stable batch ids, the retry count, the batches
it rode in; its tools), runs the agent loop (fasteval.engine.run.agent), has the suite score the
trajectory, and closes it: a tool that keeps state for the job (a sandbox session) frees it
whatever ended the job (an answer, a provider error, our own bug, cancellation, its endpoint
going down). The record is filled here and only here, and each failure is attributed to the
stage it came from:

- load: the suite could not load the task (``error_kind`` ``load_error``);
- agent: the model failed for good (the ProviderError's kind);
- score: a judge failed for good (its kind), or the scorer says it could not judge (``judge_error``, ``scorer_error``);
- internal: a bug of ours or of a suite, at any stage, opening the job included (``internal``;
  run.log has the traceback and the stage).

An endpoint that went down (``EndpointDown``, a BaseException) is not the job's error: it passes
through, and the sweep leaves the job for a rerun.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from fasteval.core.errors import OutOfDescriptors, descriptor_fault
from fasteval.core.job import JobContext, job_context
from fasteval.core.types import Ending, Job, Record, Task, Trajectory, Usage
from fasteval.engine.plan import SuiteRun
from fasteval.engine.run.agent import AgentEnv, run_agent
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, ScoreContext, Setting
from fasteval.tools.base import Tool, make_tool
from providers import ModelClient, ProviderError

log = logging.getLogger("fasteval")

Stage = Literal["open", "agent", "score"]
ToolCache = dict[tuple[str, str, tuple[str, ...]], dict[str, Tool]]


def usage_summary(turns: list[Usage]) -> dict[str, int]:
    """A record's token counts; cache counts appear only when a prompt cache served or stored some."""
    total = Usage()
    for u in turns:
        total.add(u)
    out = {"prompt_tokens": total.prompt_tokens, "completion_tokens": total.completion_tokens}
    if total.cache_read_tokens or total.cache_write_tokens:
        out.update(cache_read_tokens=total.cache_read_tokens, cache_write_tokens=total.cache_write_tokens)
    if total.reasoning_tokens:  # part of completion_tokens, shown apart
        out["reasoning_tokens"] = total.reasoning_tokens
    if total.image_tokens:  # part of prompt_tokens, where the server says so
        out["image_tokens"] = total.image_tokens
    return out


def one_line(text: str, limit: int = 300) -> str:
    """Error texts on records and the terminal are one bounded line (the traceback is in run.log)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


@dataclass(slots=True)
class _Job:
    """One job while it runs: its record and trajectory, and the stage it has reached."""

    job: Job
    rec: Record
    traj: Trajectory = field(default_factory=Trajectory)
    stage: Stage = "open"

    def fail(self, kind: str, message: str, *, ends_trajectory: bool = True) -> None:
        """The job's error; it ends the trajectory too, unless the trajectory ended on its own (a
        scorer that could not judge a finished one)."""
        self.rec.error, self.rec.error_kind = message, kind
        if ends_trajectory:
            self.traj.end(Ending("error", message, final=True))


class JobRunner:
    """Runs a sweep's jobs; holds what they share: the model clients, services, blobs and tools."""

    def __init__(self, clients: dict[str, ModelClient], services: dict[str, Any], blobs: BlobStore,
                 halted: Callable[[], bool]) -> None:
        self.clients = clients
        self.services = services
        self.blobs = blobs
        self.halted = halted
        """True once the sweep stopped on a storage fault: a job failing then is not recorded."""
        self._tools: ToolCache = {}

    async def run(self, job: Job, run: SuiteRun, setting: Setting, item: Task | LoadError) -> Record | None:
        """Open, play, score and close one job: its record, or None when the sweep halted under it.

        Raises EndpointDown (the job did not happen), OutOfDescriptors (the process is at its file
        descriptor limit: no record may blame the job) and CancelledError; nothing else.
        """
        t0 = time.monotonic()
        state = _Job(job, Record(job_id=job.job_id, model=job.model, suite=job.suite, setting=job.setting,
                                 task_id=job.task_id, seed=job.seed, status="error", score=None, answer=None,
                                 fingerprint=job.fingerprint, components=job.identity.components()))
        try:
            if isinstance(item, LoadError):
                state.fail("load_error", item.message)
            else:
                await self._play(state, run, setting, item)
        except Exception as e:  # our bug or a suite's: record it, keep the sweep going
            if self.halted():  # a storage fault: the sweep stops, this job is not recorded
                return None
            if (fault := descriptor_fault(e)) is not None:  # the process's limit, not the job's fault
                raise OutOfDescriptors(fault, f"{state.stage} stage") from e
            log.error("job %s failed internally (%s stage):\n%s", job.job_id, state.stage, traceback.format_exc())
            state.fail("internal", one_line(f"{type(e).__name__}: {e}"))
        return _finished(state, t0)

    async def _play(self, state: _Job, run: SuiteRun, setting: Setting, task: Task) -> None:
        """Run the agent and score the trajectory inside the job's context; close the job's tools."""
        job, rec = state.job, state.rec
        rec.metadata = {k: v for k, v in task.metadata.items() if isinstance(v, str | int | float | bool)}
        rec.metadata["max_rounds"] = setting.max_rounds
        rec.metadata["fidelity"] = setting.fidelity
        tools = self._tools_for(run, setting, task)
        try:
            env = AgentEnv(client=self.clients[job.model], suite=run.suite, setting=setting, blobs=self.blobs,
                           services=self.services, tools=tools, params=run.suite.request_params(setting, job.model))
            with job_context(job.job_id, model=job.model, suite=job.suite) as ctx:
                try:
                    state.stage = "agent"
                    await run_agent(task, job.seed, job.job_id, env, state.traj)
                    state.stage = "score"
                    await self._score(state, run, setting, task)
                except ProviderError as e:  # the model or a judge failed for good
                    if (fault := descriptor_fault(e)) is not None:
                        raise OutOfDescriptors(fault, f"{state.stage} stage") from e
                    state.fail(e.kind, str(e))
                finally:
                    _note_context(rec, ctx)
        finally:
            await self._close(job.job_id, tools)

    async def _score(self, state: _Job, run: SuiteRun, setting: Setting, task: Task) -> None:
        rec = state.rec
        score = await run.suite.score(task, state.traj, setting, ScoreContext(blobs=self.blobs, services=self.services))
        rec.score, rec.score_details = score.value, score.details
        if score.error:
            state.fail(score.error_kind, score.error, ends_trajectory=False)
        else:
            rec.status = "ok"

    async def _close(self, job_id: str, tools: dict[str, Tool]) -> None:
        """Free what the job's tools keep for it; shielded, so a cancelled job still frees it."""
        for tool in tools.values():
            if not tool.keeps_sessions:
                continue
            try:
                await asyncio.shield(tool.end_session(job_id, self.services))
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a worker that died with the session: nothing left to free
                log.warning("job %s: ending its %s session failed: %s", job_id, tool.name, e)

    def _tools_for(self, run: SuiteRun, setting: Setting, task: Task) -> dict[str, Tool]:
        """The job's tools, built once per suite, setting and tool list (tools keep no job state)."""
        names = tuple(run.suite.tools(task, setting))
        key = (run.suite.name, setting.name, names)
        if key not in self._tools:
            opts = dict(setting.options.get("tool_options") or {})
            self._tools[key] = {n: make_tool(n, **{"fidelity": setting.fidelity, **(opts.get(n) or {})})
                                for n in names}
            for tool in self._tools[key].values():  # the first job that offers it: start its services
                tool.prepare(self.services)
        return self._tools[key]


def _note_context(rec: Record, ctx: JobContext) -> None:
    """What the job's requests counted on its context: retries, and in batch mode its batches."""
    rec.retries = ctx.retries
    if ctx.batch_ids:  # the provider batches its requests rode in (batch discount)
        rec.metadata["batch_id"] = ",".join(sorted(ctx.batch_ids))
    if ctx.fallbacks:  # requests asked interactively after their batch failed (full price)
        rec.metadata["batch_fallback"] = ctx.fallbacks
    if any(batched := ctx.batched.get(ctx.model, {})):
        rec.usage = {k: v for k, v in batched.items() if v}  # batch-priced; _finished adds the totals


def _finished(state: _Job, t0: float) -> Record:
    """The record's fields read off the trajectory, once the job is over."""
    rec, traj = state.rec, state.traj
    rec.answer = traj.answers[-1] if traj.answers else None
    rec.termination, rec.rounds, rec.tool_calls = traj.termination, traj.rounds, len(traj.tool_calls)
    rec.usage = {**usage_summary(traj.usage_by_turn), **rec.usage}  # rec.usage: its batch_* parts
    rec.latency_s = round(time.monotonic() - t0, 4)
    rec.trajectory = traj
    return rec
