"""One report row's figures from the run index's aggregates, and its per-task figures from one
covered read of the key index: no job's row is read into Python.

Means of scores are exact means rounded once (``fasteval.runfolder.index_aggregates``), so a row's
numbers do not depend on the order the records were written, merged or indexed in; a group whose
scores the aggregates cannot sum exactly reads those scores one by one, with the same result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any

from fasteval.core.headline import exact_mean, over_seeds, spread
from fasteval.runfolder.index import RunIndex
from fasteval.runfolder.index_aggregates import INT_SUMS, exact_value, mean_of, mean_of_sum, saturated
from fasteval.runfolder.index_rows import BATCH_TOKEN_COLUMNS

TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")


@dataclass(slots=True)
class _Sum:
    """Scored jobs and the exact sum of their scores (limb sums; ``odd``: values read one by one)."""

    n: int = 0
    a: int = 0
    b: int = 0
    odd: int = 0

    def add(self, n: int, a: int, b: int, odd: int) -> None:
        self.n, self.a, self.b, self.odd = self.n + n, self.a + a, self.b + b, self.odd + odd

    def mean(self, index: RunIndex, **where: Any) -> float:
        if self.odd:
            return mean_of(index.scores(**where))
        return mean_of_sum(exact_value(self.a, self.b), self.n)


@dataclass(slots=True)
class GroupTotals:
    """One model × suite × setting folded from its aggregate rows."""

    n: int = 0
    scored: int = 0
    fractional: int = 0
    """Scores that are not whole numbers (or not held by the limbs): 0 lets per-task sums be plain."""
    latency_us: int = 0
    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(INT_SUMS, 0))
    overflowed: bool = False
    """An integer sum passed 64 bits (hostile token counts): ``sums`` is read off the rows instead."""
    by_seed: dict[int, _Sum] = field(default_factory=lambda: defaultdict(_Sum))
    by_type: dict[str, _Sum] = field(default_factory=lambda: defaultdict(_Sum))
    terminations: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, row: dict[str, Any]) -> None:
        n, scored = int(row["n"]), int(row["scored"])
        self.n += n
        self.scored += scored
        self.fractional += int(row["score_frac"]) + int(row["score_odd"])
        self.latency_us += int(row["latency_us"])
        for c in INT_SUMS:
            if isinstance(row[c], int):
                self.sums[c] += row[c]
            else:
                self.overflowed = True
        self.terminations[str(row["termination"])] += n
        if n - scored:  # every job that is not ok with a score counts as an error, by its kind
            self.errors[str(row["error_kind"])] += n - scored
        if scored:
            limbs = (scored, int(row["score_a"]), int(row["score_b"]), int(row["score_odd"]))
            self.by_seed[int(row["seed"])].add(*limbs)
            if row["task_type"] is not None:
                self.by_type[row["task_type"]].add(*limbs)


def fold(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str], GroupTotals]:
    """Aggregate rows (``RunIndex.aggregates``) per model × suite × setting."""
    out: dict[tuple[str, str, str], GroupTotals] = defaultdict(GroupTotals)
    for row in rows:
        out[row["model"], row["suite"], row["setting"]].add(row)
    return out


def group_summary(index: RunIndex, key: tuple[str, str, str], g: GroupTotals, per_task: bool = True,
                  pool: Executor | None = None) -> dict[str, Any]:
    """Mean ± std over seeds, errors, terminations, tokens of one group; with ``per_task``, also the
    bootstrap CI over tasks and pass@k / pass^k (one covered read of the key index). With ``pool``,
    ``ci95`` is a Future (``task_figures``) that ``resolve_ci`` replaces once every group is read."""
    model, suite, setting = key
    if g.overflowed:
        g.sums.update(zip(INT_SUMS, index.sums(INT_SUMS, scan=True, model=model, suite=suite, setting=setting)[1:],
                          strict=True))
    else:
        g.sums = {c: saturated(v) for c, v in g.sums.items()}
    seed_means = [s.mean(index, model=model, suite=suite, setting=setting, seed=seed)
                  for seed, s in sorted(g.by_seed.items())]
    k = len(seed_means)
    tokens = {f: g.sums[f] for f in TOKEN_FIELDS}
    # The part batch APIs billed (priced at the batch factor), shown only for groups that batched.
    tokens.update((c, g.sums[c]) for c in BATCH_TOKEN_COLUMNS if g.sums[c])
    mean, std = spread(seed_means)  # the one headline rule (fasteval.core.headline; the trackers log it too)
    out: dict[str, Any] = {
        "mean": mean, "std": std,
        "n_seeds": k, "seed_means": seed_means, "ci95": None,
        "n_ok": g.scored, "n_error": g.n - g.scored, "n_tasks": None, "pass_at_k": None, "pass_pow_k": None,
        "terminations": dict(g.terminations), "errors": dict(g.errors), "tokens": tokens,
        "prefix_cache_hit_rate": prefix_cache_hit_rate(tokens),
        "mean_latency_s": g.latency_us / (g.n * 1_000_000) if g.n else None,
        "tool_calls_per_trajectory": g.sums["tool_calls"] / g.n if g.n else None,
        # Part of prompt_tokens; only servers that count them say (vLLM with --enable-prompt-tokens-details).
        "image_tokens_per_trajectory": g.sums["image_tokens"] / g.n if g.n and g.sums["image_tokens"] else None,
        "by_task_type": {t: s.mean(index, model=model, suite=suite, setting=setting, task_type=t)
                         for t, s in sorted(g.by_type.items())},
    }
    if per_task:
        out.update(task_figures(index, key, k, whole_scores=not g.fractional, pool=pool))
    return out


def task_figures(index: RunIndex, key: tuple[str, str, str], k: int, whole_scores: bool = False,
                 pool: Executor | None = None) -> dict[str, Any]:
    """The per-task figures of one group: the bootstrap CI over tasks (in task-id order, so it does
    not depend on record order), pass@k and pass^k, from the tasks' sums in one streamed read.

    With ``pool`` the bootstrap runs there while the caller reads the next group: it is most of a
    report's time at 10^6 jobs (1,000 resamples of 20,000 tasks, ~0.18 s a group) and numpy draws
    and gathers without the GIL, so on 2 cores a 10-group report's bootstraps and reads overlap.
    Each CI has its own generator (seed 0), so the interval is the same however they are scheduled.
    """
    model, suite, setting = key
    means: list[float] = []
    passed = all_passed = 0
    for task_id, n, a, b, odd, best, worst in index.per_task(model, suite, setting, whole_scores):
        means.append(mean_of(index.scores(model=model, suite=suite, setting=setting, task_id=task_id)) if odd
                     else (a >> 31) / n if whole_scores else mean_of_sum(exact_value(a, b), n))
        passed += best >= 1.0
        all_passed += worst >= 1.0 and n == k
    n_tasks = len(means)
    ci95: list[float] | None | Future[list[float] | None] = (
        _ci_list(means) if pool is None else pool.submit(_ci_list, means))
    return {"ci95": ci95, "n_tasks": n_tasks,
            "pass_at_k": passed / n_tasks if n_tasks else None, "pass_pow_k": all_passed / n_tasks if n_tasks else None}


SUMMARY_COLUMNS = ("status", "score", "seed", "task_id", "termination", "error_kind", "task_type", "latency_s")
SUMMED_COLUMNS = ("tool_calls", *TOKEN_FIELDS, *BATCH_TOKEN_COLUMNS, "image_tokens")


def summarise(rows: Iterable[tuple[Any, ...]], sums: Sequence[int]) -> dict[str, Any]:
    """``group_summary``'s figures from a group's jobs one by one (the results store's records, which
    have no index): ``rows`` of SUMMARY_COLUMNS and ``sums``, the count and SUMMED_COLUMNS' sums.
    The same rules: exact means rounded once, latencies in whole microseconds."""
    by_seed: dict[int, list[float]] = defaultdict(list)
    by_task: dict[str, list[float]] = defaultdict(list)
    by_type: dict[str, list[float]] = defaultdict(list)
    terminations: dict[str, int] = defaultdict(int)
    errors: dict[str, int] = defaultdict(int)
    n_ok = n_err = latency_us = 0
    for status_, score, seed, task_id, termination, error_kind, task_type, latency_s in rows:
        terminations[str(termination)] += 1
        latency_us += int(min(max(latency_s, 0.0), 1e9) * 1_000_000 + 0.5)
        if status_ == "ok" and score is not None:
            n_ok += 1
            by_seed[seed].append(score)
            by_task[task_id].append(score)
            if task_type is not None:
                by_type[task_type].append(score)
        else:
            n_err += 1
            errors[str(error_kind)] += 1
    n_rows, tool_calls, *token_sums, image_tokens = sums
    tokens = dict(zip(TOKEN_FIELDS, token_sums, strict=False))
    tokens.update((k, v) for k, v in zip(BATCH_TOKEN_COLUMNS, token_sums[len(TOKEN_FIELDS):], strict=True) if v)
    seed_means, mean, std = over_seeds(by_seed)
    per_task = [exact_mean(v) for _, v in sorted(by_task.items())]  # id order: not the records' order
    ci = bootstrap_ci(per_task)
    k = len(seed_means)
    return {
        "mean": mean, "std": std, "n_seeds": k, "seed_means": seed_means, "ci95": list(ci) if ci else None,
        "n_ok": n_ok, "n_error": n_err, "n_tasks": len(by_task),
        "pass_at_k": (sum(1 for v in by_task.values() if max(v) >= 1.0) / len(by_task)) if by_task else None,
        "pass_pow_k": (sum(1 for v in by_task.values() if min(v) >= 1.0 and len(v) == k) / len(by_task))
        if by_task else None,
        "terminations": dict(terminations), "errors": dict(errors), "tokens": tokens,
        "prefix_cache_hit_rate": prefix_cache_hit_rate(tokens),
        "mean_latency_s": latency_us / (n_rows * 1_000_000) if n_rows else None,
        "tool_calls_per_trajectory": tool_calls / n_rows if n_rows else None,
        "image_tokens_per_trajectory": image_tokens / n_rows if n_rows and image_tokens else None,
        "by_task_type": {t: exact_mean(v) for t, v in sorted(by_type.items())},
    }


def _ci_list(per_task: list[float]) -> list[float] | None:
    ci = bootstrap_ci(per_task)
    return list(ci) if ci else None


def resolve_ci(row: dict[str, Any]) -> None:
    """A row's ``ci95`` as computed in the pool (``task_figures``), in place of its Future."""
    if isinstance(row.get("ci95"), Future):
        row["ci95"] = row["ci95"].result()


def bootstrap_ci(per_task: list[float], *, n: int = 1000, seed: int = 0) -> tuple[float, float] | None:
    """95% percentile bootstrap CI of the mean over tasks (tasks resampled, seeds averaged).

    Vectorised in blocks of resamples: 20,000 tasks x 1,000 resamples is 20M draws, which a
    Python loop takes seconds over and a single numpy array would need 160 MB for.
    """
    if len(per_task) < 2:
        return None
    import numpy as np

    rng = np.random.default_rng(seed)
    values = np.asarray(per_task, dtype=np.float64)
    k = len(values)
    block = max(1, min(n, 2_000_000 // k))
    means = np.concatenate([values[rng.integers(0, k, size=(min(block, n - i), k))].mean(axis=1)
                            for i in range(0, n, block)])
    means.sort()
    return float(means[int(0.025 * n)]), float(means[int(0.975 * n) - 1])


def prefix_cache_hit_rate(tokens: dict[str, int]) -> float | None:
    """Prompt tokens a prefix cache served / prompt tokens, as the server counted them per request
    (vLLM with --enable-prompt-tokens-details, APIs' cached tokens); None when none were reported."""
    prompt, cached = tokens.get("prompt_tokens", 0), tokens.get("cache_read_tokens", 0)
    return round(cached / prompt, 4) if prompt and cached else None
