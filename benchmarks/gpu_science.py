"""The papers' comparisons with seeds, in one command sized for a lent GPU (issue 49): the papers' plans run by
``fairseq-maskplug-compare``, their units side by side, every finished row written to one JSON file at once.

    python benchmarks/gpu_science.py --data DATA --work DIR --out science.json        # a CUDA machine
    python benchmarks/gpu_science.py --data DATA --work DIR --out science.json --shape tiny --seeds 1 2 \\
        --budget 900                                                                   # the CPU smoke
    python benchmarks/gpu_science.py --summarize science.json                          # tables again
    python benchmarks/gpu_science.py --smoke                    # the harness end to end in seconds (toy rows)

DATA is the demo data written by ``python -m preprocess.prepare_demo`` (an offline machine cannot
fetch it: prepare it where the registries are reachable and carry it; its manifest's sizes become
the recipes' knobs). The general model is trained once (``recipes/lib.sh``'s ``general_model``, at the
shape's size) or linked (``--general``); then each experiment runs its paper's plan,
``recipes/compare_plans/EXP.toml``, through ``fairseq-maskplug-compare`` over ``--seeds`` (one plan at a time,
``--parallel`` units at once on the one GPU; every stage of a unit draws from its seed), with the run's data,
general model and output folder set (``--set``), and the shape's settings (:data:`PLAN_SETTINGS`):

- ``selective`` (Gu et al. 2020): no-TaskPT, then per seed its classifier, tagger and track, then selective and
  matched-random TaskPT, MR accuracy and macro-F1;
- ``fe`` (Zheng et al.): MLM and FE-MLM at equal updates and tokens, each checkpoint's in-domain validation loss
  under one fixed set of random masks, and MR after both;
- ``l3`` (Kimura et al.): STL, RTM and L3 joint fine-tuning with META-TARTAN weights, MR accuracy and macro-F1;
- ``tlm`` (Yao et al. 2022): task-only, TLM with BM25, DSIR and random documents, and the general model
  fine-tuned, MR accuracy and macro-F1;
- ``bart`` (Ye, Li et al.): none, +Rand and +SSM, exact match on the entity cloze's seen and held-out questions;
  its data and general denoising model are made once (``recipes/bart_policies.sh``, ``BART_GENERAL_ONLY=1``);
- ``acceptance``: ``benchmarks/gpu_acceptance.py``'s rows not yet run on CUDA (``joint tartan``,
  ``meta_span_policy``, with ``guided_mlm`` and ``guided_denoising``, their references);
- ``toy`` (``--smoke``): ``benchmarks/science_toy.py``, two logistic regressions with a planted difference
  of about 16 points, five seeds in seconds: the scheduling, collection, statistics and tables end to end.

Until 2026-11-29 the harness ran each recipe in a work folder of its own per seed; the runs stored before then
(``docs/results/``) name that command. The plans reproduce their outcomes (``docs/compare.md``).

Sizing, measured on one H200 with the recipes as replicates (a replicate: one seed's whole pipeline, now one
seed's units of a plan; 16 cores; 2026-11-26 and 2026-11-27, 6 replicates side by side at the
``small`` shape): a fairseq process takes 10-15 s from its start to its first update; the offline
install before it 66-74 s; the general model (1,000 updates) 88-98 s; an FE replicate (10 processes)
286-298 s; a selective replicate (about 17 processes) more than 356 s (cut there at its matched-random
fine-tuning, with 2 of its processes left: about 400 s); L3's PLT scoring of MR 38 + 15 + 12 s. One
device command (600 s at most) therefore holds the install, the general model and **one** experiment's
replicates: the default is ``selective`` alone. At the ``quickstart`` shape (the fourth run, 2026-11-27) a
selective replicate took about 485 s (150 s of it training: each process spends 10-45 s starting fairseq
and scoring), so install, general model and replicate (663 s) do not fit one command: train the general
model beforehand and link it with ``--general``. So it ran on 2026-11-28 (the fifth run, detached by
``recipes/gpu_detach.sh`` after the policy speed table): install done already, 3 selective replicates side by
side in 366 s each, every row finished.

The shape matters more than the time: at ``small`` the general model stays on its unigram plateau after
1,000 updates (validation loss 9.95 bits, peak learning rate 1e-3), and every MR classifier fine-tuned
from it, in every row and seed, predicted one class (training accuracy 50.6%, 1.00 bit): no row can
differ there. The default shape is therefore ``quickstart``, whose whole pipeline learns on CPU (MR
63-71%); ``small`` needs a general model past its plateau (``--general`` links one trained elsewhere).

Each finished result (a unit's score file, its FE loss curve, an acceptance row) is added to ``--out``
as soon as it lands (the file is rewritten atomically every few seconds): a run cut by ``--budget``
or by the machine's limit keeps everything that finished; the file is the stored result a page cites
(``docs/results/``: every seed's outcome on every test item, the commit, shape, device and command). At the
end, and with ``--summarize``, it prints per experiment mean ± standard error over seeds and the paired
comparisons of :mod:`fairseq_maskplug.evaluation.paired_comparison`, read by the package's one rule
(:mod:`fairseq_maskplug.evaluation.reading_rule`): the interval over seeds (these test items) and the crossed
interval (seeds and items), a direction only where both exclude 0 after Holm's adjustment over the experiment's
family (its pairs on every compared split), what the run excludes, the difference that rule finds with 80%
probability (simulated, with its Monte Carlo band) and the seeds and items it needs for 2 points; then a verdict
line per comparison.
"""

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from fairseq_maskplug.compare.report import RECORD_FIELDS, curve_points
from fairseq_maskplug.evaluation import comparison_report as report, paired_comparison as pc, reading_rule as rule
from fairseq_maskplug.evaluation.comparison_report import fmt, interval_text, mean_se, p_text  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent

#: model shapes: recipes/lib.sh's MASKPLUG_* knobs of the general model every arm starts from (the plans read its
#: architecture from the checkpoint)
SHAPES = {
    # the CPU smoke: QUICK=1's toy sizes
    "tiny": {"MASKPLUG_LAYERS": "2", "MASKPLUG_DIM": "64", "MASKPLUG_FFN": "128", "MASKPLUG_HEADS": "2",
             "MASKPLUG_TOKENS": "64", "MASKPLUG_GENERAL_UPDATES": "40"},
    # the recipes' own defaults (recipes/lib.sh: 4 layers of dim 128, 1,000 general updates): the CPU tables
    "quickstart": {},
    # 6 layers of dim 512 (about a third of roberta_base's encoder), 128-token blocks
    "small": {"MASKPLUG_LAYERS": "6", "MASKPLUG_DIM": "512", "MASKPLUG_FFN": "2048", "MASKPLUG_HEADS": "8",
              "MASKPLUG_TOKENS": "128", "MASKPLUG_GENERAL_UPDATES": "1000"},
    # roberta_base's encoder
    "base": {"MASKPLUG_LAYERS": "12", "MASKPLUG_DIM": "768", "MASKPLUG_FFN": "3072", "MASKPLUG_HEADS": "12",
             "MASKPLUG_TOKENS": "128", "MASKPLUG_GENERAL_UPDATES": "2000"},
}
EXPERIMENTS = ("selective", "fe", "l3", "tlm", "bart", "acceptance", "toy")
DEFAULT_EXPERIMENTS = ("selective",)  # what fits one device command beside the install (the sizing above)
DEFAULT_SHAPE = "quickstart"  # the shape whose classifiers learn at these run lengths (the sizing above)
#: the five papers' comparisons, each a plan that fairseq-maskplug-compare runs (its arms are the rows)
PLANS = {exp: f"recipes/compare_plans/{exp}.toml" for exp in ("selective", "fe", "l3", "tlm", "bart")}
#: what a shape changes in a plan (``--set``): the plans hold the quickstart's run lengths, which the small and base
#: shapes keep; the toy smoke's model has 64 positions and its runs are short. Only FE's plan names no 128-token
#: block outside the keys a setting reaches, so ``tiny`` runs FE alone.
PLAN_SETTINGS = {
    "tiny": {"fe": ["pretrain.updates=40", "pretrain.score_every=20", "pretrain.tokens_per_sample=64",
                    "finetune.epochs=1"]},
}
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
#: --smoke: the toy experiment over five seeds, all at once, in seconds
SMOKE = {"only": ["toy"], "seeds": ["1", "2", "3", "4", "5"], "parallel": 5, "budget": 300}
ACCEPTANCE_ROWS = "guided_mlm,joint tartan,guided_denoising,meta_span_policy"
#: demo-data manifest settings -> recipes/lib.sh knobs (the data's sizes, so general_model finds it up to date)
DATA_KNOBS = {"general_sentences": "MASKPLUG_GENERAL_SENTENCES", "indomain_sentences": "MASKPLUG_INDOMAIN_SENTENCES",
              "vocab_size": "MASKPLUG_VOCAB_SIZE", "mr_sentences": "MASKPLUG_MR_SENTENCES"}


# ---- the results file ------------------------------------------------------------------------------

class Results:
    """The JSON results file, rewritten atomically whenever something new lands."""

    def __init__(self, path: Path, meta: dict):
        self.path = path
        self.data = {"meta": meta, "scores": [], "curves": [], "acceptance": [], "jobs": {}}
        self.seen = set()

    def add(self, kind: str, key, entry: dict) -> bool:
        if key in self.seen:
            return False
        self.seen.add(key)
        self.data[kind].append(entry)
        return True

    def write(self) -> None:
        from fairseq_maskplug.common.atomic import write_text
        write_text(str(self.path), json.dumps(self.data, indent=1) + "\n")


def add_score(results: Results, job: dict, row: str, seed: str, split: str, path: Path) -> int:
    """Add one score file (``fairseq-maskplug-evaluate``'s record, or one like it) unless it is being written;
    1 if it was new."""
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return 0  # being written
    entry = {"experiment": job["experiment"], "row": row, "seed": int(seed), "split": split,
             **{k: record.get(k) for k in RECORD_FIELDS}, "at_s": round(time.time() - job["started"], 1)}
    return int(results.add("scores", (job["experiment"], row, seed, split), entry))


def collect(job: dict, results: Results) -> int:
    """Add what ``job`` has finished so far to ``results``; returns how many entries were new."""
    new = 0
    exp, seed, work = job["experiment"], job["seed"], job["work"]
    if exp in PLANS:  # the plan's units: OUT/units/ARM__seedS/result.SPLIT.json and (pre-training scored) curve.jsonl
        for unit in sorted((work / "units").glob("*__seed*")):
            row, unit_seed = unit.name.rsplit("__seed", 1)
            for path in sorted(unit.glob("result.*.json")):
                new += add_score(results, job, row, unit_seed, path.name.split(".")[1], path)
            if (unit / "curve.jsonl").is_file():
                entry = {"experiment": exp, "row": row, "seed": int(unit_seed),
                         "points": curve_points(unit / "curve.jsonl")}
                new += results.add("curves", (exp, row, unit_seed), entry)
    elif exp == "toy":
        for path in sorted((work / "toy" / "results").glob("*__seed*.*.json")):
            row, rest = path.name.split("__seed", 1)
            new += add_score(results, job, row, seed, rest.split(".")[1], path)
    if exp == "acceptance":
        path = job.get("json_out", work / "acceptance.jsonl")
        if path.exists():
            for i, line in enumerate(path.read_text().splitlines()):
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                new += results.add("acceptance", ("acceptance", i), record)
    return new


def collect_safely(job: dict, results: Results) -> int:
    """``collect``, where a file it cannot read costs that file, not the run (said once per job); returns
    how many entries were new."""
    try:
        return collect(job, results)
    except (OSError, ValueError, KeyError, IndexError) as error:
        if not job.get("collect_error"):
            job["collect_error"] = True
            print(f"[science] {job['name']}: could not read a result ({type(error).__name__}: {error}); "
                  "the run goes on", flush=True)
        return 0


# ---- the jobs ----------------------------------------------------------------------------------------

def data_knobs(data: Path) -> dict:
    manifest = data / "manifest.json"
    if not manifest.is_file():
        raise SystemExit(f"error: {manifest}: no such file (--data must be prepare_demo's output folder)")
    settings = json.loads(manifest.read_text())["settings"]
    return {knob: str(settings[key]) for key, knob in DATA_KNOBS.items() if key in settings}


def recipe_env(args, knobs: dict, work: Path, seed: str) -> dict:
    env = dict(os.environ, MASKPLUG_WORK=str(work), MASKPLUG_SEED=seed, OMP_NUM_THREADS="1",
               MASKPLUG_PROGRESS_SECONDS="60", PYTHONUNBUFFERED="1", **SHAPES[args.shape], **knobs)
    if args.current_python:
        env["MASKPLUG_CURRENT_PYTHON"] = "1"
    return env


def plan_command(args, exp: str, base: Path, work: Path) -> list:
    """``fairseq-maskplug-compare`` of the experiment's plan over ``--seeds``: its units in ``work/EXP``, its data
    and general model the run's (``base``), the shape's settings (:data:`PLAN_SETTINGS`)."""
    if exp == "bart":
        paths = {"data.corpus": base / "bart" / "data" / "news", "data.task": base / "bart" / "data" / "probe",
                 "model.checkpoint": base / "bart" / "general" / "checkpoint_last.pt"}
    else:
        paths = {"data.task": base / "data" / "mr", "model.checkpoint": base / "general" / "checkpoint_last.pt"}
        if exp != "tlm":  # TLM's corpus is its plan's produce's
            paths["data.corpus"] = base / "data" / "indomain"
    settings = [f"{key}={value}" for key, value in paths.items()] + PLAN_SETTINGS.get(args.shape, {}).get(exp, [])
    return [sys.executable, "-m", "fairseq_maskplug.compare.cli", PLANS[exp], "--seeds", *args.seeds,
            "--parallel", str(args.parallel), "--set", f"out={work / exp}",
            *[word for setting in settings for word in ("--set", setting)]]


def start(job: dict, log_dir: Path) -> None:
    job["log"] = log_dir / f"{job['name']}.log"
    job["started"] = time.time()
    job["process"] = subprocess.Popen(job["command"], cwd=ROOT, env=job["env"], stdout=open(job["log"], "w"),
                                      stderr=subprocess.STDOUT, start_new_session=True)
    print(f"[science] {time.strftime('%H:%M:%S')} started {job['name']} (log {job['log']})", flush=True)


def stop(job: dict) -> None:
    try:
        os.killpg(job["process"].pid, signal.SIGTERM)
        job["process"].wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(job["process"].pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def last_line(path: Path) -> str:
    try:
        lines = [l for l in path.read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def run(args) -> int:
    plan_jobs = [e for e in args.only if e in PLANS]
    mr_jobs = [e for e in plan_jobs if e != "bart"]  # on the demo data, from the shared general MLM
    knobs = data_knobs(args.data) if mr_jobs else {}
    work = args.work.resolve()
    base = work / "base"  # the general model and the data every plan reads (its producers write tracks there)
    if mr_jobs and (base / "data").exists() and ((base / "data" / "manifest.json").read_text()
                                     != (args.data / "manifest.json").read_text()):
        raise SystemExit(f"error: {work} holds an earlier run's data, not --data {args.data}: give another --work")
    (work / "logs").mkdir(parents=True, exist_ok=True)
    device = cuda_name()
    # the recipe knobs given in the environment (the general model's: the shape's win over them; MASKPLUG_WORK is
    # the run's, and none that names this machine's folders: a stored result names paths relative to the repository)
    given = {k: v for k, v in os.environ.items() if k.startswith(("MASKPLUG_", "BART_"))
             and k not in SHAPES[args.shape]
             and k not in ("MASKPLUG_WORK", "MASKPLUG_SEED", "MASKPLUG_ROOT", "MASKPLUG_DOWNLOADS")}
    meta = {"device": device, "shape": args.shape, "shape_knobs": SHAPES[args.shape], "environment_knobs": given,
            "data_knobs": knobs, "plans": {exp: PLANS[exp] for exp in plan_jobs},
            "plan_settings": {exp: PLAN_SETTINGS.get(args.shape, {}).get(exp, []) for exp in plan_jobs},
            "seeds": args.seeds, "experiments": args.only, "parallel": args.parallel, "budget_s": args.budget,
            "commit": commit(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "command": ["python", "benchmarks/gpu_science.py", *map(repository_relative, sys.argv[1:])],
            "version": package_version()}
    results = Results(args.out, meta)
    results.write()
    began = time.time()
    print(f"[science] on {device}: shape {args.shape}, seeds {' '.join(args.seeds)}, {', '.join(args.only)}; "
          f"budget {args.budget} s, {args.parallel} units at once -> {args.out}", flush=True)

    if mr_jobs and not (base / "data").exists():
        base.mkdir(parents=True, exist_ok=True)
        shutil.copytree(args.data, base / "data", symlinks=True)
    jobs = []
    if args.general and not (base / "general").exists():
        (base / "general").symlink_to(args.general.resolve(), target_is_directory=True)
    if mr_jobs and not args.general:
        general = {"name": "general", "experiment": "general", "seed": "1", "work": base,
                   "command": ["bash", "-c", 'source recipes/setup_env.sh && source recipes/lib.sh && general_model'],
                   "env": recipe_env(args, knobs, base, "1")}
        jobs.append(general)
    if "bart" in plan_jobs:  # BART's data and general denoising model (recipes/bart_policies.sh's), read by its plan
        jobs.append({"name": "bart_general", "experiment": "general", "seed": "1", "work": base,
                     "command": ["bash", "recipes/bart_policies.sh"],
                     "env": dict(recipe_env(args, knobs, base, "1"), BART_GENERAL_ONLY="1")})
    for exp in plan_jobs:  # one plan at a time, each with --parallel units at once
        after = "bart_general" if exp == "bart" else (None if args.general else "general")
        jobs.append({"name": exp, "experiment": exp, "seed": None, "work": work / exp, "slots": args.parallel,
                     "command": plan_command(args, exp, base, work), "after": after,
                     "env": dict(os.environ, PYTHONUNBUFFERED="1", MASKPLUG_PROGRESS_SECONDS="60")})
    if "toy" in args.only:
        for seed in args.seeds:
            w = work / f"toy_seed{seed}"
            jobs.append({"name": f"toy_seed{seed}", "experiment": "toy", "seed": seed, "work": w,
                         "command": [sys.executable, "benchmarks/science_toy.py", "--out", str(w / "toy"),
                                     "--seed", seed], "env": dict(os.environ, PYTHONUNBUFFERED="1")})
    if "acceptance" in args.only:
        w = work / "acceptance"
        w.mkdir(exist_ok=True)
        extra = ["--cpu", "--smoke"] if device == "CPU" else ["--runs", "1", "--updates", str(args.acceptance_updates)]
        json_out = w / f"acceptance-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"  # its own: gpu_acceptance appends
        jobs.append({"name": "acceptance", "experiment": "acceptance", "seed": "1", "work": w, "json_out": json_out,
                     "command": [sys.executable, "benchmarks/gpu_acceptance.py", "--only", ACCEPTANCE_ROWS,
                                 "--json-out", str(json_out), *extra],
                     "env": dict(os.environ, PYTHONUNBUFFERED="1")})
    waiting, running, done = list(jobs), [], {}
    # the jobs run in their own sessions (stop() ends each with its children): end them with this process
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        schedule(args, results, waiting, running, done, base, work, began)
    finally:
        for job in running:
            stop(job)
    results.data["meta"]["elapsed_s"] = round(time.time() - began, 1)
    results.write()
    print(summarize(results.data))
    print(ratio_line(results.data))
    failed = [name for name, code in done.items() if code != 0]
    return 1 if failed else 0


def schedule(args, results: Results, waiting: list, running: list, done: dict, base: Path, work: Path,
             began: float) -> None:
    """Start the waiting jobs as their dependencies finish, at most ``args.parallel`` at once, collect
    what they finish, and stop them all ``args.budget`` seconds after ``began``."""
    deadline = began + args.budget
    last_report = time.time()
    while waiting or running:
        now = time.time()
        if now >= deadline:
            for job in running:
                stop(job)
                results.data["jobs"][job["name"]] = {"status": "cut by the budget",
                                                     "seconds": round(now - job["started"], 1),
                                                     "last_line": last_line(job["log"])}
                collect_safely(job, results)
            for job in waiting:
                results.data["jobs"][job["name"]] = {"status": "not started (budget)"}
            results.write()
            print(f"[science] budget of {args.budget} s reached: stopped {len(running)} job(s), "
                  f"{len(waiting)} not started", flush=True)
            break
        changed = False  # a new result or a job's new status: the file is rewritten
        for job in list(waiting):
            busy = sum(j.get("slots", 1) for j in running)  # a plan's job runs --parallel units itself
            if running and busy + job.get("slots", 1) > args.parallel:
                break
            after = job.get("after")
            if after and after not in done:
                continue
            if after and done[after] != 0:
                waiting.remove(job)
                results.data["jobs"][job["name"]] = {"status": f"not started: {after} failed"}
                changed = True
                continue
            waiting.remove(job)
            start(job, work / "logs")
            running.append(job)
        for job in list(running):
            code = job["process"].poll()
            if code is None:
                continue
            running.remove(job)
            done[job["name"]] = code
            collect_safely(job, results)
            changed = True
            seconds = round(time.time() - job["started"], 1)
            results.data["jobs"][job["name"]] = {"status": "finished" if code == 0 else f"failed (exit {code})",
                                                 "seconds": seconds, "last_line": last_line(job["log"])}
            print(f"[science] {time.strftime('%H:%M:%S')} {job['name']} "
                  f"{'finished' if code == 0 else f'FAILED (exit {code})'} in {seconds:.0f} s"
                  + ("" if code == 0 else f": {last_line(job['log'])}"), flush=True)
        changed = sum(collect_safely(job, results) for job in running) > 0 or changed
        if changed:
            results.data["meta"]["elapsed_s"] = round(time.time() - began, 1)
            results.write()
        if time.time() - last_report > 60 and running:
            last_report = time.time()
            for job in running:
                print(f"[science]   {job['name']}: {last_line(job['log'])[:150]}", flush=True)
        time.sleep(2)


def repository_relative(argument: str) -> str:
    """A path inside the repository as a path relative to it (a results file names no machine's folders)."""
    path = os.path.abspath(argument) if os.sep in argument else None
    if path is not None and (path == str(ROOT) or path.startswith(str(ROOT) + os.sep)):
        return os.path.relpath(path, ROOT)
    return argument


def cuda_name() -> str:
    import torch
    if not torch.cuda.is_available():
        return "CPU"
    return f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda}, torch {torch.__version__})"


def package_version() -> str:
    from fairseq_maskplug._version import __version__
    return __version__


def commit() -> str:
    """The repository's commit (the package's :func:`~fairseq_maskplug.compare.report.source_commit`: ``MASKPLUG_COMMIT``
    names it where the tree travelled without its history); ``unknown`` outside a checkout."""
    from fairseq_maskplug.compare.report import source_commit

    return source_commit() or "unknown"


# ---- the summary -------------------------------------------------------------------------------------

def comparisons(exp: str, table: dict, sims: int = pc.SIMS) -> list:
    """The paired comparisons of the experiment's family, each pair of ``COMPARISONS[exp]`` on each of its compared
    splits, read together (:func:`~fairseq_maskplug.evaluation.comparison_report.paired_comparisons`)."""
    splits = list(SPLITS.get(exp, {"test": ""}))
    return report.paired_comparisons(report.split_family(COMPARISONS[exp], splits), table, sims)


def provenance(meta: dict) -> str:
    """Where a results file's figures come from, in one line."""
    if meta.get("kind") == "comparison":
        from fairseq_maskplug.compare.report import provenance as plan_provenance
        return plan_provenance(meta)
    if meta.get("kind") in ("policy_speed", "collator_speed"):
        return f"{meta.get('device')}, commit {meta.get('commit')}, {meta.get('date')}, {meta.get('elapsed_s', '?')} s"
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


# ---- the pages' tables, generated from the stored results -------------------------------------------------

#: a block of a page generated from a stored result: ``<!-- results: docs/results/FILE.json PART ... -->`` then the
#: part's tables, then ``<!-- end results -->``
RESULTS_BLOCK = re.compile(r"(?P<open><!-- results: (?P<file>\S+\.json) (?P<part>[\w-]+) [^>]*-->\n)(?P<body>.*?)"
                           r"(?P<close><!-- end results -->)", re.S)
PAGES = ("README.md", "docs/*.md")


def result_parts(data: dict) -> dict:
    """A stored result's parts: a policy speed table's (``benchmarks/gpu_policy_speed.py``, ``"kind":
    "policy_speed"``), a collator speed table's (``benchmarks/bench_collators.py``, ``"collator_speed"``), a plan's
    report (``fairseq-maskplug-compare``, ``"comparison"``: :func:`fairseq_maskplug.compare.report.report_parts`) or
    this harness's comparison (:func:`summary_parts`)."""
    kind = data["meta"].get("kind")
    if kind == "comparison":  # fairseq-maskplug-compare's report.json
        from fairseq_maskplug.compare.report import report_parts
        return report_parts(data)
    if kind in ("policy_speed", "collator_speed"):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import bench_collators
        import gpu_policy_speed
        return (gpu_policy_speed if kind == "policy_speed" else bench_collators).summary_parts(data)
    return summary_parts(data)


def page_block(results: Path, part: str) -> str:
    """The text of a page's block: the part's heading as a sentence with the file's provenance, then its tables
    (and notes), from the stored results file (a path under the repository)."""
    data = json.loads((ROOT / results).read_text(encoding="utf-8"))
    parts = result_parts(data)
    if part not in parts:
        raise ValueError(f"{results} has no part {part!r} (it has {', '.join(parts)})")
    heading, *lines = parts[part]
    title = heading.strip().lstrip("#").strip()
    return (f"From `{results}` ({provenance(data['meta'])}); {title}:\n\n" + "\n".join(lines).strip("\n") + "\n")


def pages_out_of_date(update: bool = False) -> list:
    """``(page, file, part)`` of every generated block whose text differs from what its stored result gives;
    with ``update``, each such block is rewritten."""
    stale = []
    for pattern in PAGES:
        for page in sorted(ROOT.glob(pattern)):
            text = page.read_text(encoding="utf-8")
            def regenerate(match):
                body = page_block(Path(match["file"]), match["part"])
                if body != match["body"]:
                    stale.append((str(page.relative_to(ROOT)), match["file"], match["part"]))
                return match["open"] + body + match["close"]
            new = RESULTS_BLOCK.sub(regenerate, text)
            if update and new != text:
                page.write_text(new, encoding="utf-8")
    return stale


def ratio_line(data: dict) -> str:
    """The last line, as every benchmark's: each method against its baseline, where both finished
    (test accuracy ratios; FE: validation loss at the last common update, lower is better)."""
    ratios = []
    for exp, (a, b) in (("selective", ("selective", "matched-random")), ("l3", ("L3-tartan", "RTM-tartan")),
                        ("tlm", ("tlm-bm25", "task-only")), ("bart", ("ssm", "rand")), ("toy", ("method", "baseline"))):
        split = next(iter(SPLITS.get(exp, {"test": ""})))
        acc = {row: [s["accuracy"] for s in data["scores"] if s["experiment"] == exp and s["row"] == row
                     and s["split"] == split] for row in (a, b)}
        if acc[a] and acc[b] and sum(acc[b]) > 0:
            ratios.append(f"ratio_{exp}_{'em_seen' if exp == 'bart' else 'accuracy'}={(sum(acc[a]) / len(acc[a])) / (sum(acc[b]) / len(acc[b])):.4f}")
    last = {}
    for curve in data["curves"]:
        if curve["points"]:
            last.setdefault(curve["row"], []).append(curve["points"][-1][1])
    if last.get("fe_subword") and last.get("mlm"):
        fe, mlm = (sum(last[r]) / len(last[r]) for r in ("fe_subword", "mlm"))
        ratios.append(f"ratio_fe_valid_loss={fe / mlm:.4f}")
    return " ".join(ratios) if ratios else "ratio_finished_comparisons=0"


def plot(data: dict, path: Path) -> None:
    """One PNG: per experiment, each row's test accuracy per seed (points) with its mean and 95% t
    interval; for FE, each row's validation loss against updates (mean ± standard error over seeds)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [exp for exp in ("selective", "l3", "fe", "tlm", "bart", "toy")
              if any(s["experiment"] == exp for s in data["scores"])]
    panels += ["fe curves"] if data["curves"] else []
    if not panels:
        raise SystemExit("error: nothing to plot: no finished rows in the results")
    figure, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for axis, exp in zip(axes[0], panels):
        if exp == "fe curves":
            for row, colour in (("mlm", "tab:gray"), ("fe_subword", "tab:blue")):
                curves = [dict(map(tuple, c["points"])) for c in data["curves"] if c["row"] == row]
                updates = sorted({u for c in curves for u in c})
                means = [mean_se([c[u] for c in curves if u in c]) for u in updates]
                axis.errorbar(updates, [m for m, _ in means], yerr=[0 if math.isnan(e) else e for _, e in means],
                              label=f"{row} ({len(curves)} seeds)", color=colour, capsize=3, marker="o")
            axis.set(xlabel="updates", ylabel="valid MLM loss (bits, fixed random masks)", title="FE-MLM vs MLM")
            axis.legend()
            continue
        rows = [r for pair in COMPARISONS[exp] for r in pair]
        rows = [r for i, r in enumerate(rows) if r not in rows[:i]
                and any(s["row"] == r and s["experiment"] == exp for s in data["scores"])]
        split, what = next(iter(SPLITS.get(exp, {"test": "MR test accuracy"}).items()))
        for x, row in enumerate(rows):
            values = [s["accuracy"] for s in data["scores"] if s["experiment"] == exp and s["row"] == row
                      and s["split"] == split]
            axis.scatter([x + 0.08 * (i - (len(values) - 1) / 2) for i in range(len(values))], values,
                         color="tab:gray", s=14, zorder=2)
            mean, se = mean_se(values)
            low, _ = pc.t_interval(mean, se ** 2, len(values) - 1) if not math.isnan(se) else (mean, mean)
            axis.errorbar([x + 0.3], [mean], yerr=[mean - low], color="black", capsize=4, marker="D", zorder=3)
        axis.set_xticks(range(len(rows)), rows)
        axis.set(ylabel=f"{what} (%)", title=f"{exp}: {what} per seed, mean and 95% t interval",
                 xlim=(-0.5, len(rows) - 0.2))
        axis.title.set_fontsize(9)
    meta = data["meta"]
    figure.suptitle(f"{meta.get('device')}, shape {meta.get('shape')}, {meta.get('date', '')[:10]}", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="prepare_demo's output folder (the demo data)")
    parser.add_argument("--work", type=Path, help="the work folder (every replicate's recipe work folder in it)")
    parser.add_argument("--general", type=Path, help="a trained general model's folder (checkpoint_last.pt, the "
                        "shape's size): linked, not trained again")
    parser.add_argument("--out", type=Path, help="the JSON results file, rewritten as results land")
    parser.add_argument("--shape", choices=sorted(SHAPES), default=DEFAULT_SHAPE,
                        help=f"model shape and run lengths (default {DEFAULT_SHAPE}: the recipes' own 4 layers of "
                             "dim 128; small, 6 layers of dim 512, needs a general model past its unigram plateau)")
    parser.add_argument("--seeds", nargs="+", default=["1", "2", "3"], help="replicate seeds (default 1 2 3)")
    parser.add_argument("--only", type=lambda s: [e for e in s.split(",") if e], default=list(DEFAULT_EXPERIMENTS),
                        help=f"comma-separated experiments of {', '.join(EXPERIMENTS)} (default "
                             f"{','.join(DEFAULT_EXPERIMENTS)}: what one device command on one H200 holds beside the install)")
    parser.add_argument("--parallel", type=int, default=6, help="jobs at once (default 6)")
    parser.add_argument("--budget", type=int, default=480, help="seconds before every job still running is stopped")
    parser.add_argument("--acceptance-updates", type=int, default=100, help="updates per acceptance run")
    parser.add_argument("--current-python", action="store_true",
                        help="the recipes use the python on PATH (MASKPLUG_CURRENT_PYTHON=1), not .venv")
    parser.add_argument("--summarize", type=Path, help="print the tables of an earlier --out file and stop")
    parser.add_argument("--plot", type=Path, help="with --summarize: also draw the results to this PNG (matplotlib)")
    parser.add_argument("--update-pages", action="store_true",
                        help="regenerate every page's block of tables from its stored result (<!-- results: FILE "
                             "PART -->) and stop; tests/test_stored_results.py checks they agree")
    parser.add_argument("--smoke", action="store_true",
                        help="the harness end to end in seconds: benchmarks/science_toy.py's planted difference over 5 "
                             "seeds (--work and --out default to a temporary folder; no --data)")
    args = parser.parse_args(argv)
    if args.smoke:
        print("smoke run (--smoke): the toy experiment; its figures measure nothing", flush=True)
        for name, value in SMOKE.items():
            setattr(args, name, value)
        if args.work is None:
            import tempfile
            args.work = Path(tempfile.mkdtemp(prefix="science_smoke_"))
        args.out = args.out or args.work / "science.json"
    if args.update_pages:
        for page, results, part in pages_out_of_date(update=True):
            print(f"[science] {page}: {part} regenerated from {results}")
        return 0
    if args.summarize:
        data = json.loads(args.summarize.read_text())
        print(summarize(data))
        if args.plot:
            plot(data, args.plot)
            print(f"[science] plot: {args.plot}")
        print(ratio_line(data))
        return 0
    for name in ("data", "work", "out"):
        needs_data = any(e in PLANS and e != "bart" for e in args.only)
        if getattr(args, name) is None and not (name == "data" and not needs_data):
            parser.error(f"--{name} is required (unless --summarize)")
    if args.general and not (args.general / "checkpoint_last.pt").is_file():
        parser.error(f"--general {args.general}: no checkpoint_last.pt there")
    unknown = [e for e in args.only if e not in EXPERIMENTS]
    if unknown:
        parser.error(f"--only: unknown experiment(s) {', '.join(unknown)} (known: {', '.join(EXPERIMENTS)})")
    untried = [e for e in args.only if e in PLANS and args.shape in PLAN_SETTINGS and e not in PLAN_SETTINGS[args.shape]]
    if untried:
        parser.error(f"--shape {args.shape} runs {', '.join(PLAN_SETTINGS[args.shape])} only, not {', '.join(untried)} "
                     "(its plan's commands hold 128-token blocks; the model has 64 positions)")
    if args.parallel < 1 or args.budget < 1:
        parser.error("--parallel and --budget must be at least 1")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
