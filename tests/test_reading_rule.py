"""Known answers for the statistics every comparison is read with (fairseq_maskplug/evaluation/paired_comparison.py
and reading_rule.py), each against an independent library or a closed form, never against a page:

- the interval and p over seeds against ``scipy.stats`` (``ttest_1samp``, ``t.interval``);
- the mean squares against ``statsmodels``' ``anova_lm`` of the two-way model without interaction;
- the crossed interval where it has a closed form: the seeds' t interval where only the seeds' component
  enters, and the t interval over item means where only the items' does;
- the pairing of arms given in other seed orders;
- Holm against ``statsmodels.stats.multitest.multipletests`` on unequal p values with a gap, BH unlike Holm;
- the rule's p as the intersection-union test of the two intervals, and the family read once per distinct
  comparison;
- the simulation of the rule from four sufficient statistics against whole simulated matrices, the rule's power
  at the difference it calls detectable, a family's Holm no weaker than the level its power is computed at, and
  the seeds the rule needs.

``tests/test_statistics_mutations.py`` (full tier) checks that each of the audit's mutations of the statistics
fails a test of this file.
"""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.formula.api import ols
from statsmodels.stats.anova import anova_lm
from statsmodels.stats.multitest import multipletests

from fairseq_maskplug.evaluation import paired_comparison as pc
from fairseq_maskplug.evaluation import reading_rule as rule


def band(share: float, runs: int) -> float:
    """Three standard errors of a share estimated from ``runs`` runs."""
    return 3 * math.sqrt(share * (1 - share) / runs)


def matrix(seed: int, seeds: int = 5, items: int = 40, delta: float = 3.0, components=(9.0, 40.0, 400.0)):
    return pc.simulate(delta, components, seeds, items, 1, np.random.default_rng(seed))[0]


@pytest.mark.parametrize("seeds", [2, 3, 5, 8])
def test_the_interval_and_p_over_seeds_are_scipys(seeds):
    d = matrix(seeds, seeds=seeds, items=30)
    means = d.mean(axis=1)
    expected = stats.t.interval(0.95, seeds - 1, loc=means.mean(), scale=stats.sem(means))
    assert pc.seed_interval(d) == pytest.approx(expected, rel=1e-12)
    assert pc.seed_p(d) == pytest.approx(stats.ttest_1samp(means, 0.0).pvalue, rel=1e-12)
    result = pc.compare("A", "B", d)
    assert result.seed_se == pytest.approx(stats.sem(means), rel=1e-12)


def anova(d: np.ndarray) -> dict:
    """statsmodels' two-way analysis of variance of ``d`` (seeds x items), its mean squares by source."""
    s, n = d.shape
    frame = pd.DataFrame({"d": d.ravel(), "seed": np.repeat(np.arange(s), n), "item": np.tile(np.arange(n), s)})
    table = anova_lm(ols("d ~ C(seed) + C(item)", data=frame).fit())
    return {"seed": table.loc["C(seed)", "mean_sq"], "item": table.loc["C(item)", "mean_sq"],
            "residual": table.loc["Residual", "mean_sq"], "df_residual": table.loc["Residual", "df"]}


@pytest.mark.parametrize("shape", [(3, 12), (5, 40), (7, 9)])
def test_the_mean_squares_are_statsmodels_anova(shape):
    d = matrix(sum(shape), *shape)
    squares, expected = pc.MeanSquares.of(d), anova(d)
    assert (squares.seed, squares.item, squares.residual) == pytest.approx(
        (expected["seed"], expected["item"], expected["residual"]), rel=1e-9)
    assert expected["df_residual"] == (shape[0] - 1) * (shape[1] - 1)
    seed_var, item_var, residual = squares.components()
    assert seed_var == pytest.approx(max(0.0, (expected["seed"] - expected["residual"]) / shape[1]), rel=1e-9)
    assert item_var == pytest.approx(max(0.0, (expected["item"] - expected["residual"]) / shape[0]), rel=1e-9)


def test_the_components_are_clamped_at_zero():
    rng = np.random.default_rng(3)
    d = rng.standard_normal((5, 50)) * 10  # no seed or item effect: some runs estimate a negative component
    found = [pc.MeanSquares.of(d + 0 * k).components() for k in range(1)]
    for seed_var, item_var, residual in found:
        assert seed_var >= 0 and item_var >= 0 and residual > 0
    squares = pc.MeanSquares(5, 50, seed=1.0, item=2.0, residual=4.0)
    assert squares.components() == (0.0, 0.0, 4.0)


def only_seeds() -> np.ndarray:
    """A matrix whose seeds differ and whose items do not (item mean square below the residual's)."""
    rng = np.random.default_rng(5)
    d = 2.0 + 4.0 * rng.standard_normal((5, 1)) + rng.standard_normal((5, 60))
    d -= d.mean(axis=0, keepdims=True) - d.mean()  # every item's mean equal: item mean square 0
    return d


def only_items() -> np.ndarray:
    rng = np.random.default_rng(6)
    d = 2.0 + 6.0 * rng.standard_normal((1, 60)) + rng.standard_normal((5, 60))
    d -= d.mean(axis=1, keepdims=True) - d.mean()  # every seed's mean equal: seed mean square 0
    return d


def test_the_crossed_interval_is_the_seeds_t_where_only_the_seeds_vary():
    d = only_seeds()
    squares = pc.MeanSquares.of(d)
    assert squares.item < squares.residual < squares.seed
    means = d.mean(axis=1)
    expected = stats.t.interval(0.95, 4, loc=d.mean(), scale=stats.sem(means))
    assert pc.crossed_interval(d) == pytest.approx(expected, rel=1e-9)
    assert pc.crossed_p(d) == pytest.approx(stats.ttest_1samp(means, 0.0).pvalue, rel=1e-9)


def test_the_crossed_interval_is_the_item_means_t_where_only_the_items_vary():
    d = only_items()
    squares = pc.MeanSquares.of(d)
    assert squares.seed < squares.residual < squares.item
    item_means = d.mean(axis=0)
    expected = stats.t.interval(0.95, d.shape[1] - 1, loc=d.mean(), scale=stats.sem(item_means))
    assert pc.crossed_interval(d) == pytest.approx(expected, rel=1e-9)
    assert pc.crossed_p(d) == pytest.approx(stats.ttest_1samp(item_means, 0.0).pvalue, rel=1e-9)


def test_the_crossed_degrees_of_freedom_are_capped_at_s_minus_1_where_the_seeds_enter():
    squares = pc.MeanSquares(5, 400, seed=900.0, item=900.0, residual=400.0)
    variance, df = squares.variance_of_mean()
    assert variance == pytest.approx((900 + 900 - 400) / 2000)
    assert df == 4
    uncapped = (900 + 900 - 400) ** 2 / (900 ** 2 / 4 + 900 ** 2 / 399 + 400 ** 2 / (4 * 399))
    assert squares.variance_of_mean(cap=False)[1] == pytest.approx(uncapped) and uncapped > 4


def test_arms_given_in_other_seed_orders_are_paired_by_seed():
    a = {1: "1100", 2: "1010", 3: "1111"}
    b = {3: "0000", 1: "1000", 2: "0010"}
    d = pc.outcome_matrix(a, b)
    assert d.tolist() == [[0, 100, 0, 0], [100, 0, 0, 0], [100, 100, 100, 100]]
    assert pc.outcome_matrix(dict(reversed(list(a.items()))), b).tolist() == d.tolist()
    assert pc.outcome_matrix({**a, 4: "1111"}, b).shape == (3, 4)  # a seed only one arm has is left out


def test_holm_is_statsmodels_on_unequal_p_values_with_a_gap():
    p = [0.04, math.nan, 0.001, 0.03, 0.2, 0.011]
    present = [x for x in p if not math.isnan(x)]
    expected = iter(multipletests(present, method="holm")[1])
    got = pc.adjusted(p)
    assert math.isnan(got[1])
    assert [g for g in got if not math.isnan(g)] == pytest.approx(list(expected))
    bh = pc.adjusted(p, "fdr_bh")
    assert [g for g in bh if not math.isnan(g)] == pytest.approx(list(multipletests(present, method="fdr_bh")[1]))
    assert bh != pytest.approx(got, nan_ok=True)  # BH is not Holm on these
    assert got[3] == pytest.approx(min(1.0, max(0.001 * 5, 0.011 * 4, 0.03 * 3)))


def test_the_rules_p_is_below_005_exactly_where_both_intervals_exclude_0():
    rng = np.random.default_rng(8)
    agree = 0
    for k in range(300):
        components = [(9.0, 40.0, 400.0), (0.0, 300.0, 900.0), (30.0, 0.0, 900.0)][k % 3]
        d = pc.simulate(rng.uniform(-6, 6), components, 5, 40, 1, rng)[0]
        named = pc.reading(pc.seed_interval(d), pc.crossed_interval(d)) != rule.NONE
        assert (pc.rule_p(d) < 0.05) == named
        assert pc.rule_p(d) == max(pc.seed_p(d), pc.crossed_p(d))
        agree += named
    assert 30 < agree < 270  # both readings occur


def comparison(name: str, d: np.ndarray, split: str = "test") -> pc.Comparison:
    a, b = name.split("-")
    return pc.compare(a, b, d, split)


def test_a_family_reads_each_distinct_comparison_once_with_holm_over_them():
    strong, weak, none = matrix(1, delta=12.0), matrix(2, delta=3.0), np.zeros((5, 40))
    found = [comparison("x-y", strong), comparison("x-z", strong), comparison("y-z", none),
             comparison("z-y", -weak, "heldout"), comparison("w-y", weak, "heldout")]
    rule.read_family(found, sensitivity=False)
    distinct = [pc.rule_p(strong), 1.0, pc.rule_p(weak)]
    holm = multipletests(distinct, method="holm")[1]
    assert [c.family for c in found] == [3] * 5
    assert [c.adjusted_p for c in found] == pytest.approx([holm[0], holm[0], holm[1], holm[2], holm[2]])
    assert found[1].same_as == "x − y (test)" and found[4].same_as == "z − y (heldout)"
    for c in found:
        expected = ("A better" if c.difference > 0 else "B better") if c.adjusted_p < 0.05 else rule.NONE
        assert c.reading == expected
    assert "Holm over a family of 3 comparisons" in rule.family_text(found)


def test_across_runs_is_holm_over_every_distinct_comparison_of_all_runs_with_shared_ones_counted_once():
    """Issue 101, item 3: the pages' cross-run family. Two runs, each read in its own family; a comparison held by
    both (a plan's report stored beside the harness's file of the same units) is one member; a comparison with no p
    is outside; the p across is statsmodels' Holm over the distinct members, never below the run's own."""
    strong, weak, flat = matrix(5, delta=12.0), matrix(6, delta=3.0), matrix(7, delta=0.0)
    one = rule.read_family([comparison("x-y", strong), comparison("z-y", weak)], sensitivity=False)
    two = rule.read_family([comparison("x-y", strong), comparison("w-y", flat), comparison("v-y", strong[:1])],
                           sensitivity=False)
    rows, size = rule.across_runs([("one", one), ("two", two)])
    assert size == 3 and math.isnan(two[2].rule_p) and math.isnan(rows[-1][2])
    holm = multipletests([pc.rule_p(strong), pc.rule_p(weak), pc.rule_p(flat)], method="holm")[1]
    assert [p for _, _, p in rows[:4]] == pytest.approx([holm[0], holm[1], holm[0], holm[2]])
    assert [run for run, _, _ in rows] == ["one", "one", "two", "two", "two"]
    assert all(p >= c.adjusted_p - 1e-12 for _, c, p in rows[:4])


def test_the_same_outcomes_on_two_splits_are_two_comparisons():
    """A comparison is its outcomes on its split: identical matrices on test and on a held-out split are both in
    the family (neither read with the other)."""
    d = matrix(3, delta=6.0)
    found = rule.read_family([comparison("a-b", d), comparison("a-b", d, "heldout")], sensitivity=False)
    assert [c.family for c in found] == [2, 2] and [c.same_as for c in found] == [None, None]
    assert found[0].adjusted_p == pytest.approx(min(1.0, 2 * pc.rule_p(d)))


def test_the_power_figures_are_holms_over_the_whole_family():
    """Each comparison's detectable difference is the rule's at 0.05 / family, with the family of every distinct
    comparison read together (not the comparison alone), and more than it would be alone."""
    found = [comparison(f"a{k}-b", matrix(20 + k)) for k in range(3)]
    rule.read_family(found, sims=2000)
    c = found[0]
    assert c.family == 3
    assert c.detectable == pc.detectable(c.components, c.seeds, c.items, sims=2000, family=3)
    assert c.detectable > pc.detectable(c.components, c.seeds, c.items, sims=2000, family=1)


def test_a_direction_that_does_not_survive_holm_is_not_named():
    """A comparison whose own p is below 0.05 but whose Holm p is not: "no difference shown"."""
    rng = np.random.default_rng(4)
    for attempt in range(2000):
        d = pc.simulate(2.5, (4.0, 10.0, 400.0), 5, 60, 1, rng)[0]
        if 0.02 < pc.rule_p(d) < 0.045:
            break
    others = [matrix(10 + k, delta=0.0) for k in range(3)]
    found = [comparison("a-b", d)] + [comparison(f"c{k}-b", o) for k, o in enumerate(others)]
    rule.read_family(found, sensitivity=False)
    assert found[0].rule_p < 0.05 and found[0].adjusted_p > 0.05
    assert found[0].reading == rule.NONE and "Holm p" in rule.verdict(found[0])


def test_the_simulated_rule_from_four_statistics_is_the_rule_on_whole_matrices():
    components, seeds, items, delta = (9.0, 80.0, 900.0), 4, 30, 6.0
    runs = 3000
    matrices = pc.simulate(delta, components, seeds, items, runs, np.random.default_rng(30))
    whole = np.mean([pc.rule_p(d) < 0.05 and d.mean() > 0 for d in matrices])
    fast = pc.rule_power(delta, components, seeds, items, sims=runs, seed=31)
    assert abs(whole - fast) <= band(0.5, runs) * math.sqrt(2), (whole, fast)
    null_whole = np.mean([pc.rule_p(d) < 0.05 for d in pc.simulate(0.0, components, seeds, items, runs,
                                                                      np.random.default_rng(32))])
    assert abs(null_whole - pc.rule_power(0.0, components, seeds, items, sims=runs, seed=33)) <= \
        band(0.05, runs) * math.sqrt(2)


def test_the_rule_finds_what_it_calls_detectable_80_percent_of_the_time_in_a_family():
    components, seeds, items = (9.0, 300.0, 500.0), 5, 400
    for family in (1, 4):
        delta = pc.detectable(components, seeds, items, family=family, sims=4000, seed=40)
        power = pc.rule_power(delta, components, seeds, items, sims=4000, seed=41, family=family)
        assert abs(power - 0.8) <= band(0.8, 4000), (family, delta, power)
    low, high = pc.detectable_band(components, seeds, items, family=4, sims=4000, seed=40)
    assert low < pc.detectable(components, seeds, items, family=4, sims=4000, seed=40) < high
    assert pc.detectable(components, seeds, items, family=4) > pc.detectable(components, seeds, items, family=1)


def holm_rejects_first(p: np.ndarray, alpha: float = 0.05) -> np.ndarray:
    """Holm's step-down on each row of ``p`` (runs x m): whether the first column's hypothesis is rejected (every
    p up to its rank at or below alpha / (m - k + 1))."""
    m = p.shape[1]
    order = np.sort(p, axis=1)
    passes = np.cumprod(order <= alpha / (m - np.arange(m)), axis=1).astype(bool)
    rank = (p < p[:, :1]).sum(axis=1)  # the first column's place in the order (0-based)
    return passes[np.arange(len(p)), rank]


def test_holm_over_a_family_names_a_comparison_at_least_as_often_as_the_level_its_power_is_computed_at():
    """The power said for a family of m (level 0.05 / m) is met or exceeded by Holm over m comparisons, here with
    the other m - 1 null (the case where it is the rule as applied) and with them all true (where Holm's later
    steps help): simulated whole families, Holm's rejections checked against statsmodels on some."""
    components, seeds, items, m, runs = (9.0, 80.0, 900.0), 5, 40, 3, 20_000
    delta = pc.detectable(components, seeds, items, family=m)
    for others_delta in (0.0, delta):
        draws = [pc.SimulatedRuns.draw(components, seeds, items, runs, seed=70 + k) for k in range(m)]
        p_and_sign = [draws[0].rule_p(delta)] + [run.rule_p(others_delta) for run in draws[1:]]
        p = np.stack([p for p, _ in p_and_sign], axis=1)
        named = holm_rejects_first(p) & (p_and_sign[0][1] > 0)
        for row in range(20):
            assert holm_rejects_first(p[row:row + 1])[0] == (multipletests(p[row], method="holm")[1][0] <= 0.05)
        assert named.mean() >= 0.8 - band(0.8, runs), (others_delta, named.mean())
        if others_delta == 0.0:  # the others null: Holm is (nearly) its first step, the level said
            assert named.mean() <= 0.8 + 0.02


def test_the_seeds_the_rule_needs_give_it_80_percent_and_one_fewer_does_not():
    components, items = (16.0, 20.0, 900.0), 200
    needed = pc.seeds_needed(3.0, components, items, family=2)
    assert needed is not None and needed > 2
    assert pc.rule_power(3.0, components, needed, items, family=2, seed=60) >= 0.8 - band(0.8, pc.SIMS)
    assert pc.rule_power(3.0, components, needed - 1, items, family=2) < 0.8
    assert pc.seeds_needed(3.0, (0.0, 4000.0, 100.0), 20) is None  # the items alone keep it wide
    items_needed = pc.items_needed(3.0, (0.0, 50.0, 900.0), 5)
    assert pc.rule_power(3.0, (0.0, 50.0, 900.0), 5, items_needed) >= 0.8
    assert pc.rule_power(3.0, (0.0, 50.0, 900.0), 5, items_needed - 1) < 0.8


def test_where_the_df_cap_decides_a_reading_the_verdict_says_what_the_uncapped_rule_reads():
    """The crossed degrees of freedom are capped at S - 1; where the cap alone keeps a direction from being named,
    the verdict says so (the discontinuity the audit found on BART's held-out questions)."""
    squares = pc.MeanSquares(3, 300, seed=2500.0, item=2000.0, residual=1800.0)
    capped, uncapped = squares.variance_of_mean(), squares.variance_of_mean(cap=False)
    assert capped[0] == uncapped[0] and capped[1] == 2 < uncapped[1]
    d = matrix(90, seeds=3, items=300, delta=5.0, components=(2.0, 60.0, 900.0))
    c = pc.compare("a", "b", d)
    c.rule_p, c.uncapped_rule_p = 0.08, 0.01  # as a run whose capped p misses and uncapped p passes
    rule.read_family([c], sensitivity=False)
    assert c.reading == rule.NONE and c.cap_decides == rule.direction(c.difference)
    assert f"uncapped it reads {c.cap_decides}" in rule.verdict(c)
    c.rule_p, c.uncapped_rule_p = 0.08, 0.09
    rule.read_family([c], sensitivity=False)
    assert c.cap_decides is None and "uncapped" not in rule.verdict(c)


def test_a_table_of_comparisons_no_family_read_never_says_holm_over_0():
    """One seed gives no comparison to read: the table says so, never "Holm over 0"."""
    from fairseq_maskplug.evaluation.comparison_report import comparison_tables

    found = rule.read_family([comparison("a-b", matrix(1)[:1])], sensitivity=False)
    text = "\n".join(comparison_tables(found))
    assert found[0].family == 0 and "Holm over 0" not in text and "not read (no comparison in 2 seeds)" in text
    # and its row says it was not read, not "no difference shown" (issue 106)
    row = next(line for line in text.splitlines() if line.startswith("| a − b | 1 × "))
    assert "not read (fewer than 2 seeds" in row and rule.NONE not in row
