"""``fasteval run --dry-run``: what a run would do, without running it or touching the run folder.

Suites are loaded into a throwaway blob store (task ids and the data's fingerprint need them), the
plan is counted by model × suite × setting × seed, and per model × suite the jobs are sorted into
what a run would do with them: **reused** (this folder holds an ok record of the same
fingerprint), **store** (the results store does: copied, not run), **new** and **changed** (their
model, suite or setting changed since this folder ran them: which field, from the manifest).
"""

from __future__ import annotations

import tempfile
from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasteval.config.load import SweepConfig
from fasteval.core.types import Job
from fasteval.engine.growth import GroupChange, GroupKey, classify, identity_section
from fasteval.engine.identity import fingerprints
from fasteval.engine.plan import (
    RunOptions,
    check_roles,
    check_setting_selectors,
    load_suite,
    plan,
    plan_combos,
)
from fasteval.runfolder.blobs import BlobStore
from fasteval.runfolder.index import open_index
from fasteval.runfolder.records import RECORDS, read_manifest

if TYPE_CHECKING:  # the store (and numpy with it) loads only for a config that names one
    from fasteval.store.reader import StoreView

STATES = ("reused", "store", "new", "changed")
CHUNK = 8192
"""Jobs matched against the store at a time: memory stays flat however long the plan."""


@dataclass(slots=True)
class PlanPreview:
    total: int = 0
    resumed: int = 0
    """Jobs the run folder already holds (ok, or any status with keep_errors): resume skips them."""
    from_store: int = 0
    """Jobs the results store holds an ok record of: copied into the run, not sent to any model."""
    groups: dict[tuple[str, str, str, int], int] = field(default_factory=dict)
    first: list[dict[str, Any]] = field(default_factory=list)
    by_model_suite: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    """(model, suite) -> reused / store / new / changed job counts."""
    changes: dict[GroupKey, GroupChange] = field(default_factory=dict)
    """What each model × suite × setting is to the folder (changed ones say which field)."""
    store: str | None = None
    unkeyed: int = 0
    """Records of this folder from before fingerprints: kept aside where their entry is still in
    the config (nothing says what computed them), so those jobs run again."""

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "resumed": self.resumed, "from_store": self.from_store,
                "to_run": self.total - self.resumed - self.from_store,
                "groups": [{"model": m, "suite": s, "setting": st, "seed": sd, "jobs": n}
                           for (m, s, st, sd), n in self.groups.items()],
                "by_model_suite": [{"model": m, "suite": s, **n} for (m, s), n in self.by_model_suite.items()],
                "changes": [{"model": m, "suite": s, "setting": st, "state": c.state, "fields": c.fields,
                             "note": c.note} for (m, s, st), c in self.changes.items() if c.state != "same"],
                "store": self.store, "unkeyed": self.unkeyed, "first_jobs": self.first}


def _store_view(cfg: SweepConfig) -> StoreView | None:
    if cfg.store is None:
        return None
    from fasteval.store.reader import StoreError, open_view
    from fasteval.store.segments import MARKER

    if not (cfg.store / MARKER).exists():
        return None
    try:
        return open_view(cfg.store)
    except (OSError, StoreError):
        return None


def preview(cfg: SweepConfig, opts: RunOptions, first: int = 10) -> PlanPreview:
    """Count the plan exactly as ``run`` would walk it (same selectors, shard, resume and reuse rules).

    Counted per group from the tasks (``plan_combos``); the plan is keyed against the folder's
    resume array a block at a time, so only the jobs this folder does not hold are built (and
    sorted into store, changed and new): a finished million-job folder builds none.
    """
    records = opts.run_dir / RECORDS
    finished: Container[str] = frozenset()
    out = PlanPreview(store=str(cfg.store) if cfg.store is not None else None)
    if records.exists():  # the resume set from the run index (a derived file), never the records themselves
        with open_index(opts.run_dir) as index:
            finished = index.done_keys(ok_only=not opts.keep_errors) if index.stats()["jobs"] else frozenset()
            out.unkeyed = index.stats()["unkeyed"]
    view = _store_view(cfg)
    with tempfile.TemporaryDirectory(prefix="fasteval-dry-run-") as tmp:
        blobs = BlobStore(Path(tmp))
        runs = [load_suite(entry, blobs) for entry in cfg.suites]
        check_setting_selectors(runs, opts.selectors)
        check_roles(cfg, runs, opts.selectors)
        ids = fingerprints(cfg, runs)
        old = (read_manifest(opts.run_dir) or {}).get("identity") if opts.run_dir.exists() else None
        out.changes = classify(old, identity_section(old, cfg, runs, ids, ""))
        out.groups = dict(plan_combos(cfg, runs, opts.shard, opts.shard_by, opts.selectors, ids))
        out.total = sum(out.groups.values())
        for (model, suite, _, _), n in out.groups.items():  # all reused, less each job left below
            out.by_model_suite.setdefault((model, suite), dict.fromkeys(STATES, 0))["reused"] += n
        out.resumed = out.total
        todo: list[Job] = []
        for job, _, _, _ in plan(cfg, runs, opts.shard, opts.shard_by, opts.selectors, done=finished, ids=ids):
            out.resumed -= 1
            out.by_model_suite[(job.model, job.suite)]["reused"] -= 1
            todo.append(job)
            if len(todo) >= CHUNK:  # matched against the store a chunk at a time: memory stays flat
                _sort_out(out, todo, view, first)
                todo = []
        _sort_out(out, todo, view, first)
    return out


def _sort_out(out: PlanPreview, todo: list[Job], view: StoreView | None, first: int) -> None:
    """Jobs this folder does not hold: from the store, changed or new."""
    in_store: set[int] = set()
    if view is not None:
        from fasteval.store.reuse import matches

        in_store = {id(j) for j, _ in matches(view, todo)}  # by object: a job id is a hash to compute
    for job in todo:
        counts = out.by_model_suite[(job.model, job.suite)]
        if id(job) in in_store:
            out.from_store += 1
            counts["store"] += 1
            continue
        change = out.changes.get((job.model, job.suite, job.setting))
        counts["changed" if change is not None and change.state == "changed" else "new"] += 1
        if len(out.first) < first:
            out.first.append({"job_id": job.job_id, "model": job.model, "suite": job.suite,
                              "setting": job.setting, "task_id": job.task_id, "seed": job.seed})
