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

**The rule's p** (:func:`rule_p`): both intervals exclude 0 on the same side exactly where the larger of the two
t tests' p values is below 0.05 (the intersection-union test); :mod:`.reading_rule` names a direction only where
that p survives Holm's adjustment over the family, otherwise "no difference shown", with what the run excludes
(:func:`excluded`: an advantage beyond the crossed interval's bounds is unlikely). Pooled McNemar counts over the
S x N pairs (:func:`discordant_counts`) describe the items; they are not a test (they ignore the seeds' variance).

**Sensitivity** of that rule, by simulation of the crossed model with the variance components this run estimated
(:class:`SimulatedRuns`: four sufficient statistics a run, 20,000 runs): the smallest difference it finds with 80%
probability at Holm's first-step level 0.05 / family (:func:`detectable`, with its Monte Carlo band
:func:`detectable_band`), and the seeds (:func:`seeds_needed`) or items (:func:`items_needed`) at which it finds a
stated difference. Multiplicity adjustments: :func:`adjusted` (``statsmodels``' Holm, or Benjamini-Hochberg).
References: Owen 2007 (crossed designs); Berger 1982 (intersection-union tests); Holm 1979; Dror et al. 2018;
Card et al. 2020.
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

    def variance_of_mean(self, cap: bool = True) -> Tuple[float, float]:
        """``(Var(mean D), degrees of freedom)`` in the crossed model, from the clamped components, with
        Satterthwaite's degrees of freedom of the linear combination of mean squares it is (:func:`crossed_variance`)."""
        variance, df = crossed_variance(np.array(self.seed), np.array(self.item), np.array(self.residual),
                                        self.seeds, self.items, cap)
        return float(variance), float(df)


def crossed_variance(seed: np.ndarray, item: np.ndarray, residual: np.ndarray, seeds: int, items: int,
                     cap: bool = True) -> Tuple[np.ndarray, np.ndarray]:
    """``(Var(mean D), degrees of freedom)`` of the crossed model from the three mean squares (arrays of any one
    shape: one run, or many simulated ones). ``S N Var = MS_seed + MS_item - MS_residual`` with each component
    clamped at 0: the seed (item) mean square enters only where it is at least the residual's, the residual alone
    where neither does; Satterthwaite's (1946) degrees of freedom of that combination, at most S - 1 where the
    seeds' component enters (``cap``; the module docstring says why). The variance is 0 (and the degrees of
    freedom infinite) where the combination is not positive."""
    s, n = seeds, items
    seed_on, item_on = seed >= residual, item >= residual
    terms = [(np.where(seed_on, seed, 0.0), s - 1), (np.where(item_on, item, 0.0), n - 1),
             (np.where(seed_on & item_on, -residual, np.where(~seed_on & ~item_on, residual, 0.0)), (s - 1) * (n - 1))]
    total = sum(value for value, _ in terms)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = total ** 2 / sum(value ** 2 / degrees for value, degrees in terms)
    df = np.where(total > 0, df, np.inf)
    if cap:
        df = np.where(seed_on, np.minimum(df, s - 1), df)
    return np.where(total > 0, total / (s * n), 0.0), df


def two_sided_p(mean: np.ndarray, variance: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Two-sided p of Student's t ``mean / sqrt(variance)`` on ``df`` degrees of freedom (``scipy.stats.t``); where
    the variance is 0, 0 for a mean other than 0 and 1 for a mean of 0 (the interval is a point)."""
    from scipy import stats

    mean, variance = np.asarray(mean, dtype=float), np.asarray(variance, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2.0 * stats.t.sf(np.abs(mean) / np.sqrt(variance), df)
    return np.where(variance > 0, p, np.where(mean == 0, 1.0, 0.0))


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


def crossed_interval(d: np.ndarray, alpha: float = ALPHA, cap: bool = True) -> Tuple[float, float]:
    """The interval of the mean with seeds and items both random (:class:`MeanSquares`); NaNs with fewer than
    2 seeds."""
    d = np.asarray(d, dtype=float)
    if d.shape[0] < 2:
        return math.nan, math.nan
    variance, df = MeanSquares.of(d).variance_of_mean(cap)
    return t_interval(float(d.mean()), variance, df, alpha)


def reading(seed: Tuple[float, float], crossed: Tuple[float, float]) -> str:
    """The direction both intervals show, *before* any adjustment for the family: "A better" or "B better" where
    both exclude 0 on that side, else "no difference shown". A page or report names a direction only through
    :mod:`.reading_rule`, which asks this of the Holm-adjusted :func:`rule_p` instead."""
    intervals = (seed, crossed)
    if any(math.isnan(low) for low, _ in intervals):
        return "no difference shown"
    if all(low > 0 for low, _ in intervals):
        return "A better"
    if all(high < 0 for _, high in intervals):
        return "B better"
    return "no difference shown"


#: the widest a difference of 0/1 outcomes in points can be: 100 (every item right in A, wrong in B)
SPAN = 100.0


def excluded(crossed: Tuple[float, float], digits: int = 1, span: float = SPAN) -> str:
    """What the crossed interval rules out, in words: an advantage of either arm beyond its bounds is unlikely; a
    bound beyond the score's range (``span`` points) rules out nothing."""
    low, high = crossed
    if math.isnan(low):
        return "nothing (fewer than 2 seeds)"
    parts = []
    if 0 < high < span:
        parts.append(f"an advantage of A above {high:.{digits}f} points")
    if 0 < -low < span:
        parts.append(f"an advantage of B above {-low:.{digits}f} points")
    if parts:
        return " or ".join(parts) + " is unlikely"
    if high >= span or -low >= span:
        return f"nothing inside the score's range (its interval reaches beyond ±{span:g} points)"
    return "no advantage of either arm beyond 0 points"


def seed_p(d: np.ndarray) -> float:
    """Two-sided p of the paired t over seeds (``scipy.stats.ttest_1samp`` of the per-seed means against 0)."""
    from scipy import stats

    means = np.asarray(d, dtype=float).mean(axis=1)
    if means.size < 2:
        return math.nan
    if np.all(means == means[0]):
        return 1.0 if means[0] == 0 else 0.0
    return float(stats.ttest_1samp(means, 0.0).pvalue)


def crossed_p(d: np.ndarray, cap: bool = True) -> float:
    """Two-sided p of the crossed t (:func:`crossed_variance`): below ``alpha`` exactly where
    :func:`crossed_interval` at ``alpha`` excludes 0; NaN with fewer than 2 seeds."""
    d = np.asarray(d, dtype=float)
    if d.shape[0] < 2:
        return math.nan
    squares = MeanSquares.of(d)
    variance, df = squares.variance_of_mean(cap)
    return float(two_sided_p(d.mean(), variance, df))


def rule_p(d: np.ndarray, cap: bool = True) -> float:
    """The p of the reading rule "both intervals exclude 0": ``max(seed p, crossed p)``, the intersection-union
    test of the two (Berger 1982). Both 95% intervals are centred on the mean of ``d``, so both exclude 0 (on the
    same side) exactly where this p is below 0.05; the family's Holm adjustment (:mod:`.reading_rule`) is applied
    to it."""
    return max(seed_p(d), crossed_p(d, cap))


def discordant_counts(d: np.ndarray) -> Tuple[int, int]:
    """``(A only right, B only right)`` over every (seed, item) pair of 0/1 outcomes in points: a description of
    the items (pooled McNemar counts), not a test."""
    d = np.asarray(d)
    return int((d > 0).sum()), int((d < 0).sum())


# ---- sensitivity --------------------------------------------------------------------------------------------

#: simulated runs behind each power figure: a power near 0.8 then has a Monte Carlo standard error of 0.003
SIMS = 20_000


def simulate(delta: float, components: Tuple[float, float, float], seeds: int, items: int, sims: int,
             rng: np.random.Generator) -> np.ndarray:
    """``sims`` matrices of the crossed model ``delta + u_s + v_i + e_si`` with the variance components
    ``(s_u^2, s_v^2, s_e^2)``: shape (sims, seeds, items)."""
    su, sv, se = (math.sqrt(max(0.0, c)) for c in components)
    return (delta + su * rng.standard_normal((sims, seeds, 1)) + sv * rng.standard_normal((sims, 1, items))
            + se * rng.standard_normal((sims, seeds, items)))


@dataclass(frozen=True)
class SimulatedRuns:
    """``sims`` runs of the crossed model with no difference, as their sufficient statistics: the mean of ``D``
    less delta and the three mean squares. In the normal model the four are independent, the mean normal with
    variance ``s_u^2/S + s_v^2/N + s_e^2/(S N)`` and each mean square its expectation times a chi-square over its
    degrees of freedom (the balanced two-way analysis of variance), so a run costs four numbers, not S x N
    (tests/test_paired_comparison.py checks the rule's power from these against whole simulated matrices)."""
    seeds: int
    items: int
    centred_mean: np.ndarray
    seed: np.ndarray
    item: np.ndarray
    residual: np.ndarray

    @classmethod
    def draw(cls, components, seeds: int, items: int, sims: int = SIMS, seed: int = 0) -> "SimulatedRuns":
        su, sv, se = (max(0.0, float(c)) for c in components)
        rng = np.random.default_rng(seed)
        sd = math.sqrt(su / seeds + sv / items + se / (seeds * items))
        df_s, df_i, df_e = seeds - 1, items - 1, (seeds - 1) * (items - 1)
        return cls(seeds, items, sd * rng.standard_normal(sims),
                   (se + items * su) * rng.chisquare(df_s, sims) / df_s,
                   (se + seeds * sv) * rng.chisquare(df_i, sims) / df_i,
                   se * rng.chisquare(df_e, sims) / df_e)

    def rule_p(self, delta: float, cap: bool = True) -> np.ndarray:
        """Each run's :func:`rule_p` with the difference ``delta`` planted, and the sign of its mean."""
        mean = self.centred_mean + delta
        s, n = self.seeds, self.items
        by_seeds = two_sided_p(mean, self.seed / (s * n), s - 1)  # the seed means' variance is MS_seed / N
        variance, df = crossed_variance(self.seed, self.item, self.residual, s, n, cap)
        return np.maximum(by_seeds, two_sided_p(mean, variance, df)), np.sign(mean)

    def power(self, delta: float, level: float = ALPHA, cap: bool = True) -> float:
        """The share of runs in which the rule at ``level`` names the direction of ``delta`` (for ``delta == 0``:
        either direction, its false-positive rate)."""
        p, sign = self.rule_p(delta, cap)
        named = p < level
        return float(np.mean(named if delta == 0 else named & (sign == np.sign(delta))))


#: the one-sided confidence of the upper bound the seeds' variance component is also read at (issue 101): the
#: plug-in figures condition on an estimate with S - 1 degrees of freedom (4 at 5 seeds)
UPPER = 0.95


def seed_component_upper(components, seeds: int, items: int, confidence: float = UPPER,
                         seed_mean_square: float = math.nan) -> Tuple[float, float, float]:
    """The variance components with the seeds' at its one-sided ``confidence`` upper bound. The seed mean square
    (expectation ``s_e^2 + N s_u^2``, S - 1 degrees of freedom) is that expectation times a chi-square over its
    degrees of freedom in the normal model (:class:`SimulatedRuns`), so with ``confidence`` the expectation is below
    ``MS_seed (S - 1) / chi2_{1 - confidence}(S - 1)``; less ``s_e^2`` (the residual mean square, with many more
    degrees of freedom, taken as known), over N, bounds ``s_u^2`` (the bound of Graybill's method for one variance
    component; never below the estimate). ``seed_mean_square``: the run's; without it, read back from the clamped
    components as ``s_e^2 + N s_u^2``, which overstates it where the seeds' component was clamped at 0, so the
    bound errs high there. The items' and residual components are kept as estimated."""
    from scipy import stats

    if seeds < 2 or items < 1 or not 0 < confidence < 1:
        raise ValueError(f"seed_component_upper: need seeds >= 2, items >= 1 and a confidence in (0, 1), got "
                         f"{seeds}, {items}, {confidence}")
    su, sv, se = (max(0.0, float(c)) for c in components)
    df = seeds - 1
    mean_square = se + items * su if math.isnan(seed_mean_square) else max(0.0, float(seed_mean_square))
    bound = mean_square * df / float(stats.chi2.ppf(1 - confidence, df))
    return max(su, (bound - se) / items), sv, se


def family_level(family: int, alpha: float = ALPHA) -> float:
    """The level at which one comparison of a family of ``family`` must be found for Holm's adjustment to name it
    whatever the others show: ``alpha / family`` (Holm rejects every p at or below it, its first step being
    Bonferroni's). Where the family's other comparisons show nothing this is the rule as applied; where some
    show a difference Holm's later steps are easier, so power computed at this level is a lower bound."""
    if family < 1:
        raise ValueError(f"family_level: a family has at least 1 comparison, got {family}")
    return alpha / family


def rule_power(delta: float, components, seeds: int, items: int, sims: int = SIMS, seed: int = 0,
               family: int = 1, cap: bool = True) -> float:
    """The probability that the reading rule, Holm-adjusted over a family of ``family`` comparisons
    (:func:`family_level`), names the direction of ``delta`` (for ``delta == 0``: either direction), by simulation
    of the crossed model (:class:`SimulatedRuns`)."""
    return SimulatedRuns.draw(components, seeds, items, sims, seed).power(delta, family_level(family), cap)


def monte_carlo_error(power: float, sims: int = SIMS) -> float:
    """The half-width of a 95% interval of a simulated share ``power`` from ``sims`` runs."""
    return 1.96 * math.sqrt(power * (1 - power) / sims)


def _smallest(predicate, start: float) -> float:
    """The smallest positive x with ``predicate(x)`` (monotone: false below, true above), to 0.1% by bisection."""
    low, high = 0.0, start
    while not predicate(high):
        low, high = high, 2.0 * high
        if high > 1e9:
            return math.inf
    while high - low > 1e-3 * high:
        middle = (low + high) / 2.0
        low, high = (low, middle) if predicate(middle) else (middle, high)
    return high


def detectable(components, seeds: int, items: int, power: float = POWER, sims: int = SIMS, seed: int = 0,
               family: int = 1) -> float:
    """The smallest positive difference (points) that the reading rule, Holm-adjusted over a family of ``family``
    (:func:`rule_power`), names with probability ``power``; one set of simulated runs for every step, so the answer
    moves monotonely with ``power`` (:func:`detectable_band`); NaN where every component is 0."""
    if seeds < 2 or not any(c > 0 for c in components):
        return math.nan
    runs = SimulatedRuns.draw(components, seeds, items, sims, seed)
    level = family_level(family)
    sd = math.sqrt(components[0] / seeds + components[1] / items + components[2] / (seeds * items))
    return _smallest(lambda delta: runs.power(delta, level) >= power, 4.0 * sd)


def detectable_band(components, seeds: int, items: int, power: float = POWER, sims: int = SIMS, seed: int = 0,
                    family: int = 1) -> Tuple[float, float]:
    """The Monte Carlo band of :func:`detectable`: the differences found with ``power`` less and more its 95%
    simulation error (:func:`monte_carlo_error`), from the same runs."""
    error = monte_carlo_error(power, sims)
    return (detectable(components, seeds, items, power - error, sims, seed, family),
            detectable(components, seeds, items, power + error, sims, seed, family))


def _fewest(found, lowest: int, most: int) -> Optional[int]:
    """The least integer n in [lowest, most] with ``found(n)`` (monotone: false below, true above); None where
    ``found(most)`` is false."""
    if not found(most):
        return None
    low, high = lowest - 1, lowest
    while not found(high):
        low, high = high, min(most, 2 * high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if found(middle) else (middle, high)
    return high


def seeds_needed(delta: float, components, items: int, family: int = 1, power: float = POWER, sims: int = SIMS,
                 seed: int = 0, most: int = 1000) -> Optional[int]:
    """The fewest seeds (at least 2) at which the reading rule, Holm-adjusted over ``family`` (:func:`rule_power`),
    finds ``delta`` with probability ``power`` on ``items`` items with these variance components; None beyond
    ``most`` (where the items' component alone keeps the crossed interval wide, no number of seeds does)."""
    if delta == 0 or not any(c > 0 for c in components):
        return None
    return _fewest(lambda s: rule_power(delta, components, s, items, sims, seed, family) >= power, 2, most)


def items_needed(delta: float, components, seeds: int, family: int = 1, power: float = POWER, sims: int = SIMS,
                 seed: int = 0, most: int = 10_000_000) -> Optional[int]:
    """The fewest items (at least 2) at which the reading rule, Holm-adjusted over ``family``, finds ``delta`` with
    probability ``power`` over ``seeds`` seeds with these variance components; None beyond ``most`` (where the
    seeds' component alone keeps the interval over seeds wide, no number of items does)."""
    if delta == 0 or seeds < 2 or not any(c > 0 for c in components):
        return None
    return _fewest(lambda n: rule_power(delta, components, seeds, n, sims, seed, family) >= power, 2, most)


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
    """Everything a page says of A − B on one split: the means, both intervals, the p values, what the run
    excludes and its sensitivity. ``reading``, ``adjusted_p``, ``family`` and ``same_as`` are the family's
    (:func:`fairseq_maskplug.evaluation.reading_rule.read_family`); :func:`compare` alone reads a family of one."""
    a: str
    b: str
    seeds: int
    items: int
    difference: float
    seed_se: float
    seed_interval: Tuple[float, float]
    crossed_interval: Tuple[float, float]
    p: float  #: the paired t over seeds
    crossed_p: float  #: the crossed t
    rule_p: float  #: max of the two: the p of "both intervals exclude 0"
    uncapped_rule_p: float  #: the same with the crossed degrees of freedom not capped at S - 1
    excludes: str
    components: Tuple[float, float, float]
    discordant: Tuple[int, int]
    split: str = "test"
    key: str = ""  #: the outcome matrix's fingerprint, its sign made positive: identical comparisons share it
    reading: str = "no difference shown"
    adjusted_p: float = math.nan
    family: int = 1
    same_as: Optional[str] = None  #: the first comparison of the family with the same outcomes (counted once)
    cap_decides: Optional[str] = None  #: the reading with the degrees of freedom uncapped, where it differs
    detectable: float = math.nan
    detectable_band: Tuple[float, float] = (math.nan, math.nan)
    effect: float = math.nan  #: the difference the seeds and items needed are for
    seeds_needed: Optional[int] = None
    items_needed: Optional[int] = None
    #: the same two figures with the seeds' variance component at its 95% upper bound (:func:`seed_component_upper`)
    detectable_upper: float = math.nan
    seeds_needed_upper: Optional[int] = None
    seed_mean_square: float = math.nan  #: the two-way analysis's, which the upper bound reads
    extra: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.a} − {self.b}"


def matrix_key(d: np.ndarray, split: str = "") -> str:
    """A fingerprint of the outcome matrix on ``split`` up to its sign (A − B and B − A are one comparison; so are
    two comparisons of one split with the same outcomes in every seed, e.g. against two arms that answered alike)."""
    import hashlib

    d = np.asarray(d, dtype=float) + 0.0  # -0.0 -> 0.0
    nonzero = d[d != 0]
    if nonzero.size and nonzero[0] < 0:
        d = -d + 0.0
    return hashlib.sha256(repr((split, d.shape)).encode() + d.tobytes()).hexdigest()[:16]


def compare(name_a: str, name_b: str, d: np.ndarray, split: str = "test") -> Comparison:
    """The comparison of A against B from their outcome matrix ``d`` (:func:`outcome_matrix`), before its family
    is read (:func:`fairseq_maskplug.evaluation.reading_rule.read_family` sets the reading and the sensitivity)."""
    d = np.asarray(d, dtype=float)
    seed_means = d.mean(axis=1)
    seeds, items = d.shape
    seed_se = float(seed_means.std(ddof=1) / math.sqrt(seeds)) if seeds >= 2 else math.nan
    crossed = crossed_interval(d)
    squares = MeanSquares.of(d) if seeds >= 2 and items >= 2 else None
    components = squares.components() if squares else (math.nan,) * 3
    return Comparison(
        name_a, name_b, seeds, items, float(d.mean()), seed_se, seed_interval(d), crossed, seed_p(d), crossed_p(d),
        rule_p(d) if seeds >= 2 else math.nan, rule_p(d, cap=False) if seeds >= 2 else math.nan, excluded(crossed),
        components, discordant_counts(d), split, matrix_key(d, split),
        seed_mean_square=squares.seed if squares else math.nan)
