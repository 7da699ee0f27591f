"""The report of a comparison, from whatever units finished (``--collect``, or the end of a run):

- ``OUT/report.json``: the stored-result format of ``docs/results/`` (``meta``; ``scores``: one entry per
  arm, seed and split with its accuracy, macro-F1 where the scorer gives one, and each item's outcome
  ``correct``), plus the units still ``missing``;
- ``OUT/report.md``: each arm's scores (mean ± standard error over seeds), then, on each compared split (test by
  default), every arm − the baseline with the intervals, the reading, what the run excludes, Holm-adjusted
  p-values and the sample a difference of that size would need
  (:mod:`~fairseq_maskplug.evaluation.comparison_report`); a run whose classifiers predict one class says so
  instead of reading differences;
- with ``[pretrain] score_every``, each arm's validation MLM loss against updates under one fixed set of masks
  (``curves`` in the JSON; in the markdown each arm − the baseline paired over seeds, Holm over the updates);
- ``OUT/report.png`` (with matplotlib): each arm's accuracy on the first compared split per seed, the seeds' lines
  paired across arms, and each arm's mean with its 95% t interval.
"""

import datetime
import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import List, Optional

from .._version import __version__
from ..common.atomic import write_text
from ..evaluation import comparison_report as report
from ..evaluation import paired_comparison as pc
from .plan import Plan
from .commands import unit_dir
from .units import missing_units, unit_result

RECORD_FIELDS = ("accuracy", "macro_f1", "n", "classes_predicted", "correct")


def source_commit() -> Optional[str]:
    """The commit of the package's source where it runs from a checkout of this repository (``MASKPLUG_COMMIT``
    names it where the tree travelled without its history); None for an installed wheel, even one installed
    inside another repository."""
    if os.environ.get("MASKPLUG_COMMIT"):
        return os.environ["MASKPLUG_COMMIT"]
    root = Path(__file__).resolve().parents[2]  # the folder holding fairseq_maskplug/
    try:
        found = subprocess.run(["git", "rev-parse", "--show-toplevel", "--short", "HEAD"], cwd=root,
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = found.stdout.split()
    if found.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != root:
        return None
    return lines[1]


def unit_devices(plan: Plan) -> List[str]:
    """What the finished units ran on (each unit's ``device.txt``), each once."""
    found = set()
    for arm, seed in plan.units():
        path = unit_dir(plan, arm, seed) / "device.txt"
        if path.is_file():
            found.add(path.read_text(encoding="utf-8").strip())
    return sorted(found)


def collect_results(plan: Plan, command: Optional[List[str]] = None) -> dict:
    """The stored-result dictionary of every finished unit (no timing fields: two runs of one plan give the
    same file but for ``meta.date``)."""
    scores = []
    for arm, seed in plan.units():
        for split in plan.splits:
            path = unit_result(plan, arm, seed, split)
            if path is None:
                continue
            record = json.loads(path.read_text(encoding="utf-8"))
            scores.append({"experiment": plan.name, "row": arm, "seed": seed, "split": split,
                           **{k: record.get(k) for k in RECORD_FIELDS}})
    meta = {"kind": "comparison", "plan": str(plan.path), "name": plan.name, "baseline": plan.baseline,
            "arms": [{"name": a.name, "task": a.task, "updates": a.updates, "options": list(a.options),
                      "data": str(a.data) if a.data else None, "from_scratch": a.from_scratch,
                      "finetune_task": a.finetune_task or plan.finetune.task,
                      "finetune_options": list(a.finetune_options)} for a in plan.arms],
            "produce": [list(c) for c in plan.produce], "seed_produce": [list(c) for c in plan.seed_produce],
            "finetune_command": list(plan.finetune_command), "evaluate_command": list(plan.evaluate_command),
            "splits": list(plan.splits), "compared": list(plan.compared),
            "seeds": [str(s) for s in plan.seeds],
            "corpus": str(plan.corpus) if plan.corpus else None, "task": str(plan.labelled),
            "model": str(plan.model), "version": __version__, "commit": source_commit(),
            "devices": unit_devices(plan),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "command": shlex.join(command) if command else None}
    data = {"meta": meta, "scores": scores, "missing": missing_units(plan)}
    if plan.pretrain.score_every:
        data["curves"] = collect_curves(plan)
    return data


def curve_points(path: Path) -> list:
    """``[[updates, loss in bits], ...]`` by updates, from a ``curve.jsonl`` (evaluate_mlm's records, written whole)."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sorted([int(r["updates"]), float(r["loss"])] for r in records)


def collect_curves(plan: Plan) -> list:
    """``[pretrain] score_every``'s curves: one entry per pre-training unit that scored its checkpoints, its points
    ``[updates, loss in bits]`` (the stored-result format's ``curves``, as ``recipes/fe_mlm.sh``'s)."""
    curves = []
    for arm, seed in plan.units():
        path = unit_dir(plan, arm, seed) / "curve.jsonl"
        if path.is_file():
            curves.append({"experiment": plan.name, "row": arm, "seed": seed, "points": curve_points(path)})
    return curves


def report_parts(data: dict) -> dict:
    """The report's parts from the stored dictionary alone (what a page's generated block reads), each a list of
    lines starting with its ``## `` heading: ``scores``; ``versus-SPLIT`` for each compared split; ``curves`` where
    the plan scored its pre-training."""
    meta, scores = data["meta"], data["scores"]
    rows = [arm["name"] for arm in meta["arms"]]
    baseline, splits, compared = meta["baseline"], meta["splits"], meta["compared"]
    versus = [(row, baseline) for row in rows if row != baseline]
    table = {row: {(s["split"], s["seed"]): s for s in scores if s["row"] == row} for row in rows}
    of = lambda row, split: [v for (s, _), v in table[row].items() if s == split]  # noqa: E731
    cell = lambda vs, key: report.fmt(*report.mean_se([v[key] for v in vs]), 1) if vs else "-"  # noqa: E731
    # the compared splits first (accuracy, and macro-F1 where the scorer gives it), then the others' accuracy
    columns = []
    for split in [*compared, *(split for split in splits if split not in compared)]:
        columns.append((split, "accuracy"))
        if split in compared and any(s.get("macro_f1") is not None for s in scores if s["split"] == split):
            columns.append((split, "macro_f1"))
    name = {"accuracy": "accuracy", "macro_f1": "macro-F1"}
    headline = compared[0]
    lines = ["## scores (%), mean ± standard error over seeds",
             "| arm | seeds | " + " | ".join(f"{split} {name[key]}" for split, key in columns) + " |",
             "| --- | --- | " + " | ".join("---" for _ in columns) + " |"]
    constant = []
    for row in rows:
        lines.append(f"| {row} | {len(of(row, headline))} | "
                     + " | ".join(cell(of(row, split), key) for split, key in columns) + " |")
        constant += [f"{row} (seed {v['seed']})" for v in of(row, headline) if v.get("classes_predicted") == 1]
    if constant:
        lines += ["", f"**Not read:** {len(constant)} classifier(s) predicted a single class on {headline}: "
                  f"{', '.join(constant)}. Their accuracy is a class's share, not what the arm taught; the "
                  "differences below compare constant answers. Train longer (more fine-tuning epochs, more "
                  "pre-training) before reading them."]
    parts = {"scores": lines}
    for split in compared:
        parts[f"versus-{split}"] = ([f"## each arm − the baseline on {split} (paired over seeds and {split} items)"]
                                    + report.comparison_tables(versus, table, split, f"{split} accuracy"))
    if data.get("curves"):
        pretrained = {arm["name"] for arm in meta["arms"] if arm["task"]}
        curve_pairs = [(a, b) for a, b in versus if a in pretrained and b in pretrained]
        lines = parts["curves"] = ["## validation MLM loss (bits) of each arm's pre-training under one fixed set of "
                                   "random masks, mean ± standard error over seeds (lower is better)"]
        if curve_pairs:
            lines += [""] + report.curve_tables(curve_pairs, data["curves"])
        else:
            lines += ["", f"(no table: the baseline {baseline} has no pre-training to compare with)"]
    return parts


def provenance(meta: dict) -> str:
    """Where a stored report's figures come from, in one line."""
    return (f"{', '.join(meta.get('devices') or ['device not recorded'])}, plan {meta['name']}, seeds "
            f"{' '.join(meta['seeds'])}, fairseq-maskplug {meta.get('version')}"
            + (f", commit {meta['commit']}" if meta.get("commit") else "") + f", {meta.get('date')}")


def markdown(data: dict) -> str:
    """The whole report: its title, its provenance, then every part (:func:`report_parts`)."""
    meta = data["meta"]
    lines = [f"# {meta['name']}: every arm against {meta['baseline']}", f"plan {meta['plan']}; {provenance(meta)}"]
    for part in report_parts(data).values():
        lines += [""] + part
    if data.get("missing"):
        lines += ["", f"Missing units (not in the tables): {', '.join(data['missing'])}"]
    return "\n".join(lines) + "\n"


def plot(plan: Plan, data: dict, path: Path) -> bool:
    """The per-seed figure (module docstring); False without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [arm.name for arm in plan.arms]
    headline = plan.compared[0]
    test = {(s["row"], s["seed"]): s["accuracy"] for s in data["scores"] if s["split"] == headline}
    figure, axis = plt.subplots(figsize=(1.6 * len(rows) + 2, 4))
    for seed in plan.seeds:
        xs = [x for x, row in enumerate(rows) if (row, seed) in test]
        axis.plot(xs, [test[(rows[x], seed)] for x in xs], color="tab:gray", alpha=0.5, marker="o", markersize=4,
                  linewidth=1)
    for x, row in enumerate(rows):
        values = [test[(row, s)] for s in plan.seeds if (row, s) in test]
        if len(values) >= 2:
            mean, se = report.mean_se(values)
            low, _ = pc.t_interval(mean, se ** 2, len(values) - 1)
            axis.errorbar([x + 0.15], [mean], yerr=[mean - low], color="black", capsize=4, marker="D")
    axis.set_xticks(range(len(rows)), rows)
    axis.set(ylabel=f"{headline} accuracy (%)",
             title=f"{plan.name}: per seed (lines pair a seed), mean and 95% t interval")
    axis.title.set_fontsize(9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def write_report(plan: Plan, command: Optional[List[str]] = None, say=print) -> dict:
    """Write the report's files (module docstring) from the finished units; the stored-result dictionary."""
    data = collect_results(plan, command)
    plan.out.mkdir(parents=True, exist_ok=True)
    write_text(str(plan.out / "report.json"), json.dumps(data, indent=1) + "\n")
    text = markdown(data)
    write_text(str(plan.out / "report.md"), text)
    drew = plot(plan, data, plan.out / "report.png") if data["scores"] else False
    say(text)
    say(f"report: {plan.out / 'report.json'}, {plan.out / 'report.md'}"
        + (f", {plan.out / 'report.png'}" if drew else " (no plot: matplotlib is not installed)"))
    if data["missing"]:
        say(f"missing units ({len(data['missing'])}): {' '.join(data['missing'])}")
    return data

