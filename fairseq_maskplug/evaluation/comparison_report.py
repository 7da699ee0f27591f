"""The tables of a seeded, paired comparison, from stored per-seed and per-item outcomes: each difference with
its intervals over seeds and over seeds and items, the reading, what the run excludes, p-values adjusted over
the family (Holm) and the sample a difference of that size would need
(:mod:`.paired_comparison`'s statistics). ``benchmarks/gpu_science.py`` (the papers' comparisons) and
``fairseq-maskplug-compare`` (a user's own) print these same tables."""

import math
from typing import Sequence, Tuple

import numpy as np

from . import paired_comparison as pc


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


def paired_comparisons(pairs: Sequence[Tuple[str, str]], table: dict, split: str = "test", sims: int = 400) -> list:
    """The :class:`~fairseq_maskplug.evaluation.paired_comparison.Comparison` of each pair ``(A, B)`` of ``pairs``
    both of whose rows have paired outcomes on ``split`` (``table[row][(split, seed)]`` = a score entry with
    ``correct``, one character per item), with Holm's adjustment over them (one family of comparisons)."""
    found = []
    for a, b in pairs:
        if a not in table or b not in table:
            continue
        outcomes = {row: {seed: v.get("correct") or "" for (s, seed), v in table[row].items() if s == split}
                    for row in (a, b)}
        common = sorted(set(outcomes[a]) & set(outcomes[b]))
        if not common or not all(outcomes[a][s] and len(outcomes[a][s]) == len(outcomes[b][s]) for s in common):
            continue
        d = pc.outcome_matrix({s: outcomes[a][s] for s in common}, {s: outcomes[b][s] for s in common})
        found.append(pc.compare(a, b, d, sims=sims) if d.shape[0] >= 2 else pc.compare(a, b, d, sims=0))
    for comparison, p in zip(found, pc.adjusted([c.p for c in found], "holm")):
        comparison.adjusted_p = p
    return found


def comparison_tables(pairs: Sequence[Tuple[str, str]], table: dict, split: str = "test",
                      what: str = "test accuracy") -> list:
    """Markdown lines: the paired comparisons of ``pairs`` on ``split`` (:func:`paired_comparisons`): the difference with
    its interval over seeds (these items) and its crossed interval (seeds and items), the reading and what the
    run excludes; then the p over seeds, Holm-adjusted over the table, the rule's detectable difference and the
    sample a difference of this size would need, and the pooled discordant items (a description)."""
    found = paired_comparisons(pairs, table, split)
    intervals = ["", f"| A − B ({what}, points) | seeds × items | difference ± SE (seeds) | 95% interval over seeds "
                 "(these items) | 95% crossed interval (seeds and items) | reading | the run excludes |",
                 "| --- | --- | --- | --- | --- | --- | --- |"]
    tests = ["", f"| A − B | p (t over seeds) | p, Holm over these {len(found)} | detectable by the reading rule "
             "(80%, simulated) | seeds / items needed for 80% power at this size | A only / B only right (all pairs) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for c in found:
        intervals.append(f"| {c.a} − {c.b} | {c.seeds} × {c.items} | {fmt(c.difference, c.seed_se)} | "
                         f"{interval_text(c.seed_interval)} | {interval_text(c.crossed_interval)} | {c.reading} | "
                         f"{c.excludes} |")
        detect = "-" if math.isnan(c.detectable) else f"{c.detectable:.2f}"
        tests.append(f"| {c.a} − {c.b} | {p_text(c.p)} | {p_text(c.adjusted_p)} | {detect} | "
                     f"{c.seeds_needed or '-'} / {c.items_needed or '-'} | {c.discordant[0]} / {c.discordant[1]} |")
    return intervals + tests
