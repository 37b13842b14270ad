"""Reading a run folder back: status (what is left) and report (scores over seeds).

Both are public JSON interfaces (docs/run-folder.md documents them): status has top-level ``total``,
``done``, ``error``, ``remaining``; report has one row per model × suite × setting with the
mean ± std over seeds of the per-seed mean score, a 95% bootstrap CI over tasks, n_ok, n_error.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasteval.core.pricing import cost_usd, model_prices
from fasteval.runfolder.control import read_trace
from fasteval.runfolder.index import RunIndex, open_index
from fasteval.runfolder.manifest import read_manifest
from fasteval.view.completion import completion
from fasteval.view.curves import learning_curves
from fasteval.view.report_groups import (
    SUMMARY_COLUMNS as SUMMARY_COLUMNS,  # importers of report keep the names
)
from fasteval.view.report_groups import SUMMED_COLUMNS as SUMMED_COLUMNS
from fasteval.view.report_groups import TOKEN_FIELDS as TOKEN_FIELDS
from fasteval.view.report_groups import bootstrap_ci as bootstrap_ci
from fasteval.view.report_groups import fold, group_summary, resolve_ci
from fasteval.view.report_groups import prefix_cache_hit_rate as prefix_cache_hit_rate
from fasteval.view.report_groups import summarise as summarise
from providers import price_terms

if TYPE_CHECKING:  # the suites load only when a run has tables of its own
    pass

_DIMS = ("model", "suite", "setting", "seed")


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
            out.append({"model": model, "error_kind": kind, "jobs": sum(by_status.values()),
                        "example": index.error_example(model, kind)})
    return sorted(out, key=lambda e: (-e["jobs"], str(e["model"]), str(e["error_kind"])))


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


def report(run_dir: Path, *, per_task: bool = True) -> dict[str, Any]:
    """One row per model × suite × setting from the index's aggregates; the per-task figures (CI,
    pass@k) from one covered read per group; suites' tables stream their records.

    ``per_task=False`` (the leaderboard) leaves ``ci95``, ``n_tasks``, ``pass_at_k`` and ``pass_pow_k``
    out (None): everything else is read off the aggregates alone.
    """
    manifest = read_manifest(run_dir) or {}
    prices = model_prices(manifest.get("config") or {}, price_terms)
    total_cost: float | None = None
    rows = []
    # Two threads for the groups' bootstrap CIs, beside this one reading the next group (task_figures).
    with ThreadPoolExecutor(2, thread_name_prefix="bootstrap") as pool, open_index(run_dir) as index, \
            index.snapshot():
        groups = fold(index.aggregates())
        for key in sorted(groups):
            model, suite, setting = key
            row: dict[str, Any] = {"model": model, "suite": suite, "setting": setting,
                                   **group_summary(index, key, groups[key], per_task, pool)}
            price = prices.get(model)
            row["cost_usd"] = round(cost_usd(row["tokens"], price), 6) if price is not None else None
            if row["cost_usd"] is not None:
                total_cost = (total_cost or 0.0) + row["cost_usd"]
            extra = _suite_tables(index, model, suite, setting, manifest.get("suite_tables"))
            if extra:
                row["suite_metrics"] = extra
            rows.append(row)
        done = completion(run_dir, index, manifest)
        for row in rows:
            resolve_ci(row)
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
