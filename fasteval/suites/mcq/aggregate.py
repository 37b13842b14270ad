"""Tables over our records: both numbers (the reference scorer's and ours) side by side.

Every record of these suites carries ``score_details.scores = {"reference": x, "fixed": y}``:
the same reply scored by the pinned reference rule and by our fixed rule. A table gives each as
mean ± std over seeds (error records count 0, as a reference's fixed denominator does), and
the gap ``fixed - reference``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

Rec = Mapping[str, Any]
FIDELITIES = ("reference", "fixed")


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def field(r: Rec, name: str) -> Mapping[str, Any]:
    """A record's mapping field (``score_details``, ``metadata``), ``{}`` when it is anything else: a
    hand-edited or foreign record must not stop a report."""
    value = r.get(name)
    return value if isinstance(value, Mapping) else {}


def item_value(r: Rec, fidelity: str, key: str = "scores") -> float:
    """A record's score under ``fidelity`` (0 for an error record or a missing value)."""
    if r.get("status") != "ok":
        return 0.0
    scores = field(r, "score_details").get(key)
    value = scores.get(fidelity) if isinstance(scores, Mapping) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def over_seeds(records: Iterable[Rec], value: Callable[[Rec], float]) -> dict[str, Any]:
    """Accuracy per seed, then mean ± std over seeds."""
    per_seed: dict[int, list[float]] = defaultdict(list)
    for r in records:
        per_seed[int(r.get("seed", 0))].append(value(r))
    if not per_seed:
        return {"mean": None, "std": None, "per_seed": {}, "n": 0}
    acc = {str(s): sum(v) / len(v) for s, v in sorted(per_seed.items())}
    mean, std = mean_std(list(acc.values()))
    return {"mean": mean, "std": std, "per_seed": acc, "n": sum(len(v) for v in per_seed.values())}


def both(records: Sequence[Rec], key: str = "scores", *, per_seed: bool = True) -> dict[str, Any]:
    """Reference and fixed side by side (mean and std over seeds), the gap between the means,
    and (``per_seed``) each seed's accuracy."""
    ref = over_seeds(records, lambda r: item_value(r, "reference", key))
    fixed = over_seeds(records, lambda r: item_value(r, "fixed", key))
    gap = None if ref["mean"] is None or fixed["mean"] is None else fixed["mean"] - ref["mean"]
    out: dict[str, Any] = {"reference": ref["mean"], "reference_std": ref["std"], "fixed": fixed["mean"],
                           "fixed_std": fixed["std"], "gap": gap, "n": ref["n"]}
    if per_seed:
        out["per_seed"] = {"reference": ref["per_seed"], "fixed": fixed["per_seed"]}
    return out


def grouped(records: Sequence[Rec], key_of: Callable[[Rec], str | None], key: str = "scores") -> dict[str, Any]:
    """``both`` per group, one flat row each (groups sorted; records without a key are left out)."""
    groups: dict[str, list[Rec]] = defaultdict(list)
    for r in records:
        k = key_of(r)
        if k is not None:
            groups[k].append(r)
    return {k: both(groups[k], key, per_seed=False) for k in sorted(groups)}


def meta(r: Rec, name: str) -> str | None:
    value = field(r, "metadata").get(name)
    return None if value is None else str(value)


def errors(records: Sequence[Rec]) -> int:
    return sum(1 for r in records if r.get("status") != "ok")


def by_category(records: Sequence[Rec], name: str) -> dict[str, Any]:
    """The usual suite summary: ``both`` overall, the error count, and ``both`` per value of the
    task metadata field ``name`` under ``by_category``."""
    return {**both(records), "errors": errors(records), "by_category": grouped(records, lambda r: meta(r, name))}
