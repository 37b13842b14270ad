"""compare's statistics agree with scipy and statsmodels on generated data (dev dependencies only)."""

from __future__ import annotations

import numpy as np
import pytest

from fasteval.view.paired_stats import mcnemar_exact, paired_bootstrap_ci, verdict

scipy_stats = pytest.importorskip("scipy.stats")
contingency = pytest.importorskip("statsmodels.stats.contingency_tables")


@pytest.mark.parametrize(("b", "c"), [(0, 0), (0, 1), (1, 0), (3, 9), (9, 3), (10, 10), (0, 25), (40, 61),
                                      (250, 300), (1200, 1100), (4000, 4030), (5000, 5400)])
def test_mcnemar_exact_matches_statsmodels(b: int, c: int) -> None:
    # The concordant cells do not enter the exact test; statsmodels must agree whatever they are.
    table = np.array([[17, b], [c, 5]])
    expected = contingency.mcnemar(table, exact=True).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_mcnemar_exact_on_random_tables() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        b, c = (int(x) for x in rng.integers(0, 80, size=2))
        expected = contingency.mcnemar(np.array([[1, b], [c, 1]]), exact=True).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_mcnemar_refuses_negative_counts() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        mcnemar_exact(-1, 3)


@pytest.mark.parametrize(("n", "kind"), [(60, "binary"), (300, "binary"), (200, "fractional"), (150, "continuous")])
def test_paired_bootstrap_ci_matches_scipy(n: int, kind: str) -> None:
    rng = np.random.default_rng(n)
    if kind == "binary":
        a = (rng.random(n) < 0.4).astype(float)
        b = np.where(rng.random(n) < 0.8, a, 1 - a)  # correlated pairs, as two runs of one model are
    elif kind == "fractional":  # seed means of 5 seeds: few distinct differences, resampled by counts
        a = rng.integers(0, 6, size=n) / 5
        b = np.clip(a + rng.integers(-1, 3, size=n) / 5, 0, 1)
    else:  # IoU-like scores: every difference distinct, items resampled one by one
        a = rng.random(n)
        b = np.clip(a + rng.normal(0.03, 0.1, size=n), 0, 1)
    lo, hi = paired_bootstrap_ci(list(a), list(b), alpha=0.05, n_resamples=20_000, seed=1)
    ref = scipy_stats.bootstrap((a, b), lambda x, y, axis: np.mean(y - x, axis=axis), paired=True,
                                vectorized=True, n_resamples=20_000, method="percentile", confidence_level=0.95,
                                random_state=np.random.default_rng(2)).confidence_interval
    # Two Monte Carlo estimates of the same quantiles: equal up to resampling noise (~1% of the spread).
    width = ref.high - ref.low
    assert lo == pytest.approx(ref.low, abs=0.05 * width)
    assert hi == pytest.approx(ref.high, abs=0.05 * width)
    # The percentile interval brackets the observed mean difference.
    assert lo <= float(np.mean(b - a)) <= hi


def test_paired_bootstrap_ci_is_deterministic_and_narrower_than_unpaired() -> None:
    rng = np.random.default_rng(3)
    a = list(rng.random(400))
    b = [x + 0.02 for x in a]  # a constant shift: pairing removes all item variance
    assert paired_bootstrap_ci(a, b, seed=5) == paired_bootstrap_ci(a, b, seed=5)
    lo, hi = paired_bootstrap_ci(a, b)
    assert lo == pytest.approx(0.02) and hi == pytest.approx(0.02)
    unpaired = scipy_stats.bootstrap((np.array(b), np.array(a)), lambda x, y, axis: np.mean(x, axis=axis)
                                     - np.mean(y, axis=axis), n_resamples=2000, method="percentile",
                                     random_state=np.random.default_rng(0)).confidence_interval
    assert unpaired.low < 0 < unpaired.high  # what an unpaired test would miss


def test_paired_bootstrap_ci_refuses_unpaired_input() -> None:
    with pytest.raises(ValueError, match="equally long"):
        paired_bootstrap_ci([1.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="equally long"):
        paired_bootstrap_ci([], [])


def test_verdict_uses_mcnemar_where_it_applies_else_the_ci() -> None:
    assert verdict(0.1, (-0.01, 0.2), 0.01, 0.05, 40).verdict == "better"  # McNemar decides, not the CI
    assert verdict(-0.1, (-0.2, -0.01), 0.2, 0.05, 40).verdict == "no detectable difference"
    assert verdict(-0.1, (-0.2, -0.01), None, 0.05, 40).verdict == "worse"
    assert verdict(-0.1, (-0.2, -0.01), None, 0.05, 40).test == "bootstrap"
    assert verdict(0.05, (-0.01, 0.1), None, 0.05, 40).verdict == "no detectable difference"


def test_too_few_fractional_items_get_no_verdict_but_mcnemar_is_exact_at_any_size() -> None:
    # Three items all 0.5 better: the bootstrap CI is [0.5, 0.5], which says nothing about the population.
    few = verdict(0.5, (0.5, 0.5), None, 0.05, 3)
    assert few.verdict == "no detectable difference" and "fewer than" in few.test
    assert verdict(1.0, (1.0, 1.0), mcnemar_exact(0, 6), 0.05, 6).verdict == "better"  # p = 2/64
    assert verdict(1.0, (1.0, 1.0), mcnemar_exact(0, 5), 0.05, 5).verdict == "no detectable difference"  # p = 2/32
