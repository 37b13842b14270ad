"""The leaderboard across runs: every model a results store holds, per suite identity and setting.

Rows of the same shape as ``fasteval.view.report.report``'s, so ``fasteval.view.leaderboard``
builds the board (every format) unchanged. A row is one model × suite × setting *by fingerprint*:
the store's winners grouped by their component fingerprints (from the entries, no record parsed),
then each group's records read one at a time for its summary (and its suite's own tables).
Names label the groups: where one name stands for several fingerprints (a model run at two
temperatures, a suite at two data versions) the label carries the fingerprint's first 6 digits,
so two different things never share a row or a column. Each row says which runs its records came
from and when the newest was computed.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from fasteval.store.reader import StoreView, open_view
from fasteval.store.segments import COMPONENTS_AT, ENTRY
from fasteval.view.report import SUMMARY_COLUMNS, SUMMED_COLUMNS, aggregate_input, summarise


def store_report(root: Path) -> dict[str, Any]:
    """Report rows of every group the store holds (``rows``), labelled for the leaderboard."""
    view = open_view(root)
    groups = _groups(view)
    rows = [_group_row(view, idx) for idx in groups]
    _label(rows)
    rows.sort(key=lambda r: (r["model"], r["suite"], r["setting"]))
    return {"run_dir": None, "store": str(root), "rows": rows}


def _groups(view: StoreView) -> list[np.ndarray]:
    """Winner indexes per (model, suite, setting) fingerprint, each in store order."""
    if not len(view):
        return []
    # the three component fingerprints as raw bytes (S8 values read out lose trailing zero bytes)
    key = view.winners.view(np.uint8).reshape(len(view), ENTRY.itemsize)[:, COMPONENTS_AT:COMPONENTS_AT + 24]
    order = view.in_store_order()
    _, inverse = np.unique(key[order], axis=0, return_inverse=True)
    inverse = inverse.ravel()
    by: dict[int, list[int]] = defaultdict(list)
    for pos, g in zip(order.tolist(), inverse.tolist(), strict=True):
        by[g].append(pos)
    return [np.array(v, dtype=np.int64) for _, v in sorted(by.items())]


def _group_row(view: StoreView, idx: np.ndarray) -> dict[str, Any]:
    rows: list[tuple[Any, ...]] = []
    sums = [0] * (1 + len(SUMMED_COLUMNS))  # the count, then SUMMED_COLUMNS as RunIndex.sums gives them
    items: list[dict[str, Any]] = []
    runs: dict[str, str] = {}
    labels: dict[str, Any] = {}
    comp: dict[str, str] = {}
    for i in idx.tolist():
        doc = view.read(i)
        if doc is None:
            continue
        rec, stored = doc["record"], doc.get("stored") or {}
        at = str(stored.get("at") or "")
        if at >= str(labels.get("at", "")):
            labels = {"model": rec.get("model"), "suite": rec.get("suite"), "setting": rec.get("setting"), "at": at}
            comp = rec.get("components") if isinstance(rec.get("components"), dict) else {}
        run = str(stored.get("run") or "?")
        runs[run] = max(runs.get(run, ""), at)
        meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
        values = {**rec, "task_type": meta.get("task_type"), "latency_s": float(rec.get("latency_s") or 0.0)}
        rows.append(tuple(values.get(c) for c in SUMMARY_COLUMNS))
        usage = rec.get("usage") if isinstance(rec.get("usage"), dict) else {}
        sums[0] += 1
        for k, name in enumerate(SUMMED_COLUMNS):
            value = rec.get(name) if name == "tool_calls" else usage.get(name, 0)
            sums[1 + k] += value if isinstance(value, int) and not isinstance(value, bool) else 0
        items.append(aggregate_input(rec))
    row: dict[str, Any] = {"model": str(labels.get("model")), "suite": str(labels.get("suite")),
                           "setting": str(labels.get("setting")), **summarise(rows, sums)}
    row["components"] = comp
    row["origin"] = {"runs": sorted(runs), "date": max(runs.values()) if runs else None}
    extra = _suite_tables(str(labels.get("suite")), items)
    if extra:
        row["suite_metrics"] = extra
    return row


def _suite_tables(suite: str, items: list[dict[str, Any]]) -> dict[str, Any] | None:
    from fasteval.suites.base import SUITES, has_tables

    cls = SUITES.get(suite)
    return cls.aggregate(items) if has_tables(cls) and cls is not None else None


def _label(rows: list[dict[str, Any]]) -> None:
    """Names that stand for several fingerprints get the fingerprint's first 6 digits."""
    for kind, keys in (("model", ("model",)), ("suite", ("suite",)), ("setting", ("suite", "setting"))):
        fps: dict[tuple[str, ...], set[str]] = defaultdict(set)
        for r in rows:
            fps[tuple(r[k] for k in keys)].add(str(r["components"].get(kind, "")))
        for r in rows:
            if len(fps[tuple(r[k] for k in keys)]) > 1:
                r[f"{kind}_fingerprint"] = str(r["components"].get(kind, ""))
        for r in rows:
            if f"{kind}_fingerprint" in r:
                r[kind] = f"{r[kind]} [{r[f'{kind}_fingerprint'][:6]}]"
