"""Statistics of the seeded comparisons (``benchmarks/gpu_science.py``): mean ± standard error over
seeds, and two paired tests of a difference between two rows trained with the same seeds.

- **Paired over seeds**: the per-seed differences ``d_s = A_s - B_s`` (the same fine-tuning seed, so
  the same data order and head initialisation); ``t = mean(d) / (sd(d) / sqrt(S))`` with ``S - 1``
  degrees of freedom, two-sided p from Student's t (``student_t_sf``).
- **Paired over test sentences** (McNemar's exact test): over every (seed, sentence) pair, ``b``
  counts those A gets right and B wrong, ``c`` the reverse; under "no difference" each discordant
  pair is A's with probability 1/2, so the two-sided p is that of ``min(b, c)`` in a binomial(b + c,
  1/2). Pooling the seeds treats their sentences as independent trials, which they are not quite
  (the same sentences under each seed): read its p as a lower bound on the truth's.

- **Intervals**: the seed-paired difference's 95% t interval (``t_interval``) and a two-level paired
  bootstrap over seeds and test sentences (``paired_bootstrap``: seeds drawn with replacement, then
  each drawn seed's sentences with replacement, both rows on the same draws).
- **The smallest difference the run could detect** at 80% power and a two-sided 5% level:
  ``detectable_over_seeds`` (paired t, the seeds' spread of differences) and
  ``detectable_over_sentences`` (McNemar, normal approximation, the share of discordant pairs).

And what a difference of the size seen would need to be significant at the 5% level:
``sentences_needed`` (McNemar, normal approximation: ``z = (b - c) / sqrt(b + c) >= 1.96``) and
``seeds_needed`` (the seed test with the seeds' spread of differences, normal approximation).
Only the standard library: the summary also runs where scipy is not installed.
"""

import math
import random
import statistics

Z_95 = 1.959963984540054  # two-sided 5%
Z_80 = 0.8416212335729143  # one-sided 20%: 80% power


def mean_se(values) -> tuple:
    """``(mean, standard error of the mean)``; the error is NaN for fewer than two values."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_se: no values")
    if len(values) == 1:
        return values[0], float("nan")
    return statistics.mean(values), statistics.stdev(values) / math.sqrt(len(values))


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"incomplete_beta: x must lie in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def student_t_sf2(t: float, df: int) -> float:
    """Two-sided p of Student's t: P(|T| >= |t|) with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"student_t_sf2: df must be at least 1, got {df}")
    if math.isnan(t):
        return float("nan")
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def paired_over_seeds(a: dict, b: dict) -> dict:
    """The seed-paired test of ``a`` against ``b`` (``{seed: value}``; the seeds both have)."""
    seeds = sorted(set(a) & set(b))
    diffs = [a[s] - b[s] for s in seeds]
    out = {"seeds": len(seeds), "difference": float("nan"), "se": float("nan"), "t": float("nan"),
           "p": float("nan"), "seeds_needed": None}
    if not diffs:
        return out
    out["difference"], out["se"] = mean_se(diffs)
    if len(diffs) >= 2:
        sd = statistics.stdev(diffs)
        if sd > 0:
            out["t"] = out["difference"] / out["se"]
            out["p"] = student_t_sf2(out["t"], len(diffs) - 1)
            out["seeds_needed"] = seeds_needed(out["difference"], sd)
    return out


def seeds_needed(difference: float, sd: float) -> float:
    """Seeds at which a mean difference of this size, with this seed-to-seed spread of the
    differences, reaches the two-sided 5% level (normal approximation; inf for no difference)."""
    if difference == 0:
        return math.inf
    return math.ceil((Z_95 * sd / abs(difference)) ** 2)


def mcnemar(correct_a, correct_b) -> dict:
    """McNemar's exact test over paired outcomes: ``correct_a`` and ``correct_b`` are equal-length
    strings of '0'/'1' (one character per (seed, sentence), the same order in both)."""
    if len(correct_a) != len(correct_b):
        raise ValueError(f"mcnemar: {len(correct_a)} outcomes against {len(correct_b)}")
    b = sum(1 for x, y in zip(correct_a, correct_b) if x == "1" and y == "0")
    c = sum(1 for x, y in zip(correct_a, correct_b) if x == "0" and y == "1")
    n = b + c
    if n == 0:
        p = 1.0
    else:
        tail = sum(math.comb(n, k) for k in range(0, min(b, c) + 1)) / 2.0 ** n
        p = min(1.0, 2.0 * tail)
    return {"pairs": len(correct_a), "a_only": b, "b_only": c, "p": p,
            "sentences_needed": sentences_needed(b, c, len(correct_a))}


def sentences_needed(b: int, c: int, pairs: int):
    """Paired outcomes at which McNemar's statistic (b - c) / sqrt(b + c) reaches 1.96 with the same
    shares of discordant pairs (normal approximation; None for no difference)."""
    if b == c or pairs == 0:
        return None
    discordant, difference = (b + c) / pairs, (b - c) / pairs
    return math.ceil(Z_95 ** 2 * discordant / difference ** 2)


def student_t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t (0.5 < p < 1), by bisection on ``student_t_sf2``."""
    if not 0.5 < p < 1.0:
        raise ValueError(f"student_t_quantile: p must lie in (0.5, 1), got {p}")
    target = 2.0 * (1.0 - p)  # the two-sided tail of |T| beyond the quantile
    low, high = 0.0, 1.0
    while student_t_sf2(high, df) > target:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if student_t_sf2(middle, df) > target:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def t_interval(differences) -> tuple:
    """The 95% t interval of the mean of paired ``differences`` (NaNs for fewer than two)."""
    mean, se = mean_se(differences)
    if len(differences) < 2 or math.isnan(se):
        return float("nan"), float("nan")
    half = student_t_quantile(0.975, len(differences) - 1) * se
    return mean - half, mean + half


def detectable_over_seeds(sd: float, seeds: int) -> float:
    """The smallest mean paired difference a paired t test over ``seeds`` seeds detects with 80% power
    at the two-sided 5% level, for differences spread with ``sd``: (t_0.975 + t_0.80) * sd / sqrt(S)."""
    if seeds < 2 or sd <= 0:
        return float("nan")  # no spread seen: the run says nothing of what it could detect
    df = seeds - 1
    return (student_t_quantile(0.975, df) + student_t_quantile(0.80, df)) * sd / math.sqrt(seeds)


def detectable_over_sentences(discordant_share: float, pairs: int) -> float:
    """The smallest difference of accuracy (a share, 0-1) McNemar's test over ``pairs`` paired outcomes
    detects with 80% power at the two-sided 5% level, with this share of discordant pairs (normal
    approximation): (z_0.975 + z_0.80) * sqrt(d / N)."""
    if pairs < 1 or discordant_share <= 0:
        return float("nan")  # the two rows agreed everywhere
    return (Z_95 + Z_80) * math.sqrt(discordant_share / pairs)


def paired_bootstrap(correct_a: dict, correct_b: dict, resamples: int = 2000, seed: int = 0) -> tuple:
    """The 95% percentile interval of A's accuracy minus B's (in points, 0-100) under a two-level
    bootstrap: ``correct_a``/``correct_b`` map each seed to its '0'/'1' string over the same test
    sentences; each resample draws seeds with replacement, then sentences with replacement within
    each drawn seed, the same draws for both rows."""
    seeds = sorted(set(correct_a) & set(correct_b))
    if not seeds:
        return float("nan"), float("nan")
    diffs = {s: [int(x) - int(y) for x, y in zip(correct_a[s], correct_b[s])] for s in seeds}
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        total, count = 0, 0
        for s in rng.choices(seeds, k=len(seeds)):
            d = diffs[s]
            total += sum(d[i] for i in rng.choices(range(len(d)), k=len(d)))
            count += len(d)
        values.append(100.0 * total / count)
    values.sort()
    return values[int(0.025 * resamples)], values[min(resamples - 1, int(0.975 * resamples))]
