"""The papers' comparisons with seeds, in one command sized for a lent GPU (issues 49 and 91): a caller of
``fairseq-maskplug-compare``, one plan after another, with no scheduler of its own.

    python benchmarks/gpu_science.py --data DATA --work DIR --out OUT                  # a CUDA machine
    python benchmarks/gpu_science.py --data DATA --work DIR --out OUT --shape tiny --only fe --seeds 1 2  # CPU
    python benchmarks/gpu_science.py --smoke                    # the statistics end to end in seconds (toy rows)

DATA: ``python -m preprocess.prepare_demo``'s output (its manifest's sizes become the recipes' knobs). In order:
the general model at the shape's size (``recipes/lib.sh``'s ``general_model``; ``--general`` links one instead),
and for ``bart`` its data and general model (``recipes/bart_policies.sh``, ``BART_GENERAL_ONLY=1``); then each
experiment's plan, ``recipes/compare_plans/EXP.toml``, run by ``fairseq-maskplug-compare`` over ``--seeds`` with the
run's data, model and output folder, the shape's :data:`PLAN_SETTINGS` and ``--budget`` the seconds left (it stops
its units at the deadline, records them as cut, reports what finished, and resumes them when run again); each report
copied to ``OUT/EXP.json`` with the run's shape and command; ``acceptance``, ``benchmarks/gpu_acceptance.py``'s rows
not yet run on CUDA (``OUT/acceptance.jsonl``); last ``OUT/summary.md``, every report's tables, and a ratio line.
``--smoke``: ``benchmarks/science_toy.py``'s planted difference over five seeds, read as a plan's report.

Sizing (one H200, 2026-11-26 to 28): the install 66-74 s, the general model 88-98 s, a selective replicate at
``quickstart`` 366-485 s: one device command (600 s) holds the install and one experiment, the general model trained
beforehand. At ``small`` every classifier predicted one class (the general model on its unigram plateau), so the
default is ``quickstart`` (MR 63-71% on CPU). Results stored before 2026-12-02: ``benchmarks/science_results.py``.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from statistics import mean

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import science_toy  # noqa: E402
from gpu_acceptance import cuda_name  # noqa: E402

from fairseq_maskplug.common.atomic import write_text  # noqa: E402
from fairseq_maskplug.common.option_ranges import number  # noqa: E402
from fairseq_maskplug.compare import report  # noqa: E402
from fairseq_maskplug.compare.cli import stop_group  # noqa: E402

#: model shapes: recipes/lib.sh's knobs of the general model every arm starts from (the plans read its architecture
#: from the checkpoint): layers, dimension, feed-forward dimension, heads, block length and the general model's updates
SHAPE_KNOBS = ("MASKPLUG_LAYERS", "MASKPLUG_DIM", "MASKPLUG_FFN", "MASKPLUG_HEADS", "MASKPLUG_TOKENS",
               "MASKPLUG_GENERAL_UPDATES")
SHAPES = {"tiny": dict(zip(SHAPE_KNOBS, "2 64 128 2 64 40".split())),  # QUICK=1's toy sizes: the CPU smoke
          "quickstart": {},  # the recipes' own (4 layers of dim 128, 1,000 general updates): the CPU tables
          "small": dict(zip(SHAPE_KNOBS, "6 512 2048 8 128 1000".split())),  # about a third of roberta_base's encoder
          "base": dict(zip(SHAPE_KNOBS, "12 768 3072 12 128 2000".split()))}  # roberta_base's encoder
#: the five papers' comparisons, each a plan that fairseq-maskplug-compare runs (its arms are the rows)
PLANS = {exp: f"recipes/compare_plans/{exp}.toml" for exp in ("selective", "fe", "l3", "tlm", "bart")}
EXPERIMENTS = (*PLANS, "acceptance")
DEFAULT_EXPERIMENTS = ("selective",)  # what fits one device command beside the install (the sizing above)
DEFAULT_SHAPE = "quickstart"  # the shape whose classifiers learn at these run lengths (the sizing above)
#: what a shape changes in a plan (``--set``): the plans hold the quickstart's run lengths, which the small and base
#: shapes keep; the toy shape's model has 64 positions and its runs are short. Only FE's plan names no 128-token
#: block outside the keys a setting reaches, so ``tiny`` runs FE alone.
PLAN_SETTINGS = {
    "tiny": {"fe": ["pretrain.updates=40", "pretrain.score_every=20", "pretrain.tokens_per_sample=64",
                    "finetune.epochs=1"]},
}
ACCEPTANCE_ROWS = "guided_mlm,joint tartan,guided_denoising,meta_span_policy"
#: demo-data manifest settings -> recipes/lib.sh knobs (the data's sizes, so general_model finds it up to date)
DATA_KNOBS = {"general_sentences": "MASKPLUG_GENERAL_SENTENCES", "indomain_sentences": "MASKPLUG_INDOMAIN_SENTENCES",
              "vocab_size": "MASKPLUG_VOCAB_SIZE", "mr_sentences": "MASKPLUG_MR_SENTENCES"}


def data_knobs(data: Path) -> dict:
    manifest = data / "manifest.json"
    if not manifest.is_file():
        raise SystemExit(f"error: {manifest}: no such file (--data must be prepare_demo's output folder)")
    settings = json.loads(manifest.read_text())["settings"]
    return {knob: str(settings[key]) for key, knob in DATA_KNOBS.items() if key in settings}


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


def step(name: str, command: list, env: dict, logs: Path, seconds: float) -> int:
    """Run one step to its end, its output in ``logs/NAME.log``; past ``seconds`` it is stopped with everything it
    started (exit status 124). Says how it ended."""
    began = time.time()
    print(f"[science] {time.strftime('%H:%M:%S')} {name} (log {logs / name}.log, at most {seconds:.0f} s)", flush=True)
    with open(logs / f"{name}.log", "w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            code = process.wait(timeout=max(seconds, 1))
        except subprocess.TimeoutExpired:
            stop_group(process)
            code = 124
    print(f"[science] {name}: {'finished' if code == 0 else f'exit {code}'} in {time.time() - began:.0f} s", flush=True)
    return code


def general_steps(args, base: Path, deadline: float) -> int:
    """The general model (unless linked) and, for ``bart``, BART's data and general model; 0 if all ended well."""
    env = dict(os.environ, MASKPLUG_WORK=str(base), MASKPLUG_SEED="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               MASKPLUG_PROGRESS_SECONDS="60", **SHAPES[args.shape], **(data_knobs(args.data) if args.data else {}))
    steps = []
    if any(e in PLANS and e != "bart" for e in args.only) and not (base / "general").exists():
        steps.append(("general", ["bash", "-c", "source recipes/setup_env.sh && source recipes/lib.sh && "
                                                "general_model"], env))
    if "bart" in args.only:
        steps.append(("bart_general", ["bash", "recipes/bart_policies.sh"], dict(env, BART_GENERAL_ONLY="1")))
    status = 0
    for name, command, step_env in steps:  # a failed step ends the run: what follows reads its model
        status = status or step(name, command, step_env, base / "logs", deadline - time.time())
    return status


def ratio_line(reports: dict) -> str:
    """Each experiment's first compared pair, A's mean score over B's on the headline split; FE's validation loss at
    its last scored update (lower is better)."""
    ratios = []
    for exp, data in reports.items():
        (a, b), split = report.family_pairs(data["meta"])[0], data["meta"]["compared"][0]
        score = {row: [s["accuracy"] for s in data["scores"] if s["row"] == row and s["split"] == split]
                 for row in (a, b)}
        loss = {row: [c["points"][-1][1] for c in data.get("curves", []) if c["row"] == row and c["points"]]
                for row in (a, b)}
        for what, values in ((f"{split}_accuracy", score), ("valid_loss", loss)):
            if values[a] and values[b] and sum(values[b]) > 0:
                ratios.append(f"ratio_{exp}_{what}={mean(values[a]) / mean(values[b]):.4f}")
    return " ".join(ratios) or "ratio_finished_comparisons=0"


def run(args) -> int:
    deadline = time.time() + args.budget
    work, out = args.work.resolve(), args.out.resolve()
    base = work / "base"  # the general model and the data every plan reads
    (base / "logs").mkdir(parents=True, exist_ok=True)
    if args.general and not (base / "general").exists():
        (base / "general").symlink_to(args.general.resolve(), target_is_directory=True)
    if args.data and not (base / "data").exists():
        shutil.copytree(args.data, base / "data", symlinks=True)
    status = general_steps(args, base, deadline)
    reports = {}
    for exp in [e for e in args.only if e in PLANS] if status == 0 else []:
        left = deadline - time.time()
        if left < 1:
            print(f"[science] {exp}: not started, the budget is spent", flush=True)
            continue
        env = dict(os.environ, PYTHONUNBUFFERED="1", MASKPLUG_PROGRESS_SECONDS="60")
        code = step(exp, [*plan_command(args, exp, base, work), "--budget", f"{left:.0f}"], env, base / "logs",
                    left + 120)
        status = status or code
        found = sorted((work / exp).glob("report*.json"), key=lambda p: p.stat().st_mtime)
        if found:  # the report, with this run's shape and command (paths inside the clone relative to it)
            reports[exp] = json.loads(found[-1].read_text())
            reports[exp]["meta"]["harness"] = {"shape": args.shape, "shape_knobs": SHAPES[args.shape], "command": [
                "python", "benchmarks/gpu_science.py", *map(repository_relative, sys.argv[1:])]}
    if "acceptance" in args.only:
        extra = ["--cpu", "--smoke"] if cuda_name() == "CPU" else ["--runs", "1", "--updates", "100"]
        code = step("acceptance", [sys.executable, "benchmarks/gpu_acceptance.py", "--only", ACCEPTANCE_ROWS,
                                   "--json-out", str(out / "acceptance.jsonl"), *extra],
                    dict(os.environ, PYTHONUNBUFFERED="1"), base / "logs", deadline - time.time())
        status = status or code
    summarize(reports, out)
    return status


def summarize(reports: dict, out: Path) -> None:
    """Each report into ``OUT/EXP.json``; their tables as the compare command writes them into ``OUT/summary.md``
    and printed, then the ratio line."""
    out.mkdir(parents=True, exist_ok=True)
    for exp, data in reports.items():
        write_text(str(out / f"{exp}.json"), json.dumps(data, indent=1) + "\n")
    text = "\n\n".join(report.markdown(data) for data in reports.values()) or "nothing finished\n"
    write_text(str(out / "summary.md"), text)
    print(text)
    print(ratio_line(reports), flush=True)


def repository_relative(argument: str) -> str:
    """A path inside the repository as a path relative to it (a results file names no machine's folders)."""
    path = os.path.abspath(argument) if os.sep in argument else None
    if path is not None and (path == str(ROOT) or path.startswith(str(ROOT) + os.sep)):
        return os.path.relpath(path, ROOT)
    return argument


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="prepare_demo's output folder (the demo data)")
    parser.add_argument("--work", type=Path, help="the work folder (the general model, the data, every plan's units)")
    parser.add_argument("--general", type=Path, help="a trained general model's folder (checkpoint_last.pt, the "
                        "shape's size): linked, not trained again")
    parser.add_argument("--out", type=Path, help="the results folder: EXP.json per experiment (its plan's report), "
                        "acceptance.jsonl, summary.md")
    parser.add_argument("--shape", choices=sorted(SHAPES), default=DEFAULT_SHAPE,
                        help=f"model shape and run lengths (default {DEFAULT_SHAPE}: the recipes' own 4 layers of "
                             "dim 128; small, 6 layers of dim 512, needs a general model past its unigram plateau)")
    parser.add_argument("--seeds", nargs="+", default=["1", "2", "3"], help="seeds of every plan (default 1 2 3)")
    parser.add_argument("--only", type=lambda s: [e for e in s.split(",") if e], default=list(DEFAULT_EXPERIMENTS),
                        help=f"comma-separated experiments of {', '.join(EXPERIMENTS)} (default "
                             f"{','.join(DEFAULT_EXPERIMENTS)}: what one device command on one H200 holds)")
    parser.add_argument("--parallel", type=number("[1, inf)", int), default=6, help="units of a plan at once (6)")
    parser.add_argument("--budget", type=number("[1, inf)", int), default=480, help="seconds for the whole run; the "
                        "compare command stops the units still running then and records them as cut")
    parser.add_argument("--smoke", action="store_true",
                        help="the statistics end to end in seconds: benchmarks/science_toy.py's planted difference "
                             "over 5 seeds, read as a plan's report (--work and --out default to a temporary folder)")
    args = parser.parse_args(argv)
    if args.smoke:
        import tempfile
        print("smoke run (--smoke): the toy experiment; its figures measure nothing", flush=True)
        work = args.work or Path(tempfile.mkdtemp(prefix="science_smoke_"))
        summarize({"toy": science_toy.report(range(1, 6), work / "toy")}, args.out or work / "out")
        return 0
    unknown = [e for e in args.only if e not in EXPERIMENTS]
    if unknown:
        parser.error(f"--only: unknown experiment(s) {', '.join(unknown)} (known: {', '.join(EXPERIMENTS)})")
    needs_data = any(e in PLANS and e != "bart" for e in args.only)
    for name in ("work", "out", *(("data",) if needs_data else ())):
        if getattr(args, name) is None:
            parser.error(f"--{name} is required (unless --smoke)")
    if args.general and not (args.general / "checkpoint_last.pt").is_file():
        parser.error(f"--general {args.general}: no checkpoint_last.pt there")
    shaped = PLAN_SETTINGS.get(args.shape)
    untried = [e for e in args.only if e in PLANS and shaped is not None and e not in shaped]
    if untried:
        parser.error(f"--shape {args.shape} runs {', '.join(PLAN_SETTINGS[args.shape])} only, not {', '.join(untried)} "
                     "(its plan's commands hold 128-token blocks; the model has 64 positions)")
    if needs_data:
        data_knobs(args.data)  # a folder without a manifest: one line before any work
        held = args.work / "base" / "data" / "manifest.json"
        if held.is_file() and held.read_text() != (args.data / "manifest.json").read_text():
            raise SystemExit(f"error: {args.work} holds an earlier run's data, not --data {args.data}: another --work")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
