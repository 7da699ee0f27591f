"""Every mask policy's training speed beside ``random`` on one GPU, in one run and one process (issue 72).

    python benchmarks/gpu_policy_speed.py --json-out speed.json      # a CUDA machine: roberta_base / bart_base
                                                                     # in fp16, blocks of 512 tokens, batch 16
    python benchmarks/gpu_policy_speed.py --cpu --smoke              # tiny shapes on CPU (--memory-efficient-fp16)
    python benchmarks/gpu_policy_speed.py --table speed.json         # the tables of a stored result again

Each row is ``guided_mlm`` with one registered policy (``guided_denoising`` for the seq2seq rows, ``fe_mlm``
with K = 4 views), trained by fairseq's own ``Trainer`` with the options ``fairseq-maskplug-train`` would
parse (``train_step`` on the batches of fairseq's epoch iterator, ``--num-workers`` loader processes: what
``fairseq-train``'s loop does, without its 10-15 s start per row). Every policy reads its tracks
(``stand_in_tracks.py``: stand-in values of the real shape; a draw's cost depends on the tracks' shape, not on
their values) from synthetic lines of Zipf words of 1-3 sentencepiece-style pieces. Per row:

- **words/s**: the batches' ``ntokens`` (fairseq's ``wps``) over the wall time of ``--updates`` updates after
  ``--warmup``, the device synchronised at both ends only, and its ratio against ``random`` of the same model
  (measured first and again last: the ratio is against the mean of the two, and both are printed);
- **peak memory**: ``torch.cuda.max_memory_allocated`` over the row (none on CPU);
- **where a step's time goes**, over ``--profile-updates`` further updates with the device synchronised at
  each boundary: waiting for the loader's batch (the policy's draw runs in the loader processes), the task's
  ``prepare_batch`` on the host (a schedule's thinning, PTW's redraw from the live statistics), the
  criterion's forward (Self-Evolution's smoothing adds its second forward there), the backward, and the rest
  (host-to-device copies, the optimizer step, the policy's statistics, logging). The share outside the
  forward and backward is the first two plus the rest.

A row below 0.8x ``random`` is named in the last lines with where its time goes. ``--json-out FILE`` rewrites
FILE atomically after every row (a run cut by ``--budget`` or by the machine keeps what finished). The last
line is ``ratio_min=<slowest policy row / random> ratio_<row>=...``.
"""

import gc
import json
import logging
import os
import re
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from commands import run_checked  # noqa: E402
from gpu_acceptance import BASE, DENOISING, PRECISIONS, TINY, add_run_options, cuda_name, require_cuda  # noqa: E402
from smoke import benchmark_parser, shrink  # noqa: E402
from stand_in_tracks import write_stand_in_tracks  # noqa: E402

BIN = Path(sys.executable).parent
SLOW = 0.8  # a row below this ratio is named with where its time goes (issue 72)
MLM = ["--task", "guided_mlm", "--criterion", "masked_lm"]
SEQ2SEQ = ["--task", "guided_denoising", "--criterion", "cross_entropy", "--mask-prob", "0.15", "--target-format",
           "full"]
#: name: (model, arguments, the row it is compared with); rows run in this order, ``random`` again at the end
ROWS = {
    "random": ("roberta", [*MLM, "--mask-policy", "random"], None),
    "masked_lm (fairseq)": ("roberta", ["--task", "masked_lm", "--criterion", "masked_lm"], "random"),
    "random, --mask-unit word": ("roberta", [*MLM, "--mask-policy", "random", "--mask-unit", "word"], "random"),
    "random, --mask-prob-schedule linear": ("roberta", [*MLM, "--mask-policy", "random", "--mask-prob-schedule",
                                                        "linear", "--mask-prob-schedule-updates", "100"], "random"),
    "span": ("roberta", [*MLM, "--mask-policy", "span"], "random"),
    "l3": ("roberta", [*MLM, "--mask-policy", "l3"], "random"),
    "selective": ("roberta", [*MLM, "--mask-policy", "selective"], "random"),
    "matched_random": ("roberta", [*MLM, "--mask-policy", "matched_random"], "random"),
    "salient_span": ("roberta", [*MLM, "--mask-policy", "salient_span"], "random"),
    "learned_span": ("roberta", [*MLM, "--mask-policy", "learned_span"], "random"),
    "pmi": ("roberta", [*MLM, "--mask-policy", "pmi"], "random"),
    "ptw": ("roberta", [*MLM, "--mask-policy", "ptw"], "random"),
    "informask": ("roberta", [*MLM, "--mask-policy", "informask"], "random"),
    "self_evolution": ("roberta", [*MLM, "--mask-policy", "self_evolution"], "random"),
    "self_evolution, --criterion self_evolution": (
        "roberta", ["--task", "guided_mlm", "--criterion", "self_evolution", "--mask-policy", "self_evolution"],
        "random"),
    "difference": ("roberta", [*MLM, "--mask-policy", "difference"], "random"),
    "fe_mlm, 4 views": ("roberta", ["--task", "fe_mlm", "--criterion", "masked_lm", "--mask-policy", "random",
                                    "--fe-views", "4"], "random"),
    "guided_denoising random": ("bart", [*SEQ2SEQ, "--mask-policy", "random"], None),
    "denoising (fairseq)": ("bart", ["--task", "denoising", "--criterion", "cross_entropy", *DENOISING],
                            "guided_denoising random"),
    "guided_denoising span": ("bart", [*SEQ2SEQ, "--mask-policy", "span"], "guided_denoising random"),
    "guided_denoising salient_span": ("bart", [*SEQ2SEQ, "--mask-policy", "salient_span"],
                                      "guided_denoising random"),
    "guided_denoising learned_span": ("bart", [*SEQ2SEQ, "--mask-policy", "learned_span"],
                                      "guided_denoising random"),
    "guided_denoising pmi": ("bart", [*SEQ2SEQ, "--mask-policy", "pmi"], "guided_denoising random"),
}
REFERENCES = ("random", "guided_denoising random")  # measured first and again last
PHASES = ("wait", "prepare", "forward", "backward", "other")
PHASE_TEXT = {"wait": "waiting for the loader", "prepare": "prepare_batch on the host", "forward": "forward",
              "backward": "backward", "other": "copies, optimizer, statistics, logging"}


# ---- data ------------------------------------------------------------------------------------------

def make_data(root: Path, lines: int, tokens: int, vocab: int) -> Path:
    """``lines`` lines of Zipf words of 1-3 pieces (``▁`` starts a word), each line between half of ``tokens``
    and ``tokens`` - 2 pieces, binarized; every policy's stand-in tracks beside the train split."""
    rng = np.random.default_rng(0)
    words = [[f"\u2581p{w}"] + [f"c{w}_{k}" for k in range(int(rng.integers(0, 3)))] for w in range(vocab)]
    text = root / "train.txt"
    with open(text, "w", encoding="utf-8") as f:
        for target in rng.integers(tokens // 2, tokens - 1, lines):
            pieces = []
            while True:
                word = words[int(rng.zipf(1.3)) % vocab]
                if len(pieces) + len(word) > target:
                    break
                pieces += word
            f.write(" ".join(pieces) + "\n")
    run_checked([BIN / "fairseq-preprocess", "--only-source", "--trainpref", text, "--destdir", root / "bin",
                 "--workers", str(min(8, os.cpu_count() or 1))])
    write_stand_in_tracks(root / "bin", ("train",), rng, span_every=30)
    return root / "bin"


# ---- one row ---------------------------------------------------------------------------------------

class Phases:
    """Seconds spent in each of :data:`PHASES`, the device synchronised at each boundary."""

    def __init__(self, cuda: bool):
        self.cuda = cuda
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.active = False

    def sync(self):
        if self.cuda:
            import torch
            torch.cuda.synchronize()

    def wrap(self, phase: str, function):
        def timed(*args, **kwargs):
            if not self.active:
                return function(*args, **kwargs)
            self.sync()
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.sync()
                self.seconds[phase] += time.perf_counter() - began
        return timed


def trainer_for(argv):
    """fairseq's ``Trainer`` and epoch iterator for ``argv`` (``fairseq-maskplug-train``'s options, parsed as
    ``fairseq-train`` parses them), as ``fairseq_cli.train`` builds them."""
    import fairseq_maskplug.plugin  # noqa: F401  (registers the tasks, policies and criteria)
    from fairseq import options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))
    np.random.seed(cfg.common.seed)
    utils.set_torch_seed(cfg.common.seed)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, criterion)
    epoch_itr = trainer.get_train_iterator(epoch=1, load_dataset=True)
    trainer.lr_step(epoch_itr.epoch)
    trainer.begin_epoch(epoch_itr.epoch)
    return task, trainer, epoch_itr.next_epoch_itr(shuffle=True)


def measure(name: str, argv, args) -> dict:
    """Train one row: warm-up, timed updates, profiled updates."""
    import torch

    cuda = not args.cpu
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    task, trainer, batches = trainer_for(argv)
    phases = Phases(cuda)
    if hasattr(task, "prepare_batch"):  # the package's tasks
        task.prepare_batch = phases.wrap("prepare", task.prepare_batch)
    criterion = trainer.criterion
    criterion.forward = phases.wrap("forward", criterion.forward)
    trainer.optimizer.backward = phases.wrap("backward", trainer.optimizer.backward)
    wanted = args.warmup + args.updates + args.profile_updates

    losses = []

    def next_batch():
        try:
            return next(batches)
        except StopIteration:
            raise RuntimeError(f"{name}: one epoch of --lines {args.lines} lines holds fewer than {wanted} updates "
                               f"of batch {args.batch_size}: give more --lines") from None

    def step(sample_list):
        log = trainer.train_step(sample_list)
        if log is not None:  # None: fairseq skipped the update (a loss-scale overflow)
            losses.append(float(log.get("loss", float("nan"))))
        return sum(int(s.get("ntokens", 0)) for s in sample_list)

    tokens = 0
    for _ in range(args.warmup):
        step([next_batch()])
    phases.sync()
    began = time.perf_counter()
    for _ in range(args.updates):
        tokens += step([next_batch()])
    phases.sync()
    elapsed = time.perf_counter() - began
    phases.active = True
    profiled = time.perf_counter()
    for _ in range(args.profile_updates):
        phases.sync()
        waited = time.perf_counter()
        sample = next_batch()
        phases.seconds["wait"] += time.perf_counter() - waited
        step([sample])
    phases.sync()
    total = time.perf_counter() - profiled
    phases.seconds["other"] = max(total - sum(v for k, v in phases.seconds.items() if k != "other"), 0.0)
    if not losses or not np.isfinite(losses[-1]):
        raise RuntimeError(f"{name}: the last logged training loss is {losses[-1] if losses else 'missing'}")
    peak = torch.cuda.max_memory_allocated() / 2 ** 20 if cuda else None
    del task, trainer, batches, criterion
    gc.collect()
    return {"row": name, "updates": args.updates, "words_per_s": tokens / elapsed,
            "seconds_per_update": elapsed / args.updates, "peak_mib": peak, "profiled_updates": args.profile_updates,
            "share": {k: v / total for k, v in phases.seconds.items()},
            "outside_forward_backward": (total - phases.seconds["forward"] - phases.seconds["backward"]) / total,
            "last_loss": losses[-1]}


def row_arguments(name: str, data: Path, args, save_dir: Path) -> list:
    model, task_args, _ = ROWS[name]
    shape = TINY[model] if args.smoke else BASE[model]
    positions = (["--max-source-positions", str(args.tokens), "--max-target-positions", str(args.tokens)]
                 if model == "bart" else ["--max-positions", str(args.tokens)])
    precision = PRECISIONS["fp16"]["cpu" if args.cpu else "cuda"]
    cpu = ["--distributed-world-size", "1"] if args.cpu else []
    return [str(data), "--user-dir", str(Path(__file__).resolve().parents[1] / "fairseq_maskplug"), *task_args, *shape,
            *positions, "--tokens-per-sample", str(args.tokens), *precision, *cpu, "--optimizer", "adam", "--lr",
            "1e-4", "--batch-size", str(args.batch_size), "--num-workers", str(args.num_workers),
            "--required-batch-size-multiple", "1", "--disable-validation", "--no-progress-bar", "--save-dir",
            str(save_dir), "--no-save", "--seed", "1", "--log-format", "none"]


# ---- the results -----------------------------------------------------------------------------------

def ratios(rows: list) -> dict:
    """Each row's words/s over its reference's (the mean of the reference's first and last measurement)."""
    by_name = {}
    for row in rows:
        by_name.setdefault(row["row"], []).append(row["words_per_s"])
    out = {}
    for row in rows:
        reference = ROWS.get(row["row"], (None, None, None))[2]
        if reference in by_name and row["row"] not in out:
            out[row["row"]] = row["words_per_s"] / statistics.mean(by_name[reference])
    return out


def phase_text(share: dict) -> str:
    return ", ".join(f"{PHASE_TEXT[k]} {100 * share[k]:.0f}%" for k in PHASES)


def summary_parts(data: dict) -> dict:
    """``speed``: the whole table; ``speed-<policy>``: one policy's line (the guided_mlm row and, where there is
    one, the guided_denoising row), for the policy's own page. Each a list of lines, the first a ``## `` heading."""
    rows, meta = data["rows"], data["meta"]
    ratio = ratios(rows)
    first = {}
    for row in rows:
        first.setdefault(row["row"], row)
    lines = [f"## training speed of every policy against random ({meta['shape']}, fp16, blocks of {meta['tokens']} "
             f"tokens, batch {meta['batch_size']}, {meta['updates']} timed updates a row)", "",
             "| row | words/s | vs random | peak MiB | outside forward/backward | loader wait | prepare_batch | "
             "forward | backward | rest |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, row in first.items():
        again = [r["words_per_s"] for r in rows if r["row"] == name]
        words = " / ".join(f"{w:,.0f}" for w in again)
        versus = f"{ratio[name]:.2f}" if name in ratio else ("reference" + (" (first / last)" if len(again) > 1
                                                                                   else ""))
        share = row["share"]
        peak = f"{row['peak_mib']:,.0f}" if row.get("peak_mib") is not None else "-"
        lines.append(f"| {name} | {words} | {versus} | {peak} | {100 * row['outside_forward_backward']:.0f}% | "
                     + " | ".join(f"{100 * share[k]:.0f}%" for k in PHASES) + " |")
    drift = reference_drift(rows)
    slow = [name for name, r in ratio.items() if r < SLOW]
    lines += ["", drift] if drift else []
    lines += ["", "Below 0.8x: " + ("; ".join(f"{name} ({ratio[name]:.2f}x: {phase_text(first[name]['share'])})"
                                             for name in slow) if slow else "none.")]
    if data.get("failed"):
        lines.append("Failed: " + "; ".join(f"{f['row']} ({f['error'].splitlines()[0]})" for f in data["failed"]))
    if data.get("left_out"):
        lines.append("Left out by the time limit: " + ", ".join(data["left_out"]) + ".")
    parts = {"speed": lines}
    for name, row in first.items():
        if name not in ratio or "(fairseq)" in name or name.startswith("fe_mlm"):
            continue
        seq2seq = name.startswith("guided_denoising ")
        policy = name.removeprefix("guided_denoising ").split(",")[0]
        entry = parts.setdefault(f"speed-{policy}", [f"## {policy}'s training speed on a GPU", ""])
        label = ("guided_denoising (bart_base)" if seq2seq else
                 "guided_mlm (roberta_base)" + (name[len(policy):] if "," in name else ""))
        slow_text = f"; where its time goes: {phase_text(row['share'])}" if ratio[name] < SLOW else ""
        entry.append(f"- {label}: {ratio[name]:.2f}x random's words/s ({row['words_per_s']:,.0f}), "
                     f"{100 * row['outside_forward_backward']:.0f}% of a step outside the forward and backward"
                     + slow_text)
    for name, entry in parts.items():
        if name != "speed" and drift:
            entry += ["", drift]
    return parts


def reference_drift(rows: list) -> str:
    """The references' first and last words/s, and their spread as a share of their mean: a ratio that close to 1
    is inside the run's own drift."""
    spreads = []
    for name in REFERENCES:
        again = [r["words_per_s"] for r in rows if r["row"] == name]
        if len(again) > 1:
            spread = (max(again) - min(again)) / statistics.mean(again)
            spreads.append(f"{name} {again[0]:,.0f} then {again[-1]:,.0f} words/s ({100 * spread:.0f}% of their mean)")
    if not spreads:
        return ""
    return ("The references, timed first and again last: " + "; ".join(spreads) + ". A ratio closer to 1 than that "
            "spread is within the run's own drift; one run, one device.")


def print_tables(data: dict) -> None:
    print("\n".join(summary_parts(data)["speed"]))


def ratio_line(data: dict) -> str:
    ratio = ratios(data["rows"])
    policy_rows = {k: v for k, v in ratio.items() if "(fairseq)" not in k and "fe_mlm" not in k}
    slowest = min(policy_rows.values()) if policy_rows else float("nan")
    key = lambda name: re.sub(r"\W+", "_", name).strip("_")  # noqa: E731
    return f"ratio_min={slowest:.3f} " + " ".join(f"ratio_{key(k)}={v:.3f}" for k, v in ratio.items())


def write_results(path, data: dict) -> None:
    if path:
        from fairseq_maskplug.common.atomic import write_text
        write_text(str(path), json.dumps(data, indent=1) + "\n")


def main() -> int:
    parser = benchmark_parser(__doc__)
    add_run_options(parser, updates=30, lines=1300, what="timed updates per row")
    parser.add_argument("--warmup", type=int, default=6, help="updates before the timing")
    parser.add_argument("--profile-updates", type=int, default=10, help="updates timed phase by phase after them")
    parser.add_argument("--only", help="comma-separated rows (default: all; the references are always run)")
    parser.add_argument("--budget", type=float, default=float("inf"),
                        help="seconds: rows not started by then are left out (the references' second runs too)")
    parser.add_argument("--json-out", type=Path, help="the results file, rewritten after every row")
    parser.add_argument("--table", type=Path, help="print the tables of a results file and stop")
    args = shrink(parser.parse_args(), tokens=32, batch_size=4, warmup=1, updates=2, profile_updates=2, lines=60)
    if args.table:
        data = json.loads(args.table.read_text(encoding="utf-8"))
        print_tables(data)
        print(ratio_line(data))
        return 0
    started = time.perf_counter()
    logging.basicConfig(level=logging.WARNING)
    for name in ("fairseq", "fairseq_maskplug", "hydra"):  # this process builds tasks and trainers: no INFO lines
        logging.getLogger(name).setLevel(logging.WARNING)
    require_cuda(parser, args)
    wanted = list(ROWS) if not args.only else list(dict.fromkeys([*REFERENCES, *args.only.split(",")]))
    unknown = [name for name in wanted if name not in ROWS]
    if unknown:
        parser.error(f"--only: unknown rows {', '.join(unknown)} (rows: {', '.join(ROWS)})")
    from fairseq_maskplug import __version__
    meta = {"kind": "policy_speed", "device": "CPU" if args.cpu else cuda_name(), "shape": "tiny" if args.smoke else "base",
            "tokens": args.tokens, "batch_size": args.batch_size, "warmup": args.warmup, "updates": args.updates,
            "profile_updates": args.profile_updates, "num_workers": args.num_workers,
            "commit": os.environ.get("MASKPLUG_COMMIT") or "unknown", "version": __version__,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "command": " ".join(sys.argv)}
    data = {"meta": meta, "rows": [], "left_out": [], "failed": []}
    print(f"gpu_policy_speed on {meta['device']}: {len(wanted)} rows, blocks of {args.tokens} tokens, batch "
          f"{args.batch_size}, {args.warmup} + {args.updates} + {args.profile_updates} updates a row", flush=True)
    order = wanted + [name for name in REFERENCES if name in wanted]  # the references again, last
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = make_data(Path(tmp), args.lines, args.tokens, vocab=40 if args.smoke else 5000)
        for name in order:
            if time.perf_counter() - started > args.budget:
                data["left_out"].append(name)
                continue
            try:
                row = measure(name, row_arguments(name, data_dir, args, Path(tmp) / "ck"), args)
            except Exception as error:  # one row's failure is recorded; the other rows still run
                data["failed"].append({"row": name, "error": f"{type(error).__name__}: {error}"[:2000]})
                print(f"{name}: FAILED:\n{traceback.format_exc()}", flush=True)
                gc.collect()
            else:
                data["rows"].append(row)
                print(f"{name}: {row['words_per_s']:,.0f} words/s, {1000 * row['seconds_per_update']:.1f} ms an "
                      f"update, {100 * row['outside_forward_backward']:.0f}% outside forward/backward", flush=True)
            meta["elapsed_s"] = round(time.perf_counter() - started, 1)
            write_results(args.json_out, data)
    if data["left_out"]:
        print(f"left out by --budget {args.budget:.0f} s: {', '.join(data['left_out'])}")
    print()
    print_tables(data)
    for failed in data["failed"]:
        print(f"failed: {failed['row']}: {failed['error'].splitlines()[0]}")
    print(ratio_line(data))
    return 1 if data["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
