"""``fasteval compare``: is B's score different from A's beyond noise, on the jobs both ran?

A side is one model of one run folder. Jobs are paired by suite, setting, task and seed, read
from each run's index (one small row per job; no record is opened): what only one side ran is
counted and left out. Per suite × setting, an item is a task: its score on each side is the mean
over the seeds both sides have. The difference B - A gets a paired bootstrap CI over items; where
every item is 0 or 1 on both sides, the exact McNemar test on the items that flipped decides the
verdict, else whether the CI excludes 0 does (``fasteval.view.paired_stats``).
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fasteval.runfolder.index import RunIndex, open_index
from fasteval.view.paired_stats import N_RESAMPLES, mcnemar_exact, paired_bootstrap_ci, verdict

_STEP = re.compile(r"^(?P<series>.+)@(?P<step>\d+)$")
MAX_FLIPPED = 50
"""Task ids listed per direction and group (the counts are always complete)."""


@dataclass(frozen=True, slots=True)
class Side:
    """One model of one run folder."""

    run_dir: Path
    model: str

    def label(self) -> str:
        return f"{self.run_dir}:{self.model}"


def models_of(run_dir: Path) -> list[str]:
    """The models a run folder has records of (from its index)."""
    with open_index(run_dir) as idx:
        return sorted(str(k[0]) for k in idx.counts(by=("model",)))


def checkpoint_series(models: Iterable[str]) -> dict[str, list[str]]:
    """Models named ``SERIES@STEP`` grouped by series, each in step order (``run7@500`` < ``run7@2000``)."""
    steps: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for m in models:
        hit = _STEP.match(m)
        if hit:
            steps[hit["series"]].append((int(hit["step"]), m))
    return {s: [m for _, m in sorted(v)] for s, v in sorted(steps.items()) if len(v) > 1}


def job_scores(idx: RunIndex, model: str, suite: str, setting: str) -> Iterator[tuple[tuple[str, int], float | None]]:
    """Each job's score in one suite × setting, as ((task, seed), score) in (task, seed) order; None
    for an error or an unscored record. Streamed off the key index, which covers these columns: no
    record and no row of the table is read, and nothing is held."""
    last: tuple[tuple[str, int], float | None] | None = None
    for status, score, task_id, seed in idx.select(("status", "score", "task_id", "seed"), order="key",
                                                   model=model, suite=suite, setting=setting):
        entry = ((task_id, int(seed)), float(score) if status == "ok" and score is not None else None)
        if last is not None and last[0] != entry[0]:
            yield last
        last = entry  # two jobs of one task and seed: the later one in key order, as a dict would keep
    if last is not None:
        yield last


def paired(left: Iterator[tuple[tuple[str, int], float | None]],
           right: Iterator[tuple[tuple[str, int], float | None]]) -> Iterator[tuple[str, float | None, float | None]]:
    """The jobs both streams hold (both in (task, seed) order), merged: (task, score A, score B)."""
    a, b = next(left, None), next(right, None)
    while a is not None and b is not None:
        if a[0] == b[0]:
            yield a[0][0], a[1], b[1]
            a, b = next(left, None), next(right, None)
        elif a[0] < b[0]:
            a = next(left, None)
        else:
            b = next(right, None)


def compare(a: Side, b: Side, *, alpha: float = 0.05, n_resamples: int = N_RESAMPLES) -> dict[str, Any]:
    """Per suite × setting: means, B - A with its CI, McNemar where it applies, flips, verdict.

    Both sides are streamed in (task, seed) order and merged; only the per-task means are kept.
    """
    groups: list[dict[str, Any]] = []
    n_shared = 0
    with open_index(a.run_dir) as idx_a, open_index(b.run_dir) as idx_b:
        sizes_a = {(s, st): n for (m, s, st), n in idx_a.group_sizes().items() if m == a.model}
        sizes_b = {(s, st): n for (m, s, st), n in idx_b.group_sizes().items() if m == b.model}
        for suite, setting in sorted(sizes_a.keys() & sizes_b.keys()):
            items = _PerTask()
            excluded = 0
            for task, sa, sb in paired(job_scores(idx_a, a.model, suite, setting),
                                       job_scores(idx_b, b.model, suite, setting)):
                n_shared += 1
                if sa is None or sb is None:
                    excluded += 1  # an error on either side: no score to pair
                else:
                    items.add(task, sa, sb)
            items.close()
            if items.tasks:
                groups.append(_group(suite, setting, items, excluded, alpha, n_resamples))
            elif excluded:
                groups.append({"suite": suite, "setting": setting, "n_items": 0, "n_jobs": 0,
                               "n_excluded": excluded, "verdict": "no paired jobs"})
    return {"a": {"run_dir": str(a.run_dir), "model": a.model}, "b": {"run_dir": str(b.run_dir), "model": b.model},
            "alpha": alpha, "n_shared_jobs": n_shared, "only_a": sum(sizes_a.values()) - n_shared,
            "only_b": sum(sizes_b.values()) - n_shared, "groups": groups,
            "worse": sum(1 for g in groups if g["verdict"] == "worse"),
            "better": sum(1 for g in groups if g["verdict"] == "better")}


@dataclass(slots=True)
class _PerTask:
    """Per-task means of the paired scores, folded as the merged stream passes each task (id order)."""

    tasks: list[str] = field(default_factory=list)
    xa: list[float] = field(default_factory=list)
    xb: list[float] = field(default_factory=list)
    n_jobs: int = 0
    _task: str | None = None
    _pairs: list[tuple[float, float]] = field(default_factory=list)

    def add(self, task: str, sa: float, sb: float) -> None:
        if task != self._task:
            self.close()
            self._task = task
        self._pairs.append((sa, sb))
        self.n_jobs += 1

    def close(self) -> None:
        if self._task is not None and self._pairs:
            self.tasks.append(self._task)
            self.xa.append(sum(p[0] for p in self._pairs) / len(self._pairs))
            self.xb.append(sum(p[1] for p in self._pairs) / len(self._pairs))
        self._task, self._pairs = None, []


def _group(suite: str, setting: str, items: _PerTask, n_excluded: int, alpha: float,
           n_resamples: int) -> dict[str, Any]:
    tasks, xa, xb = items.tasks, items.xa, items.xb  # id order: the CI must not depend on record order
    mean_a, mean_b = statistics.fmean(xa), statistics.fmean(xb)
    diff = mean_b - mean_a
    ci = paired_bootstrap_ci(xa, xb, alpha=alpha, n_resamples=n_resamples)
    binary = all(v in (0.0, 1.0) for v in (*xa, *xb))
    # Solved = seed-mean score >= 0.5: for 0/1 scores on one seed exactly "right" vs "wrong".
    lost = [t for t, va, vb in zip(tasks, xa, xb, strict=True) if va >= 0.5 > vb]
    gained = [t for t, va, vb in zip(tasks, xa, xb, strict=True) if vb >= 0.5 > va]
    p = mcnemar_exact(len(lost), len(gained)) if binary else None
    v = verdict(diff, ci, p, alpha, len(tasks))
    return {"suite": suite, "setting": setting, "n_items": len(tasks), "n_jobs": items.n_jobs,
            "n_excluded": n_excluded, "mean_a": mean_a, "mean_b": mean_b, "diff": diff, "ci": list(ci),
            "binary": binary, "mcnemar_p": p, "n_lost": len(lost), "n_gained": len(gained),
            "lost": lost[:MAX_FLIPPED], "gained": gained[:MAX_FLIPPED], "verdict": v.verdict, "test": v.test}
