"""The analysis of seeded comparisons (fairseq_maskplug/evaluation/paired_comparison.py), tested on data simulated
with planted seed-level and item-level variance, as ../shared/notes/statistics.md asks: each interval's coverage
of what it conditions on, the reading rule's false-positive rate, its power at the difference it claims to detect,
and known answers (a case the seeds' interval reads and the crossed one
does not; "B better"). Tolerances are binomial: RUNS simulated runs, three standard errors of a share.

Each of these mutations of the analysis fails at least one test (tried by hand when written): the crossed
interval without the item component or without the seed component (the two levels of the old bootstrap), a 90%
interval, "either interval" instead of "both" in the reading, the degrees of freedom uncapped. The known answers
against scipy and statsmodels, the family's reading and the sample sizes are tests/test_reading_rule.py's."""

import math

import numpy as np
import pytest
from scipy import stats

from fairseq_maskplug.evaluation.paired_comparison import (
    MeanSquares, adjusted, compare, crossed_interval, detectable, excluded, outcome_matrix, reading, rule_power,
    seed_interval, simulate)
from fairseq_maskplug.evaluation import paired_comparison as pc

RUNS = 400
SEEDS, ITEMS = 5, 400


def band(share: float, runs: int = RUNS) -> float:
    """Three standard errors of a share estimated from ``runs`` runs."""
    return 3 * math.sqrt(share * (1 - share) / runs)


#: (seed, item, residual) variance components in points^2: a 0/1 outcome's residual is about
#: discordance x 100^2 (2,000 at 20% discordant pairs); the settings put the weight on each level in turn
SETTINGS = {"seeds": (20.0, 0.0, 2000.0), "items": (0.0, 300.0, 2000.0), "both": (9.0, 300.0, 500.0),
            "residual": (0.0, 0.0, 2000.0)}


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_the_crossed_interval_covers_the_difference_on_the_task(setting):
    """Seeds and items both drawn anew in every run: the crossed interval holds the planted difference in 95% of
    runs (its degrees of freedom capped at S - 1 make it a little conservative where the seeds count)."""
    rng = np.random.default_rng(11)
    runs = simulate(1.5, SETTINGS[setting], SEEDS, ITEMS, RUNS, rng)
    covered = np.mean([low <= 1.5 <= high for low, high in map(crossed_interval, runs)])
    assert 0.95 - band(0.95) <= covered <= 0.985 + band(0.985), covered


@pytest.mark.parametrize("setting", ["seeds", "both"])
def test_the_seed_interval_covers_the_difference_on_these_items(setting):
    """The items drawn once and kept (as the test sentences are): the seeds' t interval holds the difference on
    those items (the planted one plus their mean effect) in 95% of runs."""
    rng = np.random.default_rng(12)
    seed_var, item_var, residual = SETTINGS[setting]
    items = math.sqrt(item_var) * rng.standard_normal(ITEMS)
    target = 1.5 + items.mean()
    covered = 0
    for _ in range(RUNS):
        d = 1.5 + items + math.sqrt(seed_var) * rng.standard_normal((SEEDS, 1)) + \
            math.sqrt(residual) * rng.standard_normal((SEEDS, ITEMS))
        low, high = seed_interval(d)
        covered += low <= target <= high
    assert abs(covered / RUNS - 0.95) <= band(0.95), covered / RUNS


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_the_reading_rule_names_a_direction_in_at_most_5_percent_of_nulls(setting):
    assert rule_power(0.0, SETTINGS[setting], SEEDS, ITEMS, sims=RUNS, seed=13) <= 0.05 + band(0.05)


def test_the_seed_interval_alone_would_read_item_noise_as_a_difference():
    """Where items vary and seeds hardly do, the seeds' interval (the items fixed) excludes 0 far more often than
    5% of nulls: the reason the rule also asks the crossed interval."""
    rng = np.random.default_rng(14)
    runs = simulate(0.0, (0.0, 1500.0, 500.0), SEEDS, ITEMS, RUNS, rng)
    excludes = np.mean([not (low <= 0 <= high) for low, high in map(seed_interval, runs)])
    assert excludes > 0.05 + 10 * band(0.05), excludes  # the items' mean effect: sd 1.9 points, the seeds' se 0.5


def test_a_difference_on_these_sentences_that_the_task_may_not_share_is_no_difference_shown():
    """Every seed gains 3 points on these items (the seeds agree), but the items disagree strongly: the seeds'
    interval excludes 0, the crossed one does not, and the reading names no direction."""
    rng = np.random.default_rng(15)
    items = 3.0 + 60.0 * rng.standard_normal(ITEMS)
    items += 3.0 - items.mean()
    d = items[None, :] + 0.2 * rng.standard_normal((SEEDS, ITEMS))
    by_seeds, crossed = seed_interval(d), crossed_interval(d)
    assert by_seeds[0] > 0 and crossed[0] < 0 < crossed[1]
    assert reading(by_seeds, crossed) == "no difference shown"
    assert excluded(crossed).startswith("an advantage of A above ")


def test_b_better_and_a_better_when_both_intervals_agree():
    rng = np.random.default_rng(16)
    d = simulate(-8.0, SETTINGS["residual"], SEEDS, ITEMS, 1, rng)[0]
    assert crossed_interval(d)[1] < 0 and seed_interval(d)[1] < 0
    assert reading(seed_interval(d), crossed_interval(d)) == "B better"
    assert reading(seed_interval(-d), crossed_interval(-d)) == "A better"
    assert reading((1.0, 2.0), (math.nan, math.nan)) == "no difference shown"


def test_the_rule_finds_the_difference_it_calls_detectable_80_percent_of_the_time():
    """The detectable difference (bisection with one set of random numbers) checked with others: the rule's
    power there is 80%, and at half of it far less."""
    components = SETTINGS["both"]
    delta = detectable(components, SEEDS, ITEMS, sims=RUNS, seed=17)
    power = rule_power(delta, components, SEEDS, ITEMS, sims=RUNS, seed=18)
    assert abs(power - 0.8) <= band(0.8), (delta, power)
    assert rule_power(delta / 2, components, SEEDS, ITEMS, sims=RUNS, seed=19) < 0.5
    assert math.isnan(detectable((0.0, 0.0, 0.0), SEEDS, ITEMS))


def test_mean_squares_recover_planted_components():
    rng = np.random.default_rng(22)
    d = simulate(0.0, (16.0, 300.0, 900.0), 40, 400, 1, rng)[0]
    seed_var, item_var, residual = MeanSquares.of(d).components()
    assert seed_var == pytest.approx(16.0, rel=0.6) and item_var == pytest.approx(300.0, rel=0.25)
    assert residual == pytest.approx(900.0, rel=0.05)


def test_holm_and_benjamini_hochberg_adjust_a_family():
    assert adjusted([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert adjusted([0.01, 0.04, 0.03], "fdr_bh") == pytest.approx([0.03, 0.04, 0.04])
    holm = adjusted([0.01, math.nan, 0.02])
    assert holm[0] == pytest.approx(0.02) and math.isnan(holm[1]) and holm[2] == pytest.approx(0.02)
    with pytest.raises(ValueError, match="holm or fdr_bh"):
        adjusted([0.1], "bonferroni")


def test_one_comparison_from_the_arms_outcomes():
    """Two arms' 0/1 strings per seed, as fairseq-maskplug-evaluate writes them ("correct"), to one comparison."""
    rng = np.random.default_rng(23)
    a = {s: "".join("1" if x else "0" for x in rng.random(200) < 0.75) for s in range(1, 6)}
    b = {s: "".join("1" if x else "0" for x in rng.random(200) < 0.70) for s in range(1, 6)}
    d = outcome_matrix(a, b)
    assert d.shape == (5, 200) and set(np.unique(d)) <= {-100.0, 0.0, 100.0}
    result = compare("A", "B", d)
    assert result.difference == pytest.approx(d.mean()) and result.seeds == 5 and result.items == 200
    assert result.discordant == (int((d > 0).sum()), int((d < 0).sum()))
    assert result.crossed_interval[0] < result.difference < result.crossed_interval[1]
    assert result.rule_p == max(result.p, result.crossed_p) and result.reading == "no difference shown"
    with pytest.raises(ValueError, match="the same items"):
        outcome_matrix({1: "101", 2: "10"}, {1: "100", 2: "11"})


def test_the_seeds_upper_bound_is_the_chi_square_bound_of_their_mean_square():
    """Known answer: components (4, 1, 100), 5 seeds, 50 items: the seed mean square's expectation is 100 + 50 x 4 =
    300, its one-sided 95% upper bound 300 x 4 / chi2_0.05(4), and the seeds' component (that less 100) / 50; the items'
    and residual components are kept."""
    from scipy import stats

    upper = pc.seed_component_upper((4.0, 1.0, 100.0), seeds=5, items=50)
    bound = 300.0 * 4 / stats.chi2.ppf(0.05, 4)
    assert upper == pytest.approx(((bound - 100.0) / 50, 1.0, 100.0), rel=1e-12)
    assert upper[0] == pytest.approx(31.77, abs=0.01)  # about 8 times the estimate: 4 degrees of freedom
    with pytest.raises(ValueError, match="seeds >= 2"):
        pc.seed_component_upper((4.0, 1.0, 100.0), seeds=1, items=50)


def test_the_seeds_upper_bound_covers_their_true_component_95_percent_of_the_time():
    """Over 20,000 runs of the normal model with a planted seeds' component, the bound read from each run's seed
    mean square and residual is at least the planted one in 95% of runs, within 4 binomial standard errors (the
    residual mean square, with 196 degrees of freedom, is taken as known: its noise moves the share little)."""
    truth, seeds, items, sims = (4.0, 1.0, 100.0), 5, 50, 20_000
    runs = pc.SimulatedRuns.draw(truth, seeds, items, sims, seed=3)
    covered = 0
    for ms_seed, ms_residual in zip(runs.seed, runs.residual):
        estimate = pc.MeanSquares(seeds, items, float(ms_seed), 0.0, float(ms_residual)).components()
        covered += pc.seed_component_upper(estimate, seeds, items, seed_mean_square=float(ms_seed))[0] >= truth[0]
    share, error = covered / sims, 4 * math.sqrt(0.95 * 0.05 / sims)
    assert abs(share - 0.95) <= error, share
    # read back from clamped components instead, the bound errs high: here the residual alone clears it every time
    clamped = pc.seed_component_upper(pc.MeanSquares(seeds, items, 50.0, 0.0, 100.0).components(), seeds, items)
    assert clamped[0] > pc.seed_component_upper((0.0, 0.0, 100.0), seeds, items, seed_mean_square=50.0)[0]


def test_the_verdict_says_what_the_design_finds_at_the_seeds_upper_bound():
    """The plug-in figure is the optimistic one: the verdict also gives the difference found, and the seeds needed,
    with the seeds' component at its 95% upper bound, each at least the plug-in one."""
    from fairseq_maskplug.evaluation import reading_rule as rule

    d = np.random.default_rng(5).normal(1.0, 1.0, (5, 1)) + np.random.default_rng(6).normal(0.0, 20.0, (5, 200))
    c = rule.read_family([compare("A", "B", d)], effect=2.0, sims=4000)[0]
    assert c.detectable_upper >= c.detectable > 0
    assert c.seeds_needed_upper is None or c.seeds_needed_upper >= c.seeds_needed
    upper = pc.detectable(pc.seed_component_upper(c.components, 5, 200, seed_mean_square=c.seed_mean_square), 5, 200,
                          sims=4000, family=1)
    assert c.detectable_upper == upper
    assert f"{rule.number(c.detectable_upper)} with the seeds' variance at its 95% upper bound" in rule.verdict(c)
