"""``fasteval rescore``: score finished trajectories again without regenerating them.

Judges and extractors are called through the same providers layer and the ``judge`` cache, so a
rescore with an unchanged judge makes no judge requests at all. Each rescored job gets a new
record appended to ``records.jsonl`` (finished records are never rewritten); readers take a
job's latest ok record, so status and report show the new scores.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from fasteval.config.load import SweepConfig
from fasteval.core.types import Record, Task, ToolCall, Trajectory, Usage
from fasteval.engine.plan import build_settings, load_suite
from fasteval.engine.run.runtime import open_runtime
from fasteval.runfolder.blobs import BlobStore
from fasteval.runfolder.index import open_index
from fasteval.runfolder.names import BLOBS
from fasteval.runfolder.records import RECORDS, RecordWriter
from fasteval.suites.base import ScoreContext
from providers import ProviderError

RESCORABLE_ERRORS = frozenset({"judge_error", "scorer_error"})
"""A record whose trajectory was paid for and only its scoring failed: rescoring retries it."""


@dataclass(slots=True)
class RescoreResult:
    rescored: int = 0
    errors: int = 0
    skipped: int = 0
    judge_requests: int = 0
    judge_cache_hits: int = 0


def trajectory_from_dict(d: dict[str, Any]) -> Trajectory:
    return Trajectory(
        messages=list(d.get("messages") or []),
        tool_calls=[ToolCall(**c) for c in d.get("tool_calls") or []],
        usage_by_turn=[Usage(**u) for u in d.get("usage_by_turn") or []],
        prompt_tokens_by_round=list(d.get("prompt_tokens_by_round") or []),
        completion_tokens_by_round=list(d.get("completion_tokens_by_round") or []),
        turn_by_round=list(d.get("turn_by_round") or []),
        answers=list(d.get("answers") or []),
        rounds=int(d.get("rounds", 0)),
        termination=d.get("termination", "answered"),
        termination_reason=d.get("termination_reason"),
    )


def _record_from(old: dict[str, Any]) -> Record:
    fields: dict[str, Any] = {k: old[k] for k in Record.__dataclass_fields__ if k in old}
    return Record(**fields)


async def rescore(cfg: SweepConfig, run_dir: Path) -> RescoreResult:
    """Re-judge every finished trajectory in ``run_dir`` with the roles of ``cfg``."""
    blobs = BlobStore(run_dir / BLOBS)
    runs = {e["name"]: await asyncio.to_thread(load_suite, e, blobs) for e in cfg.suites}
    index = await asyncio.to_thread(open_index, run_dir)
    # Only (job, offset, length) per rescorable job is held; each trajectory is read when judged.
    todo = [(r.job_id, r.suite, r.setting, r.task_id, r.offset, r.length) for r in index.rows()
            if r.status == "ok" or r.error_kind in RESCORABLE_ERRORS]
    skipped = index.count() - len(todo)
    tasks = {(name, t.id): t for name, run in runs.items() for t in run.items if isinstance(t, Task)}
    settings_by_suite = {name: {s.name: s for s in build_settings(run.suite, next(
        (e.get("settings") for e in cfg.suites if e["name"] == name), None))} for name, run in runs.items()}
    result = RescoreResult(skipped=skipped)
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(index.close)
        rt = await open_runtime(stack, blobs, cfg, models=[], roles=cfg.roles, needed={"cache"},
                                run_dir=run_dir)  # a batched judge journals its batches in the run folder
        roles = rt.roles
        writer = RecordWriter(run_dir / RECORDS, fsync=cfg.run.fsync, index=index)
        await writer.start()
        stack.push_async_callback(writer.close)
        for job_id, suite, setting_name, task_id, offset, length in todo:
            run = runs.get(suite)
            task = tasks.get((suite, task_id))
            setting = settings_by_suite.get(suite, {}).get(setting_name)
            if run is None or task is None or setting is None:
                result.skipped += 1
                continue
            old = orjson.loads(index.read_line(offset, length))
            if old.get("job_id") != job_id or not old.get("trajectory"):
                result.skipped += 1
                continue
            rec = _record_from(old)
            traj = trajectory_from_dict(old["trajectory"])
            traj.seed = int(old.get("seed", 0))  # suites that lay a task out per seed score it back by it
            try:
                score = await run.suite.score(task, traj, setting, ScoreContext(blobs=blobs, services=rt.services))
                rec.score, rec.score_details = score.value, {**score.details, "rescored_at": time.time()}
                rec.status, rec.error, rec.error_kind = ("error", score.error, score.error_kind) if score.error else (
                    "ok", None, None)
            except ProviderError as e:
                rec.status, rec.score, rec.error, rec.error_kind = "error", None, str(e), e.kind
            rec.trajectory = traj
            writer.write(rec)
            result.rescored += rec.status == "ok"
            result.errors += rec.status != "ok"
    result.judge_requests = sum(c.stats.requests for c in roles.values())
    result.judge_cache_hits = sum(c.stats.cache_hits for c in roles.values())
    return result
