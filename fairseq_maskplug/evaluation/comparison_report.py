"""The tables of a seeded, paired comparison, from stored per-seed and per-item outcomes: each difference with
its intervals over seeds and over seeds and items, the reading, what the run excludes, p-values adjusted over
the family (Holm) and the sample a difference of that size would need
(:mod:`.paired_comparison`'s statistics, read by :mod:`.reading_rule`). ``benchmarks/gpu_science.py`` (the papers'
comparisons) and ``fairseq-maskplug-compare`` (a user's own) print these same tables."""

import math
from typing import Sequence, Tuple

import numpy as np

from . import paired_comparison as pc
from . import reading_rule as rule
from .reading_rule import number


def mean_se(values) -> tuple:
    """``(mean, standard error of the mean)``; the error is NaN for fewer than two values."""
    values = np.asarray([float(v) for v in values])
    if values.size == 0:
        raise ValueError("mean_se: no values")
    return float(values.mean()), (float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan)


def fmt(mean: float, se: float, digits: int = 2) -> str:
    return f"{mean:.{digits}f}" if math.isnan(se) else f"{mean:.{digits}f} ± {se:.{digits}f}"


def p_text(p: float) -> str:
    return "-" if math.isnan(p) else (f"{p:.3f}" if p >= 0.001 else f"{p:.1e}")


def interval_text(interval, digits: int = 2) -> str:
    low, high = interval
    return "-" if math.isnan(low) else f"[{low:+.{digits}f}, {high:+.{digits}f}]"


def paired_comparisons(family: Sequence[Tuple[str, str, str]], table: dict, sims: int = pc.SIMS,
                       effect: float = rule.DEFAULT_EFFECT, sensitivity: bool = True) -> list:
    """The :class:`~fairseq_maskplug.evaluation.paired_comparison.Comparison` of each ``(A, B, split)`` of
    ``family`` both of whose rows have paired outcomes on the split (``table[row][(split, seed)]`` = a score
    entry with ``correct``, one character per item), read as one family
    (:func:`~fairseq_maskplug.evaluation.reading_rule.read_family`: Holm over them, identical ones once)."""
    found = []
    for a, b, split in family:
        if a not in table or b not in table:
            continue
        outcomes = {row: {seed: v.get("correct") or "" for (s, seed), v in table[row].items() if s == split}
                    for row in (a, b)}
        common = sorted(set(outcomes[a]) & set(outcomes[b]))
        if not common or not all(outcomes[a][s] and len(outcomes[a][s]) == len(outcomes[b][s]) for s in common):
            continue
        d = pc.outcome_matrix({s: outcomes[a][s] for s in common}, {s: outcomes[b][s] for s in common})
        found.append(pc.compare(a, b, d, split))
    return rule.read_family(found, effect, sims, sensitivity)


def split_family(pairs: Sequence[Tuple[str, str]], splits: Sequence[str]) -> list:
    """Every pair on every split: ``[(A, B, split), ...]``, split by split."""
    return [(a, b, split) for split in splits for a, b in pairs]


def comparison_tables(found: Sequence, split: str = "test", what: str = "test accuracy") -> list:
    """Markdown lines: the comparisons of ``found`` (:func:`paired_comparisons`) on ``split``: the difference with
    its interval over seeds (these items) and its crossed interval (seeds and items), the reading (the family's
    rule) and what the run excludes; then the p over seeds, the crossed p, the rule's p Holm-adjusted over the
    family (printed below the tables), the difference the rule finds with 80% probability, the seeds and items it
    needs for the stated difference, and the pooled discordant items (a description)."""
    here = [c for c in found if c.split == split]
    intervals = ["", f"| A − B ({what}, points) | seeds × items | difference ± SE (seeds) | 95% interval over seeds "
                 "(these items) | 95% crossed interval (seeds and items) | reading (Holm over the family) | "
                 "the run excludes |",
                 "| --- | --- | --- | --- | --- | --- | --- |"]
    effect = number(here[0].effect) if here else "-"
    family = here[0].family if here else 0
    tests = ["", f"| A − B | p (t over seeds) | p (crossed t) | p of the rule (the larger), "
             f"{f'Holm over {family}' if family else 'not read (no comparison in 2 seeds)'} | found with 80% probability by the rule (Monte Carlo band; with the seeds' "
             f"variance at its 95% upper bound) | seeds / items the rule needs for {effect} points (none: no number "
             "of them alone; seeds at the upper bound) | A only / B only "
             "right (all pairs) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in here:
        reading = ("not read (fewer than 2 seeds with paired outcomes)" if math.isnan(c.rule_p) else
                   c.reading + (f" (same outcomes as {c.same_as})" if c.same_as else ""))
        intervals.append(f"| {c.a} − {c.b} | {c.seeds} × {c.items} | {fmt(c.difference, c.seed_se)} | "
                         f"{interval_text(c.seed_interval)} | {interval_text(c.crossed_interval)} | {reading} | "
                         f"{c.excludes} |")
        low, high = c.detectable_band
        detect = "-" if math.isnan(c.detectable) else f"{c.detectable:.2f} ({low:.2f} to {high:.2f}; {c.detectable_upper:.2f})"
        never = not math.isnan(c.detectable) and c.detectable > c.effect  # None then means "beyond the search"
        upper_never = not math.isnan(c.detectable_upper) and c.detectable_upper > c.effect
        needs = (f"{c.seeds_needed or ('none' if never else '-')} / "
                 f"{f'{c.items_needed:,}' if c.items_needed else ('none' if never else '-')}; "
                 f"{c.seeds_needed_upper or ('none' if upper_never else '-')}")
        tests.append(f"| {c.a} − {c.b} | {p_text(c.p)} | {p_text(c.crossed_p)} | {p_text(c.adjusted_p)} | {detect} | "
                     f"{needs} | {c.discordant[0]} / {c.discordant[1]} |")
    return intervals + tests + ["", rule.family_text(found) + "."]


def curve_tables(pairs: Sequence[Tuple[str, str]], curves: Sequence[dict]) -> list:
    """Markdown lines: a validation loss against updates (``curves``: entries ``{"row", "seed", "points":
    [[updates, loss], ...]}``, the fixed-mask scores of each row's pre-training checkpoints), each row's mean ±
    standard error over seeds at every update, and for each pair ``(A, B)`` of ``pairs`` the difference A − B
    paired over the seeds both have there, its 95% t interval over seeds and p, Holm-adjusted over every update of
    every pair (one family). A diagnostic of ours for FE-MLM (its lower-variance gradient should show as a lower
    loss at equal updates; Zheng et al. report downstream scores only); lower is better."""
    rows = []  # the baselines (each B) first, then the rows compared with them
    for row in [b for _, b in pairs] + [a for a, _ in pairs]:
        rows += [row] if row not in rows else []
    updates = sorted({int(u) for c in curves if c["row"] in rows for u, _ in c["points"]})
    at = {(row, u): {} for row in rows for u in updates}
    for curve in curves:
        if curve["row"] in rows:
            for u, loss in curve["points"]:
                at[(curve["row"], int(u))][curve["seed"]] = float(loss)
    differences = []
    for a, b in pairs:
        for u in updates:
            common = sorted(set(at[(a, u)]) & set(at[(b, u)]))
            differences.append((np.array([[at[(a, u)][s] - at[(b, u)][s]] for s in common]), common))
    adjusted = pc.adjusted([pc.seed_p(d) if len(common) >= 2 else math.nan for d, common in differences], "holm")
    header = "| updates | " + " | ".join(rows) + " |"
    for a, b in pairs:
        header += (f" {a} − {b} (paired over seeds) | 95% interval over seeds | p (t over seeds) | p, Holm over these "
                   f"{len(differences)} |")
    lines = [header, "| --- | " + " | ".join("---" for _ in rows) + " |" + " --- | --- | --- | --- |" * len(pairs)]
    for i, u in enumerate(updates):
        cells = [fmt(*mean_se(list(at[(row, u)].values())), 3) if at[(row, u)] else "-" for row in rows]
        line = f"| {u} | " + " | ".join(cells) + " |"
        for j in range(len(pairs)):
            (d, common), p_holm = differences[j * len(updates) + i], adjusted[j * len(updates) + i]
            line += (f" {fmt(*mean_se(d[:, 0]), 3) if len(common) else '-'} ({len(common)} seeds) | "
                     f"{interval_text(pc.seed_interval(d), 3) if len(common) >= 2 else '-'} | "
                     f"{p_text(pc.seed_p(d)) if len(common) >= 2 else '-'} | {p_text(p_holm)} |")
        lines.append(line)
    return lines
