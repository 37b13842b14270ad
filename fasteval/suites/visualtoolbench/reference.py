"""Score the reference harness's judge output (run_judge_*.py results JSON) without any model call.

The judge file holds verdicts but no weights, so weights come from the dataset or a
``clean_rubrics`` file; without them the file's own per-task ``score``/``accuracy`` are used.
Verdicts are read the reference's way (exact "Met" / "Not Met"), so published numbers can be
recomputed; a verdict string the reference would crash on becomes an error on that item only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .loader import domain_of, load_rubric_weights
from .metrics import VerdictRow, rubric_score, score_tables

Weights = Mapping[str, list[dict[str, float]]]


def _reference_met(raw: Any) -> bool | None:
    """The reference's reading: json.loads, then an exact comparison on judge_result. A reply with
    no judge_result key makes the reference's grade_responses raise KeyError and lose the chunk:
    the task is dropped here too (an error on it), as the live judge drops it."""
    obj = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(obj, dict):
        raise ValueError(f"verdict is not a JSON object: {str(raw)[:80]!r}")
    if "judge_result" not in obj:
        raise KeyError("the judge reply has no judge_result key (the reference raises KeyError and loses the chunk)")
    result = obj["judge_result"]
    return True if result == "Met" else False if result == "Not Met" else None


def _turn_verdicts(judge_result: Any) -> list[list[dict[str, Any]]]:
    if not isinstance(judge_result, list):
        raise ValueError("judge_result is not a list")
    if judge_result and all(isinstance(t, list) for t in judge_result):
        return judge_result  # multi-turn: one list per turn
    return [judge_result]


def _score_row(row: dict[str, Any], weights: Weights | None) -> dict[str, Any]:
    task_id = str(row["task_id"])
    if weights is None:
        return {"ars": float(row["score"]), "apr": float(row["accuracy"]), "source": "stored"}
    if task_id not in weights:
        raise ValueError("no rubric weights for this task")
    task_weights = weights[task_id]
    turns = _turn_verdicts(row.get("judge_result"))
    if len(turns) > len(task_weights):
        raise ValueError(f"{len(turns)} verdict turns but {len(task_weights)} rubric turns")
    scored: list[list[VerdictRow]] = []
    for t, turn in enumerate(turns):
        rows: list[VerdictRow] = []
        for v in turn:
            if not isinstance(v, dict) or "judge_result" not in v:
                continue  # the reference drops a verdict without judge_result: no weight either way
            rid = str(v.get("rubric_id"))
            if rid not in task_weights[t]:
                raise ValueError(f"turn {t}: rubric {rid} is not in the rubrics")
            rows.append((task_weights[t][rid], _reference_met(v.get("judge_result"))))
        scored.append(rows)
    return {**rubric_score(scored), "source": "verdicts"}


def score_reference_file(
    path: str | Path | Sequence[str | Path],
    rubrics: str | Path | Weights | None = None,
) -> dict[str, Any]:
    """APR/ARS of reference judge output, overall and by domain, eval focus and turn case.

    ``path`` may be several files (the single- and multi-turn runs): tasks are pooled, so the
    overall is the task-level mean over both. ``rubrics`` is the dataset (parquet or
    dataset.json), a clean_rubrics file, or a ready mapping task_id -> [{rubric_id: weight}].
    Returns ``items`` (task_id -> APR pass), ``overall`` (APR), ``by_category`` (APR per domain),
    full ``ars`` / ``apr`` tables, and ``errors`` (task_id -> why it could not be scored).
    """
    paths = [path] if isinstance(path, str | Path) else list(path)
    weights = load_rubric_weights(rubrics) if isinstance(rubrics, str | Path) else rubrics
    records: list[dict[str, Any]] = []
    items: dict[str, float] = {}
    details: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    mismatches: list[str] = []
    for p in paths:
        rows = json.loads(Path(p).read_text(encoding="utf-8"))
        if not isinstance(rows, list):
            raise ValueError(f"{p}: expected a JSON array of judge results")
        for row in rows:
            task_id = str(row.get("task_id"))
            category = str(row.get("prompt_category", ""))
            meta = {"prompt_category": category, "domain": domain_of(category),
                    "eval_focus": row.get("eval_focus", "unknown"), "turncase": row.get("turncase", "unknown")}
            try:
                result = _score_row(row, weights)
            except (ValueError, KeyError, TypeError) as e:
                errors[task_id] = f"{type(e).__name__}: {e}"
                records.append({"task_id": task_id, "status": "error", "metadata": meta, "score_details": {}})
                continue
            items[task_id] = result["apr"]
            details[task_id] = {"ars": result["ars"], "apr": result["apr"]}
            if "accuracy" in row and result["source"] == "verdicts" and (
                float(row["accuracy"]) != result["apr"] or abs(float(row["score"]) - result["ars"]) > 1e-9
            ):
                mismatches.append(task_id)
            records.append({"task_id": task_id, "seed": 0, "status": "ok", "metadata": meta,
                            "score_details": {"ars": result["ars"], "apr": result["apr"]}})
    tables = score_tables(records)

    def metric(name: str) -> dict[str, Any]:
        return {
            "overall": tables["overall"][name],
            **{f"by_{k}": {g: v[name] for g, v in tables[f"by_{k}"].items()}
               for k in ("domain", "eval_focus", "turncase")},
        }

    return {
        "items": items,
        "overall": tables["overall"]["apr"],
        "by_category": {g: v["apr"] for g, v in tables["by_domain"].items()},
        "ars": metric("ars"),
        "apr": metric("apr"),
        "n": tables["overall"]["n"],
        "item_details": details,
        "errors": errors,
        "stored_score_mismatches": mismatches,
    }
