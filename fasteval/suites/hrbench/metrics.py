"""HR-Bench's two aggregations: VLMEvalKit's cycle average and circular evaluation.

- **Cycle average** (``report_acc_hrbench``, §2.3): accuracy within each ``cycle_category``
  group (``all`` and per category), then the sum over groups divided by the number of groups.
  A category missing from a group counts 0 there. It is the mean of per-rotation accuracies,
  not circular evaluation: a question need not be right under every rotation.
- **lmms-eval's cycle average** (``hrbench_aggregate_results``): the same per-cycle accuracies,
  but each metric (``average``, ``single``, ``cross``) divides by the number of cycles present in
  *its own* rows, so a category missing from a cycle is left out instead of counting 0. The two
  agree on the full release (every cycle holds both categories) and differ on partial files.
- **Circular** (ours): a question counts only when every one of its rotations is right.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

CATEGORIES = ("single", "cross")
Row = Mapping[str, Any]


def cycle_average(rows: Sequence[Row], hit: Callable[[Row], float], cycle: Callable[[Row], str],
                  category: Callable[[Row], str]) -> dict[str, Any]:
    """{"average": {all, single, cross}, "by_cycle": {cycle: {all, single, cross}}}."""
    groups: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        groups[cycle(r)].append(r)
    by_cycle: dict[str, dict[str, float]] = {}
    for c in sorted(groups):
        g = groups[c]
        table = {"all": sum(hit(r) for r in g) / len(g)}
        for cat in CATEGORIES:
            in_cat = [r for r in g if category(r) == cat]
            if in_cat:
                table[cat] = sum(hit(r) for r in in_cat) / len(in_cat)
        by_cycle[c] = table
    count = len(by_cycle)
    average = {k: sum(t.get(k, 0.0) for t in by_cycle.values()) / count for k in ("all", *CATEGORIES)} if count else {}
    return {"average": average, "by_cycle": by_cycle}


def lmms_cycle_average(rows: Sequence[Row], hit: Callable[[Row], float], cycle: Callable[[Row], str],
                       category: Callable[[Row], str]) -> dict[str, Any]:
    """``cycle_average``'s shape, each average over the cycles its category appears in."""
    out = cycle_average(rows, hit, cycle, category)
    tables = list(out["by_cycle"].values())
    for k in ("all", *CATEGORIES):
        present = [t[k] for t in tables if k in t]
        if present:
            out["average"][k] = sum(present) / len(present)
        else:
            out["average"].pop(k, None)
    return out


def circular(rows: Sequence[Row], hit: Callable[[Row], float], group: Callable[[Row], str],
             category: Callable[[Row], str]) -> dict[str, Any]:
    """Share of questions right under all their rotations: {"all", "single", "cross", "questions"}."""
    groups: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        groups[group(r)].append(r)
    if not groups:
        return {"all": None, "questions": 0}
    ok = {g: all(hit(r) == 1.0 for r in rs) for g, rs in groups.items()}
    out: dict[str, Any] = {"all": sum(ok.values()) / len(ok), "questions": len(ok)}
    for cat in CATEGORIES:
        in_cat = [g for g, rs in groups.items() if category(rs[0]) == cat]
        if in_cat:
            out[cat] = sum(ok[g] for g in in_cat) / len(in_cat)
    return out
