"""Reading a run folder back: status (what is left) and report (scores over seeds).

Both are public JSON interfaces (docs/run-folder.md documents them): status has top-level ``total``,
``done``, ``error``, ``remaining``; report has one row per model × suite × setting with the
mean ± std over seeds of the per-seed mean score, a 95% bootstrap CI over tasks, n_ok, n_error.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from fasteval.pricing import cost_usd, model_prices
from fasteval.records import RECORDS, latest_by_job, read_manifest

TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")


def load_latest(run_dir: Path) -> list[dict[str, Any]]:
    return list(latest_by_job([run_dir / RECORDS]).values())


def status(run_dir: Path) -> dict[str, Any]:
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise FileNotFoundError(f"{run_dir} is not a run folder (no manifest.json)")
    plan = manifest.get("plan") or {}
    recs = load_latest(run_dir)
    out: dict[str, Any] = {"run_dir": str(run_dir), "config_hash": manifest.get("config_hash")}

    def counts(total: int, subset: list[dict[str, Any]]) -> dict[str, int]:
        done = sum(1 for r in subset if r.get("status") == "ok")
        err = sum(1 for r in subset if r.get("status") != "ok")
        return {"total": total, "done": done, "error": err, "remaining": max(0, total - done - err)}

    out.update(counts(int(plan.get("total", len(recs))), recs))
    for dim in ("model", "suite", "setting", "seed"):
        totals: dict[str, int] = plan.get(f"by_{dim}") or {}
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in recs:
            groups[str(r.get(dim))].append(r)
        keys = sorted(set(totals) | set(groups))
        out[f"by_{dim}"] = {k: counts(int(totals.get(k, len(groups[k]))), groups[k]) for k in keys}
    return out


def bootstrap_ci(per_task: list[float], *, n: int = 1000, seed: int = 0) -> tuple[float, float] | None:
    """95% percentile bootstrap CI of the mean over tasks (tasks resampled, seeds averaged)."""
    if len(per_task) < 2:
        return None
    rng = random.Random(seed)
    k = len(per_task)
    means = sorted(sum(per_task[rng.randrange(k)] for _ in range(k)) / k for _ in range(n))
    return means[int(0.025 * n)], means[int(0.975 * n) - 1]


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean ± std over seeds, CI, pass@k / pass^k, error and termination counts of one group."""
    by_seed: dict[int, list[float]] = defaultdict(list)
    by_task: dict[str, list[float]] = defaultdict(list)
    terminations: dict[str, int] = defaultdict(int)
    errors: dict[str, int] = defaultdict(int)
    tokens: dict[str, int] = dict.fromkeys(TOKEN_FIELDS, 0)
    n_ok = n_err = 0
    for r in records:
        terminations[str(r.get("termination"))] += 1
        for key, value in (r.get("usage") or {}).items():
            if key in tokens:
                tokens[key] += int(value or 0)
        if r.get("status") == "ok" and r.get("score") is not None:
            n_ok += 1
            by_seed[int(r["seed"])].append(float(r["score"]))
            by_task[str(r["task_id"])].append(float(r["score"]))
        else:
            n_err += 1
            errors[str(r.get("error_kind"))] += 1
    seed_means = [sum(v) / len(v) for _, v in sorted(by_seed.items())]
    by_type: dict[str, list[float]] = defaultdict(list)
    for r in records:
        kind = (r.get("metadata") or {}).get("task_type")
        if kind is not None and r.get("status") == "ok" and r.get("score") is not None:
            by_type[str(kind)].append(float(r["score"]))
    mean = statistics.fmean(seed_means) if seed_means else None
    std = statistics.stdev(seed_means) if len(seed_means) > 1 else 0.0 if seed_means else None
    per_task = [sum(v) / len(v) for v in by_task.values()]
    ci = bootstrap_ci(per_task)
    k = len(by_seed)
    return {
        "mean": mean, "std": std, "n_seeds": k, "seed_means": seed_means, "ci95": list(ci) if ci else None,
        "n_ok": n_ok, "n_error": n_err, "n_tasks": len(by_task),
        "pass_at_k": (sum(1 for v in by_task.values() if max(v) >= 1.0) / len(by_task)) if by_task else None,
        "pass_pow_k": (sum(1 for v in by_task.values() if min(v) >= 1.0 and len(v) == k) / len(by_task))
        if by_task else None,
        "terminations": dict(terminations), "errors": dict(errors), "tokens": tokens,
        "by_task_type": {k: sum(v) / len(v) for k, v in sorted(by_type.items())},
    }


def report(run_dir: Path) -> dict[str, Any]:
    recs = load_latest(run_dir)
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        groups[(r["model"], r["suite"], r["setting"])].append(r)
    import fasteval.suites  # noqa: F401  (registers the suites whose tables we may print)
    from fasteval.suites.base import SUITES, Suite

    manifest = read_manifest(run_dir) or {}
    prices = model_prices(manifest.get("config") or {})
    rows = []
    total_cost: float | None = None
    for (model, suite, setting), items in sorted(groups.items()):
        row = {"model": model, "suite": suite, "setting": setting, **summarise(items)}
        price = prices.get(model)
        row["cost_usd"] = round(cost_usd(row["tokens"], price), 6) if price is not None else None
        if row["cost_usd"] is not None:
            total_cost = (total_cost or 0.0) + row["cost_usd"]
        cls = SUITES.get(suite)
        extra = cls.aggregate(items) if isinstance(cls, type) and issubclass(cls, Suite) else None
        if extra:
            row["suite_metrics"] = extra
        rows.append(row)
    return {"run_dir": str(run_dir), "rows": rows,
            "cost_usd": round(total_cost, 6) if total_cost is not None else None}
