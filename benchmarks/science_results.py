"""The results files ``benchmarks/gpu_science.py`` wrote until 2026-12-02, when it ran its own jobs: ``{"meta",
"scores", "curves", "acceptance", "jobs"}``, each score one unit's record (``docs/results/science_*.json`` and the
first ``compare_*_cpu_*.json`` runs). The pages' blocks cite them (``benchmarks/pages.py``), so their tables are made
here: per experiment each row's mean ± standard error over seeds, then the family's paired comparisons read by the
package's one rule (:mod:`fairseq_maskplug.evaluation.reading_rule`: a direction only where the interval over seeds
and the crossed interval both exclude 0 after Holm over the experiment's family, its pairs on every compared split).
Since then the harness stores each plan's own report (``fairseq-maskplug-compare``'s ``report.json``)."""

from fairseq_maskplug.evaluation import comparison_report as report, paired_comparison as pc, reading_rule as rule
from fairseq_maskplug.evaluation.comparison_report import fmt, mean_se

#: the comparisons of each experiment (row A, row B): A - B, the paper's method first
COMPARISONS = {
    "selective": [("selective", "matched-random"), ("selective", "no-TaskPT"), ("matched-random", "no-TaskPT")],
    "l3": [("L3-tartan", "RTM-tartan"), ("L3-tartan", "STL"), ("RTM-tartan", "STL")],
    "fe": [("fe_subword", "mlm")],
    "tlm": [("tlm-bm25", "task-only"), ("tlm-bm25", "tlm-random"), ("tlm-dsir", "tlm-random"),
            ("tlm-bm25", "general-ft")],
    "bart": [("ssm", "rand"), ("ssm", "none"), ("rand", "none"), ("ssm", "orig"), ("sup", "ssm"), ("meta", "ssm")],
    "toy": [("method", "baseline")],  # --smoke: benchmarks/science_toy.py's planted difference
}
#: the experiments not scored by MR test accuracy: the splits compared (the first is the headline) and their names
SPLITS = {"bart": {"seen": "EM on seen questions", "heldout": "EM on held-out questions"}}



def comparisons(exp: str, table: dict, sims: int = pc.SIMS, sensitivity: bool = True) -> list:
    """The paired comparisons of the experiment's family, each pair of ``COMPARISONS[exp]`` on each of its compared
    splits, read together (:func:`~fairseq_maskplug.evaluation.comparison_report.paired_comparisons`)."""
    splits = list(SPLITS.get(exp, {"test": ""}))
    return report.paired_comparisons(report.split_family(COMPARISONS[exp], splits), table, sims,
                                     sensitivity=sensitivity)


def experiment_table(data: dict, exp: str) -> dict:
    """``{row: {(split, seed): score}}`` of one experiment of a results file."""
    scores = [s for s in data["scores"] if s["experiment"] == exp]
    return {row: {(s["split"], s["seed"]): s for s in scores if s["row"] == row} for row in {s["row"] for s in scores}}


def families(data: dict) -> list:
    """``[(experiment, comparisons)]`` of a results file, each experiment's family read by the rule without power
    figures (the cross-run family of ``benchmarks/pages.py``)."""
    return [(exp, comparisons(exp, experiment_table(data, exp), sensitivity=False)) for exp in COMPARISONS
            if any(s["experiment"] == exp for s in data.get("scores", []))]


def provenance(meta: dict) -> str:
    """Where a results file of this format comes from, in one line."""
    return (f"{meta.get('device')}, shape {meta.get('shape')}, seeds {' '.join(meta.get('seeds', []))}, commit "
            f"{meta.get('commit')}, {meta.get('date')}, {meta.get('elapsed_s', '?')} s")


def summary_parts(data: dict) -> dict:
    """The summary's parts, each a list of lines starting with its ``## `` heading: one per experiment with
    scores (``selective``, ``l3``, ``fe``, ``tlm``, ``bart``, ``toy``), ``fe-curves``, ``acceptance``, ``jobs``."""
    parts = {}
    for exp in ("selective", "l3", "fe", "tlm", "bart", "toy"):  # fe: MR fine-tuning after the continued pre-training
        scores = [s for s in data["scores"] if s["experiment"] == exp]
        if not scores:
            continue
        lines = parts[exp] = []
        compared = [a for pair in COMPARISONS[exp] for a in pair]
        # the compared rows in their order, then any other (a recipe's peer rows) by name: the same order every run
        rows = sorted({s["row"] for s in scores}, key=lambda r: (compared.index(r) if r in compared else len(compared), r))
        table = {row: {(s["split"], s["seed"]): s for s in scores if s["row"] == row} for row in rows}
        cell = lambda vs, key: fmt(*mean_se([v[key] for v in vs]), 1) if vs else "-"  # noqa: E731
        of = lambda row, split: [v for (s, _), v in table[row].items() if s == split]  # noqa: E731
        if exp in SPLITS:  # BART's closed-book probe: exact match on each question set
            names = SPLITS[exp]
            lines.append(f"\n## {exp}: " + " and ".join(names.values()) + " (%), mean ± standard error over seeds")
            lines.append("| row | seeds | " + " | ".join(names.values()) + " |")
            lines.append("| --- | --- | " + " | ".join("---" for _ in names) + " |")
            for row in rows:
                lines.append(f"| {row} | {len(of(row, next(iter(names))))} | "
                             + " | ".join(cell(of(row, split), "accuracy") for split in names) + " |")
            found = comparisons(exp, table)
            for split, what in names.items():
                lines.extend(report.comparison_tables(found, split, what))
            lines.extend(["", *(f"- {rule.verdict(c)}" for c in found)])
            continue
        what = "the planted toy problem's" if exp == "toy" else "MR"
        lines.append(f"\n## {exp}: {what} test accuracy and macro-F1 (%), mean ± standard error over seeds")
        lines.append("| row | seeds | test accuracy | test macro-F1 | valid accuracy |")
        lines.append("| --- | --- | --- | --- | --- |")
        notes = []
        for row in rows:
            test, valid = of(row, "test"), of(row, "valid")
            lines.append(f"| {row} | {len(test)} | {cell(test, 'accuracy')} | {cell(test, 'macro_f1')} | "
                         f"{cell(valid, 'accuracy')} |")
            constant = sum(1 for v in test if v.get("classes_predicted") == 1)
            if constant:
                notes.append(f"note: {row} predicted a single class on test in {constant} of {len(test)} seeds "
                             "(a constant predictor: its accuracy is a class's share)")
        lines.extend(notes)
        found = comparisons(exp, table)
        lines.extend(report.comparison_tables(found))
        lines.extend(["", *(f"- {rule.verdict(c)}" for c in found)])
    curves = data["curves"]
    if curves:
        lines = parts["fe-curves"] = []
        lines.append("\n## fe: in-domain validation MLM loss (bits) under one fixed set of random masks, "
                     "mean ± standard error over seeds")
        lines.extend(report.curve_tables([("fe_subword", "mlm")], curves))
    rows = [r for r in data["acceptance"] if "row" in r]  # gpu_acceptance.py's table rows (not its runs)
    if rows:
        lines = parts["acceptance"] = []
        lines.append("\n## acceptance rows (benchmarks/gpu_acceptance.py; the GPU shared with the jobs above, "
                     "so words/s is a record, not a speed comparison)")
        lines.append("| task | precision | words/s | relative | peak MiB | overflows / 100 updates | final loss |")
        lines.append("| --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            lines.append(f"| {r['row']} | {r.get('precision')} | {r.get('wps')} | {r.get('relative')} | "
                         f"{r.get('peak_mib')} | {r.get('overflows_per_100')} | {r.get('final_loss')} |")
    lines = parts["jobs"] = ["\n## jobs"]
    for name, job in data["jobs"].items():
        lines.append(f"- {name}: {job.get('status')}" + (f", {job['seconds']:.0f} s" if "seconds" in job else ""))
    return parts


def summarize(data: dict) -> str:
    """The whole summary: the run's provenance, then every part (:func:`summary_parts`)."""
    lines = [f"# science run: {provenance(data['meta'])}"]
    for part in summary_parts(data).values():
        lines.extend(part)
    return "\n".join(lines)
