"""Reading a run folder back: status (what is left) and report (scores over seeds).

Both are public JSON interfaces (docs/run-folder.md documents them): status has top-level ``total``,
``done``, ``error``, ``remaining``; report has one row per model × suite × setting with the
mean ± std over seeds of the per-seed mean score, a 95% bootstrap CI over tasks, n_ok, n_error.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasteval.core.headline import over_seeds
from fasteval.core.pricing import cost_usd, model_prices
from fasteval.runfolder.control import read_trace
from fasteval.runfolder.index import RunIndex, open_index
from fasteval.runfolder.index_rows import BATCH_TOKEN_COLUMNS
from fasteval.runfolder.manifest import read_manifest
from fasteval.view.completion import completion
from fasteval.view.curves import learning_curves
from providers import price_terms

if TYPE_CHECKING:  # the suites load only when a run has tables of its own
    pass

_DIMS = ("model", "suite", "setting", "seed")
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")


def status(run_dir: Path) -> dict[str, Any]:
    """Counts per dimension from the run index: no record is read."""
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise FileNotFoundError(f"{run_dir} is not a run folder (no manifest.json)")
    plan = manifest.get("plan") or {}
    out: dict[str, Any] = {"run_dir": str(run_dir), "config_hash": manifest.get("config_hash")}
    with open_index(run_dir) as index:
        grouped = index.counts(by=_DIMS)
        stats = index.stats()
        out["bad_lines"] = stats["bad_lines"]  # lines of records.jsonl no reader takes as a record
        out["superseded"] = stats["superseded"]  # records kept aside: their entry's fingerprint changed

    def counts(total: int | None, by_status: dict[str, int]) -> dict[str, int]:
        done = by_status.get("ok", 0)
        err = sum(n for s, n in by_status.items() if s != "ok")
        total = done + err if total is None else total
        return {"total": total, "done": done, "error": err, "remaining": max(0, total - done - err)}

    overall: dict[str, int] = defaultdict(int)
    per_dim: dict[str, dict[str, dict[str, int]]] = {d: defaultdict(lambda: defaultdict(int)) for d in _DIMS}
    for key, by_status in grouped.items():
        for st, n in by_status.items():
            overall[st] += n
            for dim, value in zip(_DIMS, key, strict=True):  # a setting is its suite's: suite/setting
                per_dim[dim][f"{key[1]}/{value}" if dim == "setting" else str(value)][st] += n
    out.update(counts(int(plan["total"]) if "total" in plan else None, overall))
    out["errors_by_kind"] = errors_by_kind(run_dir)
    control = read_trace(run_dir)
    if control:  # changed mid-run with `fasteval ctl`: figures measured under changed limits say so
        out["control"] = control
    for dim in _DIMS:
        totals: dict[str, int] = plan.get(f"by_{dim}") or {}
        if dim == "setting" and any("/" not in k for k in totals):
            totals = {}  # a plan written when settings of all suites were counted together: not split
        keys = sorted(set(totals) | set(per_dim[dim]))
        out[f"by_{dim}"] = {k: counts(int(totals[k]) if k in totals else None, per_dim[dim].get(k, {}))
                            for k in keys}
    return out


def errors_by_kind(run_dir: Path) -> list[dict[str, Any]]:
    """Errored jobs per model × error_kind, most frequent first, each with one example message."""
    out = []
    with open_index(run_dir) as index:
        for (model, kind), by_status in index.counts(by=("model", "error_kind"), status="error").items():
            example = next(index.rows(model=model, error_kind=kind, status="error", limit=1), None)
            out.append({"model": model, "error_kind": kind, "jobs": sum(by_status.values()),
                        "example": example.error if example is not None else None})
    return sorted(out, key=lambda e: (-e["jobs"], str(e["model"]), str(e["error_kind"])))


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


SUMMARY_COLUMNS = ("status", "score", "seed", "task_id", "termination", "error_kind", "task_type", "latency_s")
SUMMED_COLUMNS = ("tool_calls", *TOKEN_FIELDS, *BATCH_TOKEN_COLUMNS, "image_tokens")


def summarise(rows: Iterable[tuple[Any, ...]], sums: Sequence[int]) -> dict[str, Any]:
    """Mean ± std over seeds, CI, pass@k / pass^k, error and termination counts of one group.

    ``rows`` are one group's index tuples of SUMMARY_COLUMNS in file order (``RunIndex.select``)
    and ``sums`` its count and integer sums of SUMMED_COLUMNS (``RunIndex.sums``): no record is
    read. File order matters: float sums (per seed, per task, latency) add in the order the
    records were written, so the figures do not depend on how the index stores rows.
    """
    by_seed: dict[int, list[float]] = defaultdict(list)
    by_task: dict[str, list[float]] = defaultdict(list)
    by_type: dict[str, list[float]] = defaultdict(list)
    terminations: dict[str, int] = defaultdict(int)
    errors: dict[str, int] = defaultdict(int)
    n_ok = n_err = 0
    latency = 0.0
    for status_, score, seed, task_id, termination, error_kind, task_type, latency_s in rows:
        terminations[str(termination)] += 1
        latency += latency_s
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
    # The part batch APIs billed (priced at the batch factor), shown only for groups that batched.
    tokens.update((k, v) for k, v in zip(BATCH_TOKEN_COLUMNS, token_sums[len(TOKEN_FIELDS):], strict=True) if v)
    seed_means, mean, std = over_seeds(by_seed)  # the one headline rule (the trackers log it too)
    # Tasks in id order: the CI must not depend on the order records were written (shards, merge).
    per_task = [sum(v) / len(v) for _, v in sorted(by_task.items())]
    ci = bootstrap_ci(per_task)
    k = len(by_seed)
    return {
        "mean": mean, "std": std, "n_seeds": k, "seed_means": seed_means, "ci95": list(ci) if ci else None,
        "n_ok": n_ok, "n_error": n_err, "n_tasks": len(by_task),
        "pass_at_k": (sum(1 for v in by_task.values() if max(v) >= 1.0) / len(by_task)) if by_task else None,
        "pass_pow_k": (sum(1 for v in by_task.values() if min(v) >= 1.0 and len(v) == k) / len(by_task))
        if by_task else None,
        "terminations": dict(terminations), "errors": dict(errors), "tokens": tokens,
        "prefix_cache_hit_rate": prefix_cache_hit_rate(tokens),
        "mean_latency_s": latency / n_rows if n_rows else None,
        "tool_calls_per_trajectory": tool_calls / n_rows if n_rows else None,
        # Part of prompt_tokens; only servers that count them say (vLLM with --enable-prompt-tokens-details).
        "image_tokens_per_trajectory": image_tokens / n_rows if n_rows and image_tokens else None,
        "by_task_type": {k: sum(v) / len(v) for k, v in sorted(by_type.items())},
    }


def prefix_cache_hit_rate(tokens: dict[str, int]) -> float | None:
    """Prompt tokens a prefix cache served / prompt tokens, as the server counted them per request
    (vLLM with --enable-prompt-tokens-details, APIs' cached tokens); None when none were reported."""
    prompt, cached = tokens.get("prompt_tokens", 0), tokens.get("cache_read_tokens", 0)
    return round(cached / prompt, 4) if prompt and cached else None


def aggregate_input(record: dict[str, Any]) -> dict[str, Any]:
    """What a suite's own tables read of one record: everything but the bulky trajectory parts.

    The report streams full records one at a time and keeps only this: the conversation, tool
    outputs and per-turn usage are dropped; tool calls keep name, status, error, args, turn,
    round and extra; rounds, termination and answers stay.
    """
    out = {k: v for k, v in record.items() if k != "trajectory"}
    traj = record.get("trajectory")
    if isinstance(traj, dict):
        calls = [{k: c.get(k) for k in ("name", "status", "error", "args", "turn", "round", "extra")}
                 for c in traj.get("tool_calls") or [] if isinstance(c, dict)]
        out["trajectory"] = {"tool_calls": calls, "rounds": traj.get("rounds"), "answers": traj.get("answers"),
                             "termination": traj.get("termination"),
                             "termination_reason": traj.get("termination_reason")}
    return out


def _suite_tables(index: RunIndex, model: str, suite: str, setting: str,
                  declared: list[str] | None) -> dict[str, Any] | None:
    if declared is not None and suite not in declared:
        return None  # the manifest says this suite has no tables of its own
    from fasteval.suites.base import SUITES, has_tables

    cls = SUITES.get(suite)
    if not has_tables(cls):
        return None
    items = [aggregate_input(rec) for rec in index.iter_records(model=model, suite=suite, setting=setting)]
    return cls.aggregate(items)


def report(run_dir: Path) -> dict[str, Any]:
    """One row per model × suite × setting from the index; suites' tables stream their records."""
    manifest = read_manifest(run_dir) or {}
    prices = model_prices(manifest.get("config") or {}, price_terms)
    total_cost: float | None = None
    rows = []
    with open_index(run_dir) as index, index.snapshot():
        sizes = index.group_sizes()
        total = sum(sizes.values())
        for model, suite, setting in sorted(sizes):
            # A group of many jobs is read by one scan of the table (a walk of the key index costs
            # a lookup per row); a small one through the index (a scan per group would add up).
            scan = sizes[model, suite, setting] * 8 >= total
            summary = summarise(index.select(SUMMARY_COLUMNS, scan=scan, model=model, suite=suite, setting=setting),
                                index.sums(SUMMED_COLUMNS, scan=scan, model=model, suite=suite, setting=setting))
            row: dict[str, Any] = {"model": model, "suite": suite, "setting": setting, **summary}
            price = prices.get(model)
            row["cost_usd"] = round(cost_usd(row["tokens"], price), 6) if price is not None else None
            if row["cost_usd"] is not None:
                total_cost = (total_cost or 0.0) + row["cost_usd"]
            extra = _suite_tables(index, model, suite, setting, manifest.get("suite_tables"))
            if extra:
                row["suite_metrics"] = extra
            rows.append(row)
        done = completion(run_dir, index, manifest)
    texts = (read_manifest(run_dir) or {}).get("texts") or {}
    out: dict[str, Any] = {"run_dir": str(run_dir), "completion": done, "rows": rows,
                           "cost_usd": round(total_cost, 6) if total_cost is not None else None,
                           "texts": {name: texts_label(m) for name, m in texts.items()}}
    control = read_trace(run_dir)
    if control:  # limits changed mid-run (`fasteval ctl`): latencies and throughput were measured under them
        out["control"] = control
    curves = learning_curves(rows, manifest.get("config") or {})
    if curves:  # only runs with a series (a training run's checkpoints) have a curve
        out["curves"] = curves
    return out


def texts_label(manifest: dict[str, Any]) -> str:
    """Where a suite's prompts came from, in one line: the reference files at a commit, or ours."""
    if manifest.get("mode") == "reference":
        commit = manifest.get("reference_commit") or "unknown commit"
        return f"reference texts from {manifest.get('reference_repo')} @ {str(commit)[:12]}"
    return "own wording (texts: own), not the reference's texts"
