"""The headline number of a model × suite × setting: the mean over seeds of each seed's mean score.

One definition, used by the report and by the experiment trackers, so a score in MLflow, W&B or
TensorBoard is the report's to the last digit. Error records are not scores (they are counted
apart, as ``n_error``); the spread is the sample standard deviation of the per-seed means (0 for
one seed), in seed order; each seed's mean is the exact mean rounded once, so the figure does not
depend on the order records were written, merged or indexed in.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True, slots=True)
class Headline:
    mean: float | None
    """Mean of the per-seed means; None when no job of the group was scored."""
    std: float | None
    """Sample std of the per-seed means (0.0 for one seed; None when nothing was scored)."""
    seed_means: tuple[float, ...]
    """Each seed's mean score, in seed order."""
    n_ok: int
    n_error: int

    @property
    def n_seeds(self) -> int:
        return len(self.seed_means)


def exact_mean(values: Sequence[float]) -> float:
    """The exact mean of ``values`` rounded once: it does not depend on their order.

    Each value is split into two integer limbs (multiples of 2**-31 and 2**-62, exact in binary
    floating point, as the run index's SQL splits scores), summed as integers; a value they cannot
    hold (512 or more, or bits past 2**-62) sends the whole sum through fractions instead.
    """
    total = 0
    for x in values:
        if not abs(x) < 512.0:  # large, or not finite
            break
        p = x * 2147483648.0
        a = int(p)
        rest = (p - a) * 2147483648.0
        b = int(rest)
        if rest != b:
            break
        total += (a << 31) + b
    else:
        return total / (len(values) << 62)  # int / int is correctly rounded
    if not all(math.isfinite(x) for x in values):
        return sum(values) / len(values)  # nan or inf: as a plain mean has it
    return float(sum(map(Fraction, values), Fraction(0)) / len(values))


def spread(seed_means: Sequence[float]) -> tuple[float | None, float | None]:
    """The mean of per-seed means and their sample std (0.0 for one seed; None, None for none)."""
    mean = statistics.fmean(seed_means) if seed_means else None
    std = statistics.stdev(seed_means) if len(seed_means) > 1 else 0.0 if seed_means else None
    return mean, std


def over_seeds(by_seed: Mapping[int, Sequence[float]]) -> tuple[list[float], float | None, float | None]:
    """(seed means in seed order, their mean, their sample std) of scores grouped by seed; each
    seed's mean exact (``exact_mean``), as the report's from the run index's aggregates."""
    seed_means = [exact_mean(v) for _, v in sorted(by_seed.items()) if v]
    return (seed_means, *spread(seed_means))


def headline(rows: Iterable[tuple[str, float | None, int]]) -> Headline:
    """The headline of one group from its jobs' ``(status, score, seed)``, in file order."""
    by_seed: dict[int, list[float]] = {}
    n_ok = n_error = 0
    for status, score, seed in rows:
        if status == "ok" and score is not None:
            n_ok += 1
            by_seed.setdefault(seed, []).append(score)
        else:
            n_error += 1
    seed_means, mean, std = over_seeds(by_seed)
    return Headline(mean, std, tuple(seed_means), n_ok, n_error)
