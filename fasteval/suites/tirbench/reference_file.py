"""Scoring the reference harness's own output file, and the per-task-type table of our records.

``score_reference_file`` re-scores a file written by the reference ``test.py`` +
``extract_answer.py`` (a JSON object keyed "0".."N-1", each value the dataset row plus
``model_response`` and ``extracted_answer``) with our rules and no model call: identical
extractions must give identical per-item scores, which is how the port is checked against the
published harness. ``aggregate`` builds the same table from our run records.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from fasteval.suites.tirbench.loader import row_meta, row_task_type
from fasteval.suites.tirbench.scoring import TASK_TYPES, overall_accuracy, score_item


def _key_order(key: str) -> tuple[int, int | str]:
    return (0, int(key)) if key.isdigit() else (1, key)


def _table_order(task_types: Iterable[str]) -> list[str]:
    """The paper's task order first, then any other type alphabetically."""
    present = set(task_types)
    return [t for t in TASK_TYPES if t in present] + sorted(present - set(TASK_TYPES))


def score_reference_item(item: Mapping[str, Any], fidelity: str) -> tuple[str, float]:
    """(task type, score) of one entry of a reference output file, from its stored extraction."""
    task_type = str(row_task_type(item))
    meta = row_meta(item)
    meta = meta if isinstance(meta, Mapping) else {}
    value = score_item(
        task_type,
        item.get("model_response"),
        item.get("extracted_answer"),
        item.get("answer"),
        fidelity,
        {"prompt": item.get("prompt") or "", "image_1": item.get("image_1") or "",
         "difficulty": meta.get("difficulty")},
    )
    return task_type, value


def score_reference_file(path: Path, fidelity: str) -> dict[str, Any]:
    """Scores of a reference output file: ``{"items": {task_id: score}, "overall": float,
    "by_category": {task_type: mean}}``. Task ids are the rows' ``id`` (the key when absent);
    overall is Σ scores / number of entries, as the reference prints it.
    """
    data = orjson.loads(Path(path).read_bytes())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object keyed '0'..'N-1', got {type(data).__name__}")
    items: dict[str, float] = {}
    by_type: dict[str, list[float]] = defaultdict(list)
    for key in sorted(data, key=_key_order):
        item = data[key]
        if not isinstance(item, Mapping):
            raise ValueError(f"{path}: entry {key!r} is not an object")
        task_type, value = score_reference_item(item, fidelity)
        task_id = str(item["id"]) if item.get("id") is not None else key
        if task_id in items:
            raise ValueError(f"{path}: entry {key!r} repeats task id {task_id!r}")
        items[task_id] = value
        by_type[task_type].append(value)
    return {
        "items": items,
        "overall": overall_accuracy(list(items.values())),
        "by_category": {t: overall_accuracy(by_type[t]) for t in _table_order(by_type)},
    }


def _mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _accuracy_over_seeds(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Accuracy per seed (errors count 0, the reference's denominator), then mean ± std over seeds."""
    per_seed: dict[int, list[float]] = defaultdict(list)
    scored: list[float] = []
    errors = 0
    for r in records:
        ok = r.get("status") == "ok" and r.get("score") is not None
        value = float(r["score"]) if ok else 0.0
        per_seed[int(r.get("seed", 0))].append(value)
        if ok:
            scored.append(value)
        else:
            errors += 1
    seed_acc = {seed: overall_accuracy(v) for seed, v in sorted(per_seed.items())}
    mean, std = _mean_std(list(seed_acc.values()))
    return {
        "n": len(records),
        "errors": errors,
        "accuracy": mean,
        "std": std,
        "accuracy_excluding_errors": overall_accuracy(scored) if scored else None,
        "per_seed": seed_acc,
    }


def aggregate(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-task-type table from our record dicts (task_id, seed, status, score, metadata.task_type).

    For each task type and overall: accuracy = mean over seeds of Σ scores / items, with error
    records counted as 0 (as the reference's fixed denominator does) and their number reported
    next to it, plus the accuracy over scored records only.
    """
    if not records:
        raise ValueError("aggregate needs at least one record")
    by_type: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        by_type[str((r.get("metadata") or {}).get("task_type", "unknown"))].append(r)
    overall = _accuracy_over_seeds(records)
    return {
        "overall": overall["accuracy"],
        "overall_std": overall["std"],
        "errors": overall["errors"],
        "n": overall["n"],
        "per_seed": overall["per_seed"],
        "by_task_type": {t: _accuracy_over_seeds(by_type[t]) for t in _table_order(by_type)},
    }
