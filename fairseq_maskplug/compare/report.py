"""The report of a comparison, from whatever units finished (``--collect``, or the end of a run), in files named
by its baseline and family (:func:`report_stem`: ``OUT/report-vs-BASELINE`` and, where the plan names its own
family, a short fingerprint of it), so reading one set of units against another baseline never replaces a report:

- ``STEM.json``: the stored-result format of ``docs/results/`` (``meta``, with the family read and every unit's
  wall time per stage; ``scores``: one entry per arm, seed and split with its accuracy, macro-F1 where the scorer
  gives one, and each item's outcome ``correct``; ``health``: what each unit measured, :mod:`.health`), plus the
  units still ``missing``;
- ``STEM.md``: first what it found, a verdict per comparison in one line, read by the package's one rule
  (:mod:`~fairseq_maskplug.evaluation.reading_rule`: a direction only where it survives Holm over the family),
  with what the design could have found; then a warning where the design cannot see (fewer than 3 seeds, a
  detectable difference above the plan's effect of interest) and the health of every arm and seed; then each
  arm's scores (mean ± standard error over seeds, the arms whose health failed marked), and on each compared
  split (test by default) the family's comparisons with their intervals, p values and sensitivity
  (:mod:`~fairseq_maskplug.evaluation.comparison_report`);
- with ``[pretrain] score_every``, each arm's validation MLM loss against updates under one fixed set of masks
  (``curves`` in the JSON; in the markdown each arm − the baseline paired over seeds, Holm over the updates);
- ``STEM.png`` (with matplotlib, the ``plot`` extra): each arm's accuracy on the first compared split per seed, the seeds' lines
  paired across arms, and each arm's mean with its 95% t interval.
"""

import datetime
import json
import math
import os
import shlex
import subprocess
from pathlib import Path
from typing import List, Optional

from .._version import __version__
from ..common.atomic import write_text
from ..evaluation import comparison_report as report
from ..evaluation import paired_comparison as pc
from ..evaluation import reading_rule as rule
from . import health, records
from .plan import Plan, PlanError, uses_seed
from .commands import producers_dir, seed_dir, unit_dir
from .units import COMMAND, missing_units, stage_seconds, unit_result
from .views import given_folder
from .compute import compute_lines, model_parameters, unit_compute

RECORD_FIELDS = ("accuracy", "macro_f1", "n", "classes_predicted", "correct")
#: fewer seeds than this and the report warns that the design cannot see: ours (2 seeds leave the interval over
#: seeds 1 degree of freedom)
FEWEST_SEEDS = 3


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
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as error:
                raise PlanError(f"{path}: not a whole result ({error}); run the unit again to score it anew: "
                                f"{COMMAND} {plan.path} --unit {arm}:{seed}") from None
            scores.append({"experiment": plan.name, "row": arm, "seed": seed, "split": split,
                           **{k: record.get(k) for k in RECORD_FIELDS}})
    meta = {"kind": "comparison", "plan": str(plan.path), "name": plan.name, "baseline": plan.baseline,
            "arms": [{"name": a.name, "task": a.task, "updates": a.updates, "options": list(a.options),
                      "data": str(a.data) if a.data else None, "from_scratch": a.from_scratch,
                      "finetune_task": a.finetune_task or plan.finetune.task,
                      "finetune_options": list(a.finetune_options), "seed_offset": a.seed_offset,
                      "label_noise": a.label_noise} for a in plan.arms],
            "produce": [list(c) for c in plan.produce], "seed_produce": [list(c) for c in plan.seed_produce],
            "finetune_command": list(plan.finetune_command), "evaluate_command": list(plan.evaluate_command),
            "splits": list(plan.splits), "compared": list(plan.compared),
            "seeds": [str(s) for s in plan.seeds],
            "corpus": str(given_folder(plan, "corpus")) if plan.corpus else None,
            "task": str(given_folder(plan, "labelled")),
            "model": str(plan.model), "version": __version__, "commit": source_commit(),
            "devices": unit_devices(plan), "parameters": model_parameters(plan.model),
            "family": [list(pair) for pair in plan.family()], "effect": plan.report.effect,
            "stage_seconds": {f"{arm}:{seed}": seconds for arm, seed in plan.units()
                              if (seconds := stage_seconds(plan, arm, seed))},
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "command": shlex.join(command) if command else None}
    records.check_same_items([unit_dir(plan, arm, seed) for arm, seed in plan.units()
                              if any(s["row"] == arm and s["seed"] == seed for s in scores)])
    data = {"meta": meta, "scores": scores, "health": collect_health(plan, scores), "missing": missing_units(plan),
            "compute": [{"row": arm, "seed": seed, **unit_compute(unit_dir(plan, arm, seed))}
                        for arm, seed in plan.units() if unit_result(plan, arm, seed, plan.compared[0])]}
    if plan.pretrain.score_every:
        data["curves"] = collect_curves(plan)
    return data


def collect_health(plan: Plan, scores: list) -> list:
    """One record per finished unit (:mod:`.health`): its realised mask rate, the task's classes and those its
    classifier predicted on the first compared split, the degenerate-track lines of its own and its producers'
    logs, the best validation F1 of a model its seed's producers trained (selective masking's tagger: shown, not
    judged), and the problems these show."""
    classes = health.task_classes(plan.labelled) if not plan.evaluate_command else None
    headline = {(s["row"], s["seed"]): s for s in scores if s["split"] == plan.compared[0]}
    found = []
    for arm, seed in plan.units():
        if (arm, seed) not in headline:
            continue
        unit = unit_dir(plan, arm, seed)
        logs = [unit / "logs" / "pretrain.log", *sorted((producers_dir(plan) / "logs").glob(f"{arm}.*.log"))]
        producers = sorted((seed_dir(plan, seed) / "logs").glob("*.log")) if uses_seed(plan.arm(arm)) else []
        quality = [f"{log.stem}: best valid F1 {f1:.1f}%" for log in producers
                   for f1 in [health.best_valid_f1(log)] if f1 is not None]
        found.append({"row": arm, "seed": seed, "mask_rate": health.mask_rate(unit / "logs" / "pretrain.log"),
                      "unit_mask_rate": health.mask_rate(unit / "logs" / "pretrain.log", "unit_mask_rate"),
                        "classes": classes, "classes_predicted": headline[(arm, seed)].get("classes_predicted"),
                        "warnings": health.degenerate_lines(logs + producers), "producers": quality})
    return health.problems(found, plan.baseline)


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


def family_pairs(meta: dict) -> list:
    """The pairs a stored report reads (``meta.family``; a report stored before it was recorded: every arm − the
    baseline)."""
    if meta.get("family"):
        return [tuple(pair) for pair in meta["family"]]
    return [(arm["name"], meta["baseline"]) for arm in meta["arms"] if arm["name"] != meta["baseline"]]


def comparisons_of(data: dict, sims: int = pc.SIMS, sensitivity: bool = True) -> list:
    """The family's comparisons of a stored report (:func:`family_pairs` on every compared split), read by the rule
    (without ``sensitivity``: no power figures, no simulation)."""
    meta, scores = data["meta"], data["scores"]
    rows = [arm["name"] for arm in meta["arms"]]
    table = {row: {(s["split"], s["seed"]): s for s in scores if s["row"] == row} for row in rows}
    return report.paired_comparisons(report.split_family(family_pairs(meta), meta["compared"]), table, sims,
                                     meta.get("effect", rule.DEFAULT_EFFECT), sensitivity)


def warnings(data: dict, found: list) -> list:
    """Sentences saying where the design cannot see: too few seeds, a detectable difference above the plan's effect
    of interest (``[report] effect``, the difference its seeds-needed figures are for), arms and seeds whose health
    failed, constant predictors."""
    meta, out = data["meta"], []
    seeds = max((c.seeds for c in found), default=0)
    if found and seeds < FEWEST_SEEDS:
        out.append(f"Only {seeds} seed{'s' if seeds != 1 else ''} with paired outcomes: the interval over seeds has "
                   f"{max(seeds - 1, 0)} degree{'s' if seeds != 2 else ''} of freedom, so this design measures almost "
                   f"nothing; run at least {FEWEST_SEEDS} (5 is better) before reading it.")
    effect = meta.get("effect", rule.DEFAULT_EFFECT)
    blind = [c for c in found if c.same_as is None and c.detectable > effect]
    if blind:
        worst = max(blind, key=lambda c: c.detectable)
        read = [c for c in found if c.same_as is None and not math.isnan(c.rule_p)]
        out.append(f"This design cannot see a difference of {rule.number(effect)} points, the plan's effect of "
                   f"interest: {len(blind)} of its {len(read)} comparison(s) find with 80% probability only larger "
                   f"ones ({', '.join(f'{c.name} on {c.split}: {c.detectable:.1f}' for c in blind)} points; the "
                   f"largest, {worst.name} on {worst.split}). \"No difference shown\" there says nothing of a "
                   f"difference of {rule.number(effect)} points.")
    failed = health.failing(data)
    if failed:
        out.append(f"{sum(map(len, failed.values()))} arm-seed(s) did not measure what their arm is for "
                   f"({'; '.join(row + ': seed ' + ', '.join(map(str, bad)) for row, bad in failed.items())}); "
                   "see the health below: their outcomes are in the tables, marked.")
    headline = meta["compared"][0]
    constant = [f"{s['row']} (seed {s['seed']})" for s in data["scores"]
                if s["split"] == headline and s.get("classes_predicted") == 1]
    if constant:
        out.append(f"{len(constant)} classifier(s) predicted a single class on {headline}: {', '.join(constant)}. "
                   "Their accuracy is a class's share, not what the arm taught; the differences compare constant "
                   "answers. Train longer (more fine-tuning epochs, more pre-training) before reading them.")
    return out


def health_lines(data: dict) -> list:
    """The health of every arm and seed: the realised mask rate (and the units' where a policy masks units of
    several tokens), the classes predicted, the problems."""
    records = data.get("health") or []
    if not records:
        return ["(not recorded: a report stored before units recorded their health)"]
    lines = ["| arm | seed | realised mask rate (tokens; the policy's own units where they span several tokens) | "
             "classes predicted | its producers' trained models | health |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in records:
        rate = "-" if r.get("mask_rate") is None else f"{100 * r['mask_rate']:.1f}%"
        if r.get("unit_mask_rate") is not None:  # (a report stored before it was recorded has none)
            rate += f" ({100 * r['unit_mask_rate']:.1f}% of units)"
        classes = ("-" if r.get("classes_predicted") is None else
                   f"{r['classes_predicted']} of {r['classes']}" if r.get("classes") else str(r["classes_predicted"]))
        said = "; ".join(r.get("problems") or []) or "ok"
        made = "; ".join(r.get("producers") or []) or "-"
        lines.append(f"| {r['row']} | {r['seed']} | {rate} | {classes} | {made} | "
                     f"{'**fails**: ' if r.get('problems') else ''}{said} |")
    return lines


def report_parts(data: dict, found: Optional[list] = None) -> dict:
    """The report's parts from the stored dictionary alone (what a page's generated block reads), each a list of
    lines starting with its ``## `` heading: ``verdicts`` (with the warnings where the design cannot see);
    ``health``; ``scores``; ``versus-SPLIT`` for each compared split; ``raw-p`` (:func:`raw_p_lines`); ``compute``
    (:mod:`.compute`) where the units' logs were read; ``curves`` where the plan scored its pre-training. ``found``: the family's comparisons where the caller has them (:func:`comparisons_of`)."""
    meta, scores = data["meta"], data["scores"]
    rows = [arm["name"] for arm in meta["arms"]]
    baseline, splits, compared = meta["baseline"], meta["splits"], meta["compared"]
    found = comparisons_of(data) if found is None else found
    table = {row: {(s["split"], s["seed"]): s for s in scores if s["row"] == row} for row in rows}
    of = lambda row, split: [v for (s, _), v in table[row].items() if s == split]  # noqa: E731
    cell = lambda vs, key: report.fmt(*report.mean_se([v[key] for v in vs]), 1) if vs else "-"  # noqa: E731
    parts = {"verdicts": ["## what it found (a direction only where it survives Holm over the family: "
                          "docs/compare.md, reading a report)", ""]
             + ([f"- {rule.verdict(c)}" for c in found] or ["- nothing to compare yet: no two arms share a seed"])
             + ["", rule.family_text(found) + "."]}
    cautions = warnings(data, found)
    if cautions:
        parts["verdicts"] += ["", "**What this design cannot see:**", ""] + [f"- {line}" for line in cautions]
    parts["health"] = ["## health of every arm and seed (realised mask rate against the baseline's, classes "
                       "predicted of the task's, degenerate tracks)", ""] + health_lines(data)
    failed = health.failing(data)
    # the compared splits first (accuracy, and macro-F1 where the scorer gives it), then the others' accuracy
    columns = []
    for split in [*compared, *(split for split in splits if split not in compared)]:
        columns.append((split, "accuracy"))
        if split in compared and any(s.get("macro_f1") is not None for s in scores if s["split"] == split):
            columns.append((split, "macro_f1"))
    name = {"accuracy": "accuracy", "macro_f1": "macro-F1"}
    headline = compared[0]
    lines = parts["scores"] = ["## scores (%), mean ± standard error over seeds",
                               "| arm | seeds | " + " | ".join(f"{split} {name[key]}" for split, key in columns)
                               + " | health |",
                               "| --- | --- | " + " | ".join("---" for _ in columns) + " | --- |"]
    for row in rows:
        mark = f"fails in seed {', '.join(map(str, failed[row]))}" if row in failed else "ok"
        lines.append(f"| {row} | {len(of(row, headline))} | "
                     + " | ".join(cell(of(row, split), key) for split, key in columns) + f" | {mark} |")
    for split in compared:
        parts[f"versus-{split}"] = ([f"## the family's comparisons on {split} (paired over seeds and {split} items)"]
                                    + report.comparison_tables(found, split, f"{split} accuracy"))
    parts["raw-p"] = raw_p_lines(found)
    if data.get("compute"):
        parts["compute"] = ["## compute of each arm: the tokens its stages trained on (mean over its units) and the "
                            "training FLOPs they took (6 N D, Kaplan et al. 2020)", ""] + compute_lines(data)
    if data.get("curves"):
        pretrained = {arm["name"] for arm in meta["arms"] if arm["task"]}
        curve_pairs = [(a, b) for a, b in family_pairs(meta) if a in pretrained and b in pretrained]
        lines = parts["curves"] = ["## validation MLM loss (bits) of each arm's pre-training under one fixed set of "
                                   "random masks, mean ± standard error over seeds (lower is better)"]
        if curve_pairs:
            lines += [""] + report.curve_tables(curve_pairs, data["curves"])
        else:
            lines += ["", f"(no table: the baseline {baseline} has no pre-training to compare with)"]
    return parts


def raw_p_lines(found: list, alpha: float = 0.05) -> list:
    """The family's p-values before Holm's adjustment (each distinct comparison once), and how many fall below
    ``alpha``: where every arm is the same configuration (a null control) about ``alpha`` of them should, and Holm
    should name none (Holm 1979 holds the family-wise error at ``alpha``)."""
    distinct = [c for c in found if c.same_as is None and not math.isnan(c.rule_p)]
    lines = [f"## the family's p-values before Holm ({len(distinct)} distinct comparison(s)): how many fall below "
             f"{alpha:g}", ""]
    if not distinct:
        return lines + ["- none to read yet"]
    for label, of in (("the rule's p (both intervals: the larger of the two t tests)", lambda c: c.rule_p),
                      ("the paired t over seeds", lambda c: c.p)):
        below = sum(of(c) < alpha for c in distinct)
        lines.append(f"- {label}: {below} of {len(distinct)} ({100 * below / len(distinct):.0f}%) below {alpha:g}; "
                     f"sorted: {', '.join(f'{of(c):.3f}' for c in sorted(distinct, key=of))}")
    return lines + [f"- named after Holm: {sum(c.reading != rule.NONE for c in distinct)}"]


def provenance(meta: dict) -> str:
    """Where a stored report's figures come from, in one line."""
    return (f"{', '.join(meta.get('devices') or ['device not recorded'])}, plan {meta['name']}, seeds "
            f"{' '.join(meta['seeds'])}, fairseq-maskplug {meta.get('version')}"
            + (f", commit {meta['commit']}" if meta.get("commit") else "") + f", {meta.get('date')}")


def markdown(data: dict) -> str:
    """The whole report: its title, its provenance, then every part (:func:`report_parts`), what it found first."""
    meta = data["meta"]
    lines = [f"# {meta['name']}: {', '.join(a + ' − ' + b for a, b in family_pairs(meta))}",
             f"plan {meta['plan']}; {provenance(meta)}"]
    for part in report_parts(data).values():
        lines += [""] + part
    if data.get("missing"):
        lines += ["", f"Missing units (not in the tables): {', '.join(data['missing'])}"]
    return "\n".join(lines) + "\n"


def report_stem(plan: Plan) -> str:
    """The report's file name without its suffix: ``report-vs-BASELINE``, and where the plan names its own family a
    fingerprint of it (``-family-XXXXXXXX``): two readings of one set of units never share a file."""
    import hashlib

    stem = f"report-vs-{plan.baseline}"
    if plan.report.family:
        stem += "-family-" + hashlib.sha256(json.dumps(plan.family()).encode()).hexdigest()[:8]
    return stem


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
    stem = plan.out / report_stem(plan)
    write_text(f"{stem}.json", json.dumps(data, indent=1) + "\n")
    text = markdown(data)
    write_text(f"{stem}.md", text)
    drew = plot(plan, data, Path(f"{stem}.png")) if data["scores"] else False
    say(text)
    say(f"report: {stem}.json, {stem}.md"
        + (f", {stem}.png" if drew else " (no plot: matplotlib is not installed; install the plot extra, "
           "`pip install 'fairseq-maskplug[plot]'` or `MASKPLUG_EXTRAS=plot bash recipes/setup_env.sh`)"))
    if data["missing"]:
        say(f"missing units ({len(data['missing'])}): {' '.join(data['missing'])}")
    return data
