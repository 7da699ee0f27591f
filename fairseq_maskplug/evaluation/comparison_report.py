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


def curve_tables(pairs: Sequence[Tuple[str, str]], curves: Sequence[dict]) -> list:
    """Markdown lines: a validation loss against updates (``curves``: entries ``{"row", "seed", "points":
    [[updates, loss], ...]}``, the fixed-mask scores of each row's pre-training checkpoints), each row's mean ±
    standard error over seeds at every update, and for each pair ``(A, B)`` of ``pairs`` the difference A − B
    paired over the seeds both have there, its 95% t interval over seeds and p, Holm-adjusted over every update of
    every pair (one family). Zheng et al.'s measure (FE-MLM's lower-variance gradient shows as a lower loss at
    equal updates); lower is better."""
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
