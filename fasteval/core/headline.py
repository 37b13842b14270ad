"""The headline number of a model × suite × setting: the mean over seeds of each seed's mean score.

One definition, used by the report and by the experiment trackers, so a score in MLflow, W&B or
TensorBoard is the report's to the last digit. Error records are not scores (they are counted
apart, as ``n_error``); the spread is the sample standard deviation of the per-seed means (0 for
one seed), in seed order so the figure does not depend on the order records were written.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


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


def over_seeds(by_seed: Mapping[int, Sequence[float]]) -> tuple[list[float], float | None, float | None]:
    """(seed means in seed order, their mean, their sample std) of scores grouped by seed."""
    seed_means = [sum(v) / len(v) for _, v in sorted(by_seed.items()) if v]
    mean = statistics.fmean(seed_means) if seed_means else None
    std = statistics.stdev(seed_means) if len(seed_means) > 1 else 0.0 if seed_means else None
    return seed_means, mean, std


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
