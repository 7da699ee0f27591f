"""Two training recipes compared over seeds and test items: the crossed design, read with intervals.

Each arm (a recipe) is trained with the same S seeds and evaluated on the same N test items (sentences,
questions); per (seed, item) the paired outcome is ``D[s, i] = a[s, i] - b[s, i]`` in points (100 times a
0/1 correctness, or a score). Two intervals of the mean difference, each answering its own question:

- **over seeds** (the headline): Student's t over the S per-seed means ``D_s`` (``scipy.stats.t``, S - 1
  degrees of freedom). It treats the items as fixed: "would another seed differ, *on these items*".
- **crossed** (seeds and items both random): the mean's variance in the two-way random-effects model
  ``D[s, i] = delta + u_s + v_i + e_si``, ``Var(mean) = s_u^2 / S + s_v^2 / N + s_e^2 / (S N)``, estimated
  from the mean squares of the two-way analysis of variance without replication (method of moments, each
  component clamped at 0), with Satterthwaite's (1946) degrees of freedom for the t quantile, at most S - 1
  where the seeds' component is estimated (Satterthwaite's alone covered 93.4% of 3,000 simulated nulls with
  seed and item components of one size, 5 seeds x 400 items; capped, 94.7% to 97.4% over six settings,
  tests/test_paired_comparison.py). It answers
  "would another seed differ *on the task*": an item's outcomes stay linked across seeds (the same 400
  sentences under every seed are not 2,000 independent trials).

**The reading rule**: a direction ("A better", "B better") only where both intervals exclude 0 on the same
side; otherwise "no difference shown", with what the run excludes (:func:`excluded`: an advantage beyond
the crossed interval's bounds is unlikely). Pooled McNemar counts over the S x N pairs
(:func:`discordant_counts`) describe the items; they are not a test (they ignore the seeds' variance).

**Sensitivity**: the smallest difference the *rule* finds with 80% probability (:func:`detectable`),
by simulation of the crossed model with the variance components this run estimated; seeds needed
(:func:`seeds_needed`: the noncentral t of the paired t over seeds) and items needed
(:func:`items_needed`: paired proportions, independent items) at 80% power. **Several comparisons**:
Holm's step-down adjustment within a page, Benjamini-Hochberg's across a table (:func:`adjusted`,
``statsmodels``). References: Owen 2007 (crossed designs); Dror et al. 2018; Card et al. 2020.
"""

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

#: the two-sided level of every interval and test here
ALPHA = 0.05
#: the power that sensitivity figures are given at
POWER = 0.8


def outcome_matrix(a: Dict[int, Sequence[float]], b: Dict[int, Sequence[float]], scale: float = 100.0) -> np.ndarray:
    """``D`` (seeds x items, in points): ``a[seed][i] - b[seed][i]`` for the seeds both arms have, in seed order.
    ``a`` and ``b`` map a seed to its outcomes on the items (0/1 correctness, a string of '0'/'1' too, or scores);
    every seed must hold the same number of items in both arms."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError("outcome_matrix: the arms share no seed")
    rows = []
    for seed in seeds:
        x, y = (np.array([float(c) for c in side[seed]]) for side in (a, b))
        if x.size != y.size or (rows and x.size != rows[0].size) or x.size == 0:
            raise ValueError(f"outcome_matrix: seed {seed} has {x.size} and {y.size} items (every seed and arm needs "
                             f"the same items{f', {rows[0].size}' if rows else ''})")
        rows.append(scale * (x - y))
    return np.vstack(rows)


@dataclass
class MeanSquares:
    """The two-way analysis of variance of ``D`` (seeds x items) without replication."""
    seeds: int
    items: int
    seed: float  #: between seeds, S - 1 degrees of freedom: E = s_e^2 + N s_u^2
    item: float  #: between items, N - 1: E = s_e^2 + S s_v^2
    residual: float  #: (S - 1)(N - 1): E = s_e^2

    @classmethod
    def of(cls, d: np.ndarray) -> "MeanSquares":
        d = np.asarray(d, dtype=float)
        if d.ndim != 2 or d.shape[0] < 2 or d.shape[1] < 2:
            raise ValueError(f"MeanSquares: need at least 2 seeds and 2 items, got shape {d.shape}")
        s, n = d.shape
        grand = d.mean()
        seed_means, item_means = d.mean(axis=1), d.mean(axis=0)
        residual = d - seed_means[:, None] - item_means[None, :] + grand
        return cls(s, n, n * ((seed_means - grand) ** 2).sum() / (s - 1),
                   s * ((item_means - grand) ** 2).sum() / (n - 1),
                   (residual ** 2).sum() / ((s - 1) * (n - 1)))

    def components(self) -> Tuple[float, float, float]:
        """``(s_u^2, s_v^2, s_e^2)``: the seed, item and residual variance components, each at least 0."""
        return (max(0.0, (self.seed - self.residual) / self.items),
                max(0.0, (self.item - self.residual) / self.seeds), self.residual)

    def variance_of_mean(self) -> Tuple[float, float]:
        """``(Var(mean D), degrees of freedom)`` in the crossed model, from the clamped components, with
        Satterthwaite's degrees of freedom of the linear combination of mean squares it is."""
        s, n = self.seeds, self.items
        terms = []  # (coefficient x mean square, its degrees of freedom)
        if self.seed >= self.residual:
            terms.append((self.seed, s - 1))
        if self.item >= self.residual:
            terms.append((self.item, n - 1))
        if len(terms) == 2:
            terms.append((-self.residual, (s - 1) * (n - 1)))
        elif not terms:
            terms.append((self.residual, (s - 1) * (n - 1)))
        total = sum(value for value, _ in terms)
        if total <= 0:
            return 0.0, math.inf
        df = total ** 2 / sum(value ** 2 / degrees for value, degrees in terms)
        if self.seed >= self.residual:  # at most S - 1 where the seeds' component counts (module docstring)
            df = min(df, s - 1)
        return total / (s * n), df


def t_interval(mean: float, variance: float, df: float, alpha: float = ALPHA) -> Tuple[float, float]:
    """``mean ± t_{1 - alpha/2, df} sqrt(variance)`` (a point where the variance is 0)."""
    from scipy import stats

    if variance <= 0:
        return mean, mean
    half = stats.t.ppf(1 - alpha / 2, df) * math.sqrt(variance)
    return mean - half, mean + half


def seed_interval(d: np.ndarray, alpha: float = ALPHA) -> Tuple[float, float]:
    """The t interval of the mean over the per-seed means (the items fixed); NaNs with fewer than 2 seeds."""
    means = np.asarray(d, dtype=float).mean(axis=1)
    if means.size < 2:
        return math.nan, math.nan
    return t_interval(float(means.mean()), float(means.var(ddof=1)) / means.size, means.size - 1, alpha)


def crossed_interval(d: np.ndarray, alpha: float = ALPHA) -> Tuple[float, float]:
    """The interval of the mean with seeds and items both random (:class:`MeanSquares`); NaNs with fewer than
    2 seeds."""
    d = np.asarray(d, dtype=float)
    if d.shape[0] < 2:
        return math.nan, math.nan
    variance, df = MeanSquares.of(d).variance_of_mean()
    return t_interval(float(d.mean()), variance, df, alpha)


def reading(seed: Tuple[float, float], crossed: Tuple[float, float]) -> str:
    """"A better" or "B better" only where both intervals exclude 0 on that side; else "no difference shown"."""
    intervals = (seed, crossed)
    if any(math.isnan(low) for low, _ in intervals):
        return "no difference shown"
    if all(low > 0 for low, _ in intervals):
        return "A better"
    if all(high < 0 for _, high in intervals):
        return "B better"
    return "no difference shown"


def excluded(crossed: Tuple[float, float], digits: int = 1) -> str:
    """What the crossed interval rules out, in words: an advantage of either arm beyond its bounds is unlikely."""
    low, high = crossed
    if math.isnan(low):
        return "nothing (fewer than 2 seeds)"
    parts = []
    if high > 0:
        parts.append(f"an advantage of A above {high:.{digits}f} points")
    if low < 0:
        parts.append(f"an advantage of B above {-low:.{digits}f} points")
    return (" or ".join(parts) + " is unlikely") if parts else "no advantage of either arm beyond 0 points"


def seed_p(d: np.ndarray) -> float:
    """Two-sided p of the paired t over seeds (``scipy.stats.ttest_1samp`` of the per-seed means against 0)."""
    from scipy import stats

    means = np.asarray(d, dtype=float).mean(axis=1)
    if means.size < 2:
        return math.nan
    if np.all(means == means[0]):
        return 1.0 if means[0] == 0 else 0.0
    return float(stats.ttest_1samp(means, 0.0).pvalue)


def discordant_counts(d: np.ndarray) -> Tuple[int, int]:
    """``(A only right, B only right)`` over every (seed, item) pair of 0/1 outcomes in points: a description of
    the items (pooled McNemar counts), not a test."""
    d = np.asarray(d)
    return int((d > 0).sum()), int((d < 0).sum())


# ---- sensitivity --------------------------------------------------------------------------------------------

def simulate(delta: float, components: Tuple[float, float, float], seeds: int, items: int, sims: int,
             rng: np.random.Generator) -> np.ndarray:
    """``sims`` matrices of the crossed model ``delta + u_s + v_i + e_si`` with the variance components
    ``(s_u^2, s_v^2, s_e^2)``: shape (sims, seeds, items)."""
    su, sv, se = (math.sqrt(max(0.0, c)) for c in components)
    return (delta + su * rng.standard_normal((sims, seeds, 1)) + sv * rng.standard_normal((sims, 1, items))
            + se * rng.standard_normal((sims, seeds, items)))


def rule_power(delta: float, components, seeds: int, items: int, sims: int = 400, seed: int = 0) -> float:
    """The share of simulated runs (:func:`simulate`) in which :func:`reading` names the direction of
    ``delta`` (for ``delta == 0``: either direction, the rule's false-positive rate)."""
    rng = np.random.default_rng(seed)
    named = 0
    for d in simulate(delta, components, seeds, items, sims, rng):
        verdict = reading(seed_interval(d), crossed_interval(d))
        named += verdict != "no difference shown" if delta == 0 else verdict == ("A better" if delta > 0 else
                                                                                 "B better")
    return named / sims


def detectable(components, seeds: int, items: int, power: float = POWER, sims: int = 400, seed: int = 0,
               upper: Optional[float] = None) -> float:
    """The smallest positive difference (points) that the reading rule names with probability ``power`` in
    the crossed model with these variance components (bisection over :func:`rule_power`, ``sims`` runs per
    step, the same random numbers at every step); NaN where every component is 0."""
    if seeds < 2 or not any(c > 0 for c in components):
        return math.nan
    sd = math.sqrt(components[0] / seeds + components[1] / items + components[2] / (seeds * items))
    low, high = 0.0, upper or 10.0 * sd
    while rule_power(high, components, seeds, items, sims, seed) < power:
        low, high = high, 2.0 * high
    for _ in range(20):
        middle = (low + high) / 2.0
        if rule_power(middle, components, seeds, items, sims, seed) >= power:
            high = middle
        else:
            low = middle
        if high - low < 0.01 * high:
            break
    return high


def seeds_needed(delta: float, seed_sd: float, power: float = POWER, alpha: float = ALPHA,
                 most: int = 10_000) -> Optional[int]:
    """The fewest seeds (at least 2) at which the paired t over seeds, two-sided at ``alpha``, finds a mean
    difference ``delta`` with probability ``power``, when per-seed differences spread with ``seed_sd``
    (noncentral t, ``scipy.stats.nct``); None for no difference or beyond ``most``."""
    from scipy import stats

    if delta == 0 or not seed_sd > 0:
        return None if delta == 0 else 2
    for s in range(2, most + 1):
        df = s - 1
        critical = stats.t.ppf(1 - alpha / 2, df)
        nc = abs(delta) / (seed_sd / math.sqrt(s))
        if stats.nct.sf(critical, df, nc) + stats.nct.cdf(-critical, df, nc) >= power:
            return s
    return None


def items_needed(delta: float, discordance: float, power: float = POWER, alpha: float = ALPHA) -> Optional[int]:
    """Independent paired items at which a difference of accuracy ``delta`` (points) with a share
    ``discordance`` of discordant pairs is found with probability ``power`` (McNemar's test, normal
    approximation: N = (z_{1-alpha/2} + z_power)^2 psi / delta^2, delta as a share); None for no difference."""
    from scipy import stats

    if delta == 0 or not discordance > 0:
        return None
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    return math.ceil(z ** 2 * discordance / (delta / 100.0) ** 2)


def adjusted(pvalues: Sequence[float], method: str = "holm") -> List[float]:
    """p-values adjusted for their family: ``holm`` (within a page) or ``fdr_bh`` (Benjamini-Hochberg q-values,
    across a table); NaNs are kept out of the family and returned as NaN."""
    from statsmodels.stats.multitest import multipletests

    if method not in ("holm", "fdr_bh"):
        raise ValueError(f"adjusted: method {method!r}; holm or fdr_bh")
    values = [float(p) for p in pvalues]
    present = [i for i, p in enumerate(values) if not math.isnan(p)]
    out = [math.nan] * len(values)
    if present:
        corrected = multipletests([values[i] for i in present], alpha=ALPHA, method=method)[1]
        for i, p in zip(present, corrected):
            out[i] = float(p)
    return out


# ---- one comparison ----------------------------------------------------------------------------------------

@dataclass
class Comparison:
    """Everything a page says of A − B: the means, both intervals, the p over seeds, the reading, what the run
    excludes, its sensitivity and the discordant items."""
    a: str
    b: str
    seeds: int
    items: int
    difference: float
    seed_se: float
    seed_interval: Tuple[float, float]
    crossed_interval: Tuple[float, float]
    p: float
    reading: str
    excludes: str
    components: Tuple[float, float, float]
    detectable: float
    seeds_needed: Optional[int]
    items_needed: Optional[int]
    discordant: Tuple[int, int]
    adjusted_p: float = math.nan
    extra: dict = field(default_factory=dict)


def compare(name_a: str, name_b: str, d: np.ndarray, sims: int = 400) -> Comparison:
    """The comparison of A against B from their outcome matrix ``d`` (:func:`outcome_matrix`)."""
    d = np.asarray(d, dtype=float)
    seed_means = d.mean(axis=1)
    seeds, items = d.shape
    seed_se = float(seed_means.std(ddof=1) / math.sqrt(seeds)) if seeds >= 2 else math.nan
    by_seeds, crossed = seed_interval(d), crossed_interval(d)
    components = MeanSquares.of(d).components() if seeds >= 2 and items >= 2 else (math.nan,) * 3
    difference = float(d.mean())
    seed_sd = float(seed_means.std(ddof=1)) if seeds >= 2 else math.nan
    a_only, b_only = discordant_counts(d)
    return Comparison(
        name_a, name_b, seeds, items, difference, seed_se, by_seeds, crossed, seed_p(d), reading(by_seeds, crossed),
        excluded(crossed), components,
        detectable(components, seeds, items, sims=sims) if seeds >= 2 else math.nan,
        seeds_needed(difference, seed_sd) if seeds >= 2 else None,
        items_needed(difference, (a_only + b_only) / d.size), (a_only, b_only))
