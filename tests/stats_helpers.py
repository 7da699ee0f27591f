"""Tolerances derived from the sampling distribution, not tuned until green.

Every check allows Z = 5 standard errors (two-sided false alarm about 6e-7) or a
chi-square p-value above 1e-6, so a correct implementation essentially never fails
and a bias of a few standard errors over these sample sizes is caught.
"""

import numpy as np
from scipy import stats

Z = 5.0
P_MIN = 1e-6


def assert_proportion(successes: int, trials: int, p: float, what: str) -> None:
    """Binomial(trials, p): the observed share lies within Z standard errors of p."""
    se = np.sqrt(p * (1 - p) / trials)
    observed = successes / trials
    assert abs(observed - p) <= Z * se, f"{what}: {observed:.5f} vs {p} (tolerance {Z * se:.5f})"


def assert_mean(samples, expected: float, what: str) -> None:
    """The sample mean lies within Z standard errors of ``expected``."""
    samples = np.asarray(samples, dtype=float)
    se = samples.std(ddof=1) / np.sqrt(samples.size)
    assert abs(samples.mean() - expected) <= Z * se + 1e-12, (
        f"{what}: mean {samples.mean():.5f} vs {expected} (tolerance {Z * se:.5f})")


def assert_uniform(counts, what: str) -> None:
    """Chi-square goodness of fit of ``counts`` to the uniform distribution."""
    counts = np.asarray(counts, dtype=float)
    p = stats.chisquare(counts).pvalue
    assert p > P_MIN, f"{what}: not uniform (chi-square p = {p:.2e}, counts {counts})"
