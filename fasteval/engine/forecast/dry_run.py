"""``fasteval run --dry-run``: what a run would do, without running it or touching the run folder.

Suites are loaded into a throwaway blob store (task ids need the data), the plan is counted by
model × suite × setting × seed, and the run index (if the folder has records) says what resume would skip.
"""

from __future__ import annotations

import tempfile
from collections.abc import Container
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from fasteval.config.load import SweepConfig
from fasteval.engine.plan import RunOptions, check_roles, check_setting_selectors, load_suite, plan, plan_left
from fasteval.runfolder.blobs import BlobStore
from fasteval.runfolder.index import open_index
from fasteval.runfolder.records import RECORDS


@dataclass(slots=True)
class PlanPreview:
    total: int = 0
    resumed: int = 0
    """Jobs the run folder already holds (ok, or any status with keep_errors): resume skips them."""
    groups: dict[tuple[str, str, str, int], int] = field(default_factory=dict)
    first: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "resumed": self.resumed, "to_run": self.total - self.resumed,
                "groups": [{"model": m, "suite": s, "setting": st, "seed": sd, "jobs": n}
                           for (m, s, st, sd), n in self.groups.items()],
                "first_jobs": self.first}


def preview(cfg: SweepConfig, opts: RunOptions, first: int = 10) -> PlanPreview:
    """Count the plan exactly as ``run`` would walk it (same selectors, shard and resume rule).

    Counted per group without building a job (``plan_left``); only the first jobs left are built.
    """
    records = opts.run_dir / RECORDS
    finished: Container[str] = frozenset()
    if records.exists():  # the resume set from the run index (a derived file), never the records themselves
        with open_index(opts.run_dir) as index:
            finished = index.done_keys(ok_only=not opts.keep_errors)
    out = PlanPreview()
    with tempfile.TemporaryDirectory(prefix="fasteval-dry-run-") as tmp:
        blobs = BlobStore(Path(tmp))
        runs = [load_suite(entry, blobs) for entry in cfg.suites]
        check_setting_selectors(runs, opts.selectors)
        check_roles(cfg, runs, opts.selectors)
        out.groups = dict(plan_left(cfg, runs, opts.shard, opts.shard_by, opts.selectors))
        out.total = sum(out.groups.values())
        if finished:
            left = plan_left(cfg, runs, opts.shard, opts.shard_by, opts.selectors, finished)
            out.resumed = out.total - sum(left.values())
        left_any = out.total > out.resumed  # else the walk for the first jobs would key the whole plan again
        for job, _, _, _ in islice(plan(cfg, runs, opts.shard, opts.shard_by, opts.selectors, finished),
                                   first if left_any else 0):
            out.first.append({"job_id": job.job_id, "model": job.model, "suite": job.suite,
                              "setting": job.setting, "task_id": job.task_id, "seed": job.seed})
    return out
