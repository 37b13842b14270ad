"""Paired statistics for ``fasteval compare``: bootstrap CI of a mean difference, exact McNemar.

numpy and the standard library only (scipy is a test dependency, not a run-time one); the tests
check both against scipy and statsmodels on generated data. What they assume is written in
docs/overnight.md ("After: is the difference real?").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

N_RESAMPLES = 10_000
_DRAWS_PER_BLOCK = 2_000_000
"""Resample indices drawn at once (16 MB of int64): 20,000 items x 10,000 resamples in 100 blocks."""
_FEW_VALUES = 64
"""At most this many distinct differences (0/1 scores: 3; seed means of 5 seeds: 11) resample by counts."""


def paired_bootstrap_ci(a: Sequence[float], b: Sequence[float], *, alpha: float = 0.05,
                        n_resamples: int = N_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI (level 1 - alpha) of mean(b - a), items resampled with replacement.

    Pairs are resampled together, so what the two sides share (an item's difficulty) cancels
    out: the CI is that of the mean per-item difference. Deterministic for a given ``seed``.
    """
    if len(a) != len(b) or not a:
        raise ValueError("paired_bootstrap_ci needs two equally long, non-empty sequences")
    diffs = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    k = len(diffs)
    if k == 1:
        return float(diffs[0]), float(diffs[0])
    rng = np.random.default_rng(seed)
    values, counts = np.unique(diffs, return_counts=True)
    if len(values) <= _FEW_VALUES:
        # Resampling k items draws each distinct difference Multinomial(k, its share) times: the
        # same distribution at a cost per resample of the distinct values, not of the items.
        means = rng.multinomial(k, counts / k, size=n_resamples) @ values / k
    else:
        block = max(1, min(n_resamples, _DRAWS_PER_BLOCK // k))
        means = np.concatenate([diffs[rng.integers(0, k, size=(min(block, n_resamples - i), k))].mean(axis=1)
                                for i in range(0, n_resamples, block)])
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (b: only A solved, c: only B).

    Under the null each discordant item is equally likely to go either way, so min(b, c) is
    Binomial(b + c, 1/2): p = min(1, 2 P(X <= min(b, c))). The tail is summed in log space
    (lgamma, log-sum-exp): exact integer sums cost seconds at 8,000 discordant items.
    """
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be non-negative")
    n = b + c
    if n == 0:
        return 1.0
    top = math.lgamma(n + 1)
    logs = [top - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in range(min(b, c) + 1)]
    peak = max(logs)
    log_tail = peak + math.log(math.fsum(math.exp(x - peak) for x in logs)) - n * math.log(2)
    return min(1.0, 2 * math.exp(log_tail))


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of one paired comparison of B against A at level ``alpha``."""

    verdict: str
    """``better`` (B above A), ``worse`` (B below A) or ``no detectable difference``."""
    test: str
    """``mcnemar`` (every item scored 0 or 1 on both sides) or ``bootstrap`` (the CI excludes 0)."""


MIN_BOOTSTRAP_ITEMS = 10
"""Below this many items a percentile bootstrap CI is too narrow to decide on (one item: zero width)."""


def verdict(diff: float, ci: tuple[float, float], p_mcnemar: float | None, alpha: float, n_items: int) -> Verdict:
    """McNemar decides where it applies (0/1 items), else whether the bootstrap CI excludes 0.

    The exact test is valid for any number of items; the bootstrap is not, so with fewer than
    MIN_BOOTSTRAP_ITEMS non-binary items there is no verdict but "no detectable difference".
    """
    if p_mcnemar is not None:
        test, significant = "mcnemar", p_mcnemar < alpha
    elif n_items < MIN_BOOTSTRAP_ITEMS:
        test, significant = f"bootstrap (fewer than {MIN_BOOTSTRAP_ITEMS} items: no verdict)", False
    else:
        test, significant = "bootstrap", ci[0] > 0 or ci[1] < 0
    if not significant or diff == 0:
        return Verdict("no detectable difference", test)
    return Verdict("better" if diff > 0 else "worse", test)
