"""The one reading rule of every comparison this package prints (the pages' generated tables,
``benchmarks/gpu_science.py``'s summaries and ``fairseq-maskplug-compare``'s reports):

1. **The family** is the list of comparisons read together: by default every arm − the baseline on every compared
   split (a plan may name its own pairs); it is printed with the tables. Comparisons whose outcomes are identical
   up to sign (an arm that answered exactly as another in every seed) are one comparison, counted once.
2. **A direction is named** ("A better", "B better") only where the rule's p (:func:`~.paired_comparison.rule_p`:
   both 95% intervals, over seeds and crossed, exclude 0) survives Holm's step-down adjustment over the family at
   0.05; otherwise "no difference shown". The same p, the same family and the same words on a page and in a report.
3. **The power** said beside it is that of this rule: the difference found with 80% probability at the level
   ``0.05 / family`` (:func:`~.paired_comparison.family_level`: Holm's first step, which names the comparison
   whatever the others show), simulated with the run's variance components, with its Monte Carlo band; the seeds
   and items needed are for the same rule at a stated difference (``effect``). Those components are estimates (the
   seeds' from S - 1 degrees of freedom), so the difference found and the seeds needed are also said with the seeds'
   component at its 95% upper confidence bound (:func:`~.paired_comparison.seed_component_upper`): the plug-in
   figure is the optimistic one.
4. **The crossed interval's degrees of freedom** are capped at S − 1 where the seeds' component enters (the
   coverage the module :mod:`.paired_comparison` documents); where that cap decides a reading, the verdict says
   what the uncapped rule reads.

References: Holm 1979; Berger 1982 (the intersection-union test); docs/compare.md, "Reading a report".
"""

import math
from typing import List, Sequence

from . import paired_comparison as pc

NONE = "no difference shown"

#: the difference (points) the verdicts' "seeds needed" are computed for unless a plan names another: ours, the
#: size of the papers' reported gains (Gu et al. 2020: 0.5 to 1.2 points; Yao et al. 2022: 0.1 to 2.9)
DEFAULT_EFFECT = 2.0


def direction(difference: float) -> str:
    return "A better" if difference > 0 else "B better"


def holm_readings(comparisons: Sequence[pc.Comparison], p_of) -> tuple:
    """``(adjusted p per comparison, reading per comparison, family size)``: Holm over the distinct comparisons'
    ``p_of(c)`` (NaNs kept out), duplicates given their first's."""
    first = {}
    for c in comparisons:
        if not math.isnan(p_of(c)):
            first.setdefault(c.key, c)
    distinct = list(first.values())
    adjusted = dict(zip([c.key for c in distinct], pc.adjusted([p_of(c) for c in distinct], "holm")))
    out_p = [adjusted.get(c.key, math.nan) for c in comparisons]
    readings = [direction(c.difference) if not math.isnan(p) and p < pc.ALPHA else NONE
                for c, p in zip(comparisons, out_p)]
    return out_p, readings, len(distinct)


def across_runs(runs: Sequence[tuple]) -> tuple:
    """Holm over the comparisons of several runs at once, each run already read in its own family
    (:func:`read_family`): ``([(run, comparison, p across)], family size)`` for every comparison of every
    ``(run, comparisons)`` of ``runs``. The family is every distinct comparison of them all: one outcome matrix
    (its key) is counted once, whichever runs hold it (a plan's report stored beside the harness's file of the same
    units); a comparison with no p (fewer than 2 seeds) is outside it (NaN). A direction named within its run can
    only lose here: the stored runs are the family a reader of all the pages meets (issue 101, item 3)."""
    first = {}
    for _, found in runs:
        for c in found:
            if not math.isnan(c.rule_p):
                first.setdefault(c.key, c.rule_p)
    keys = list(first)
    adjusted = dict(zip(keys, pc.adjusted([first[k] for k in keys], "holm")))
    return [(run, c, adjusted.get(c.key, math.nan)) for run, found in runs for c in found], len(keys)


def read_family(comparisons: List[pc.Comparison], effect: float = DEFAULT_EFFECT, sims: int = pc.SIMS,
                sensitivity: bool = True) -> List[pc.Comparison]:
    """Read ``comparisons`` as one family (module docstring), in place: each one's Holm-adjusted p, reading, family
    size, ``same_as``, ``cap_decides`` and (with ``sensitivity``) its detectable difference with its band and the
    seeds and items the rule needs for ``effect`` points."""
    adjusted, readings, size = holm_readings(comparisons, lambda c: c.rule_p)
    _, uncapped, _ = holm_readings(comparisons, lambda c: c.uncapped_rule_p)
    seen = {}
    for c, p, verdict, other in zip(comparisons, adjusted, readings, uncapped):
        c.adjusted_p, c.reading, c.family = p, verdict, size
        c.same_as = seen.get(c.key)
        seen.setdefault(c.key, f"{c.name} ({c.split})")
        c.cap_decides = other if other != verdict else None
        c.effect = effect
        if sensitivity and c.seeds >= 2 and not any(math.isnan(x) for x in c.components):
            c.detectable = pc.detectable(c.components, c.seeds, c.items, sims=sims, family=max(size, 1))
            c.detectable_band = pc.detectable_band(c.components, c.seeds, c.items, sims=sims, family=max(size, 1))
            c.seeds_needed = pc.seeds_needed(effect, c.components, c.items, max(size, 1), sims=sims)
            c.items_needed = pc.items_needed(effect, c.components, c.seeds, max(size, 1), sims=sims)
            upper = pc.seed_component_upper(c.components, c.seeds, c.items, seed_mean_square=c.seed_mean_square)
            c.detectable_upper = pc.detectable(upper, c.seeds, c.items, sims=sims, family=max(size, 1))
            c.seeds_needed_upper = pc.seeds_needed(effect, upper, c.items, max(size, 1), sims=sims)
    return comparisons


def family_text(comparisons: Sequence[pc.Comparison]) -> str:
    """The family in words: its size, its members by split, the ones counted once."""
    read = [c for c in comparisons if not math.isnan(c.rule_p)]
    if not read:
        return "no family: no comparison had paired outcomes in 2 seeds or more"
    members = ", ".join(f"{c.name} ({c.split})" for c in read if c.same_as is None)
    doubles = [f"{c.name} ({c.split}) = {c.same_as}" for c in read if c.same_as is not None]
    size = read[0].family
    return (f"Holm over a family of {size} comparison{'s' if size != 1 else ''}: {members}"
            + (f"; counted once, identical outcomes in every seed: {'; '.join(doubles)}" if doubles else ""))


def number(x: float) -> str:
    """A difference in points as the verdicts print it: two decimals below 10, one above, none for whole ones."""
    if x is None or math.isnan(x):
        return "-"
    return f"{x:g}" if x == int(x) else f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}"


def p_words(p: float) -> str:
    return "-" if math.isnan(p) else f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def sensitivity_text(c: pc.Comparison) -> str:
    """What the design finds: "finds 4.1 points (3.9 to 4.3) with 80% probability; 12 seeds would find 2"."""
    if math.isnan(c.detectable):
        if c.seeds >= 2 and all(x == 0 for x in c.components):
            return "the two arms answered alike on every item in every seed"
        return "its sensitivity is unknown (fewer than 2 seeds)"
    low, high = c.detectable_band
    if c.detectable > pc.SPAN:
        return (f"this design finds no difference inside the score's range (±{pc.SPAN:g} points) with 80% probability "
                f"(Holm over {c.family}): it measured nothing")
    upper = ("" if math.isnan(c.detectable_upper) else
             f"; {number(c.detectable_upper)} with the seeds' variance at its 95% upper bound")
    text = (f"this design finds {number(c.detectable)} points with 80% probability (Monte Carlo band "
            f"{number(low)} to {number(high)}; Holm over {c.family}{upper})")
    needs = []
    if c.seeds_needed:
        at_upper = (f", {c.seeds_needed_upper} at the upper bound" if c.seeds_needed_upper else
                    ", more than 1000 at the upper bound" if not math.isnan(c.detectable_upper) else "")
        needs.append(f"about {c.seeds_needed} seeds at these {c.items} items{at_upper}")
    elif c.detectable > c.effect:
        needs.append(f"no number of seeds at these {c.items} items")
    if c.items_needed and c.detectable > c.effect:
        needs.append(f"about {c.items_needed:,} items at these {c.seeds} seeds")
    if c.detectable > c.effect and needs:
        text += f"; to find {number(c.effect)} points it would need " + " or ".join(needs)
    return text


def verdict(c: pc.Comparison) -> str:
    """One line: what this comparison found, and what the design could have found."""
    if math.isnan(c.rule_p):
        return f"{c.name} ({c.split}): not read (fewer than 2 seeds with paired outcomes)"
    if c.same_as is not None:
        head = f"{c.name} ({c.split}): the same outcomes as {c.same_as} in every seed, read with it"
        return head + (f" ({c.reading})" if c.reading != NONE else "")
    said = (f"A better, by {c.difference:+.2f} points" if c.reading == "A better" else
            f"B better, by {-c.difference:.2f} points" if c.reading == "B better" else NONE)
    line = f"{c.name} ({c.split}): {said} (Holm p {p_words(c.adjusted_p)}); {sensitivity_text(c)}"
    if c.cap_decides:
        line += (f". The crossed interval's degrees of freedom, capped at S − 1 = {c.seeds - 1}, decide this: "
                 f"uncapped it reads {c.cap_decides}")
    return line
