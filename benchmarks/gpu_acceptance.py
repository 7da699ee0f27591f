"""GPU acceptance: every task of the plugin in half precision at base shape, in one run.

    python benchmarks/gpu_acceptance.py                 # a CUDA machine: roberta_base / bart_base, --fp16,
                                                        # blocks of 512 tokens, 300 updates per run
    python benchmarks/gpu_acceptance.py --precision bf16   # the same in bfloat16 (--bf16; fp16,bf16: both)
    python benchmarks/gpu_acceptance.py --cpu --smoke   # tiny shapes on CPU (--memory-efficient-fp16):
                                                        # what the test suite runs so that this cannot rot

On synthetic data (Zipf words in lines of about ``--tokens`` tokens, with the side information each
task reads: an importance track, L3 pseudo-likelihoods, answer spans, labels, a cloze task),
``fairseq-maskplug-train`` runs every task with the same model, batch and data:

- words/s of ``guided_mlm`` against fairseq's own ``masked_lm``, and of ``guided_denoising``
  against fairseq's ``denoising``, runs interleaved (``--runs`` each; targets: ratios >= 0.98);
- every other task's words/s relative to ``guided_mlm`` (encoder tasks) or ``guided_denoising``
  (seq2seq), which differ by what they compute, not only by their data;
- peak GPU memory (``torch.cuda.max_memory_allocated`` in the training process; none on CPU),
  loss-scale overflows per 100 updates (fairseq's "gradient overflow detected" lines; bf16 has no
  loss scale) and the final loss, which must be finite;
- the training dataset's items/s in one data-loader worker (``__getitem__`` over the first items)
  against the items/s training consumed, and their margin (loader items/s x ``--num-workers`` /
  consumed): below 1 the loader starves the GPU.

Words/s is fairseq's ``wps``: median over the logged intervals after the first, then over runs.
It prints one table per precision (``--precision fp16,bf16``: fp16 is fairseq's ``--fp16`` on CUDA,
``--memory-efficient-fp16`` on CPU; bf16 is ``--bf16``) and, with ``--json-out FILE``, appends every
run and every table row to FILE as it finishes (a run cut short keeps what it measured). The last
line is ``ratio_mlm=<guided_mlm/masked_lm wps> ratio_denoising=<guided_denoising/denoising wps>`` of
the first precision, then the same of the others with the precision appended to the key
(``ratio_mlm_bf16=``).
"""

import argparse
import json
import logging
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from commands import run_checked
from smoke import benchmark_parser, shrink

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RATIO_TARGET = 0.98

BASE = {"roberta": ["--arch", "roberta_base"], "bart": ["--arch", "bart_base"]}
TINY = {"roberta": ["--arch", "roberta_base", "--encoder-layers", "2", "--encoder-embed-dim", "32",
                    "--encoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2"],
        "bart": ["--arch", "bart_base", "--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "32",
                 "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
                 "--encoder-attention-heads", "2", "--decoder-attention-heads", "2"]}
DENOISING = ["--mask", "0.15", "--mask-length", "subword", "--replace-length", "1", "--mask-random", "0",
             "--permute-sentences", "0", "--rotate", "0", "--insert", "0", "--poisson-lambda", "3.5"]
#: the options of each precision, on CUDA and on CPU (fairseq's --fp16 needs CUDA; --bf16 needs the
#: plugin's fix of fairseq's "--bf16 implies --tpu", integration/compat.py)
PRECISIONS = {"fp16": {"cuda": ["--fp16"], "cpu": ["--memory-efficient-fp16", "--cpu", "--fp16-init-scale", "128"]},
              "bf16": {"cuda": ["--bf16"], "cpu": ["--bf16", "--cpu"]}}
JOINT = ["--task", "joint_mlm_classification", "--criterion", "joint_mlm_classification", "--num-classes", "2"]


def tasks(data: Path, seq2seq: Path):
    """``name: (model, data directory, arguments, reference)`` in run order; the meta policy
    needs ``seq2seq``, the last checkpoint of the guided_denoising runs."""
    mlm, task = data / "mlm", data / "task"
    return {
        "masked_lm": ("roberta", mlm, ["--task", "masked_lm", "--criterion", "masked_lm"], None),
        "guided_mlm": ("roberta", mlm, ["--task", "guided_mlm", "--criterion", "masked_lm"], "masked_lm"),
        "guided_mlm l3": ("roberta", mlm, ["--task", "guided_mlm", "--criterion", "masked_lm", "--mask-policy", "l3"],
                          "guided_mlm"),
        "selective_mlm": ("roberta", mlm, ["--task", "selective_mlm", "--criterion", "masked_lm"], "guided_mlm"),
        "fe_mlm": ("roberta", mlm, ["--task", "fe_mlm", "--criterion", "masked_lm", "--fe-views", "2"], "guided_mlm"),
        "joint": ("roberta", task, JOINT, "guided_mlm"),
        "joint tartan": ("roberta", task, JOINT + ["--loss-weighting", "tartan", "--tartan-dev-fit-size", "8",
                                                   "--tartan-dev-batch-size", "8"], "guided_mlm"),
        "token_importance": ("roberta", task / "input0", ["--task", "token_importance", "--criterion",
                                                           "token_importance"], "guided_mlm"),
        "tlm": ("roberta", task, ["--task", "tlm", "--criterion", "tlm", "--num-classes", "2",
                                  "--tlm-external-data", mlm, "--tlm-external-ratio", "3"], "guided_mlm"),
        "span_policy": ("roberta", mlm, ["--task", "span_policy"], "guided_mlm"),
        "denoising": ("bart", mlm, ["--task", "denoising", "--criterion", "cross_entropy", *DENOISING], None),
        "guided_denoising": ("bart", mlm, ["--task", "guided_denoising", "--criterion", "cross_entropy",
                                           "--mask-policy", "random", "--mask-prob", "0.15", "--target-format",
                                           "full"], "denoising"),
        "meta_span_policy": ("roberta", mlm, ["--task", "meta_span_policy", "--downstream-data", data / "cloze",
                                              "--seq2seq-checkpoint", seq2seq, "--meta-candidates", "4",
                                              "--meta-downstream-batch", "4"], "guided_mlm"),
    }


# ---- synthetic data --------------------------------------------------------------------------------

def write_lines(path: Path, lines) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def preprocess(destdir: Path, trainpref: Path, *extra) -> None:
    run_checked([BIN / "fairseq-preprocess", "--only-source", "--trainpref", trainpref, "--destdir", destdir,
                 "--workers", str(min(8, os.cpu_count() or 1)), *extra])


def track(split_prefix: Path, name: str, rows, dtype: str) -> None:
    from fairseq_maskplug.data import write_side_info
    write_side_info(f"{split_prefix}.{name}", rows, dtype, tokens_prefix=str(split_prefix))


def make_data(root: Path, lines: int, tokens: int, vocab: int) -> Path:
    """``mlm/`` (tracks: importance, plt, answer_span), ``task/`` (input0 with an importance
    track, label) on mlm's dictionary, and ``cloze/`` (question -> answer) for the meta policy."""
    from fairseq.data import Dictionary, data_utils

    rng = np.random.default_rng(0)
    lengths = rng.integers(tokens // 2, tokens - 2, lines)
    words = [[f"w{w}" for w in rng.zipf(1.3, size=int(n)) % vocab] for n in lengths]
    text = write_lines(root / "train.txt", (" ".join(line) for line in words))
    labels = write_lines(root / "labels.txt", (str(int(x)) for x in rng.integers(0, 2, lines)))
    preprocess(root / "mlm", text, "--validpref", text)  # valid = train: only META-TARTAN's dev set reads it
    preprocess(root / "task" / "input0", text, "--validpref", text, "--srcdict", root / "mlm" / "dict.txt")
    preprocess(root / "task" / "label", labels, "--validpref", labels)
    dictionary = Dictionary.load(str(root / "mlm" / "dict.txt"))
    tokens = data_utils.load_indexed_dataset(str(root / "mlm" / "train"), dictionary)
    sizes = np.array(tokens.sizes)  # a copy, taken while the dataset lives: .sizes is a view of its memory map
    importance = [np.append(rng.random(n - 1) < 0.15, 0).astype(np.uint8) for n in sizes]
    plt = [np.append(rng.uniform(0.01, 1.0, n - 1), 1.0) for n in sizes]
    spans = []
    for n in sizes:
        row, start = np.zeros(n, np.uint8), int(rng.integers(0, n - 4))
        row[start] |= 1
        row[start + int(rng.integers(0, 3))] |= 2
        spans.append(row)
    for split in ("train", "valid"):
        track(root / "mlm" / split, "importance", importance, "uint8")
        track(root / "task" / "input0" / split, "importance", importance, "uint8")
        track(root / "mlm" / split, "plt", plt, "float64")
        track(root / "mlm" / split, "answer_span", spans, "uint8")
    probe_dict = root / "dict.probe.txt"
    probe_dict.write_text((root / "mlm" / "dict.txt").read_text() + "<mask> 0\n")
    from fairseq_maskplug.evaluation.probe import word_cloze

    questions, answers = word_cloze([" ".join(line[:64]) for line in words], rng)
    write_lines(root / "cloze.train.q", questions)
    write_lines(root / "cloze.train.a", answers)
    run_checked([BIN / "fairseq-preprocess", "--source-lang", "q", "--target-lang", "a", "--trainpref",
                 root / "cloze.train", "--validpref", root / "cloze.train", "--srcdict", probe_dict, "--tgtdict",
                 probe_dict, "--destdir", root / "cloze", "--workers", "1"])
    return root


# ---- one training run -------------------------------------------------------------------------------

# runs fairseq-maskplug-train in this interpreter, then prints the peak GPU memory
RUNNER = ("import atexit, sys, torch\n"
          "atexit.register(lambda: print('PEAK_MEMORY', torch.cuda.max_memory_allocated() if torch.cuda.is_available()"
          " else -1, flush=True))\n"
          "from fairseq_maskplug.commands.train_cli import console_main\n"
          "sys.argv[0] = 'fairseq-maskplug-train'\n"
          "console_main()\n")


def train(name: str, spec, args, save_dir: Path, keep: bool) -> dict:
    model, data, task_args, _ = spec
    shape = TINY[model] if args.smoke else BASE[model]
    positions = (["--max-source-positions", str(args.tokens), "--max-target-positions", str(args.tokens)]
                 if model == "bart" else ["--max-positions", str(args.tokens)])
    precision = PRECISIONS[args.precision_now]["cpu" if args.cpu else "cuda"]
    saving = ["--no-epoch-checkpoints", "--save-interval-updates", "0"] if keep else ["--no-save"]
    argv = [str(data), *map(str, task_args), *shape, *positions, "--tokens-per-sample", str(args.tokens),
            *precision, "--optimizer", "adam", "--lr", "1e-4", "--batch-size", str(args.batch_size),
            "--max-update", str(args.updates), "--num-workers", str(args.num_workers), "--required-batch-size-multiple",
            "1", "--disable-validation", "--no-progress-bar", "--log-format", "json", "--log-interval",
            str(args.log_interval), "--save-dir", str(save_dir), "--seed", "1", *saving]
    if args.cpu:
        argv += ["--distributed-world-size", "1"]
    result = subprocess.run([sys.executable, "-c", RUNNER, *argv], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONWARNINGS="ignore"))
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{output[-4000:]}")
    records = [json.loads(line.split("| train_inner |", 1)[1]) for line in output.splitlines()
               if "| train_inner |" in line]
    peak = [int(line.split()[-1]) for line in output.splitlines() if line.startswith("PEAK_MEMORY")]
    overflows = sum("gradient overflow detected" in line for line in output.splitlines())
    if not records:
        raise RuntimeError(f"{name} logged no training interval:\n{output[-2000:]}")
    return {"wps": statistics.median(float(r["wps"]) for r in records[1:] or records),
            "loss": float(records[-1]["loss"]), "overflows": overflows,
            "peak_mib": peak[-1] / 2 ** 20 if peak and peak[-1] >= 0 else None,
            "tokens_per_item": float(records[-1].get("wpb", 0)) / max(float(records[-1].get("bsz", 1)), 1)}


def loader_items_per_second(spec, args, items: int) -> float:
    """``__getitem__`` of the training dataset that fairseq-train builds, in this process (one worker)."""
    from task_timing import build_dataset

    model, data, task_args, _ = spec
    shape = TINY[model] if args.smoke else BASE[model]
    dataset = build_dataset(data, [*map(str, task_args), *shape, "--tokens-per-sample", str(args.tokens)])
    dataset.set_epoch(1)
    n = min(items, len(dataset))
    start = time.perf_counter()
    for i in range(n):
        dataset[i]
    return n / (time.perf_counter() - start)


def precision_list(text: str) -> list:
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in PRECISIONS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"--precision takes {' or '.join(PRECISIONS)}, comma-separated; got {text!r}")
    return list(dict.fromkeys(names))


def record(args, entry: dict) -> None:
    """Append ``entry`` to ``--json-out`` (one JSON object a line), if given."""
    if args.json_out:
        with open(args.json_out, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def measure(args, specs, wanted, root: Path) -> list:
    """Train every task of ``wanted`` in ``args.precision_now`` (the compared pairs interleaved,
    ``--runs`` each; the others once) and time its loader: the rows of one table."""
    precision = args.precision_now
    results = {name: [] for name in wanted}

    def one(name, keep):
        run = train(name, specs[name], args, root / "ck" / precision / name.replace(" ", "_"), keep=keep)
        record(args, {"precision": precision, "task": name, **run})
        results[name].append(run)

    for r in range(args.runs):
        for pair in (("masked_lm", "guided_mlm"), ("denoising", "guided_denoising")):
            for name in pair if r % 2 == 0 else pair[::-1]:
                if name in results:
                    one(name, keep=name == "guided_denoising")
    for name in wanted:
        if not results[name]:
            one(name, keep=False)
    table = []
    for name in wanted:
        runs = results[name]
        wps = statistics.median(run["wps"] for run in runs)
        consumed = wps / max(runs[-1]["tokens_per_item"], 1)
        loader = loader_items_per_second(specs[name], args, args.loader_items)
        table.append((name, wps, runs, loader, consumed))
    return table


def print_table(args, specs, table) -> dict:
    """Print one precision's table; returns ``{"mlm": ratio, "denoising": ratio}``."""
    precision = args.precision_now
    wps_of = {name: wps for name, wps, *_ in table}
    print(f"\n{precision}:\n{'task':<18}{'words/s':>10}{'vs':>18}{'peak MiB':>10}{'overflow/100':>13}"
          f"{'final loss':>11}{'loader/train items':>20}{'margin':>8}")
    bad = []
    for name, wps, runs, loader, consumed in table:
        reference = specs[name][3]
        relative = f"{wps / wps_of[reference]:.3f} {reference}" if reference in wps_of else "-"
        peak = runs[-1]["peak_mib"]
        overflow = 100 * sum(run["overflows"] for run in runs) / (args.updates * len(runs))
        loss = runs[-1]["loss"]
        if not math.isfinite(loss):
            bad.append(f"{name} ({precision}): final loss {loss}")
        margin = loader * args.num_workers / consumed
        starves = " starves" if margin < 1 else ""
        overflow_text = f"{overflow:.1f}" if precision == "fp16" else "-"
        print(f"{name:<18}{wps:>10.0f}{relative:>18}{(f'{peak:.0f}' if peak is not None else '-'):>10}"
              f"{overflow_text:>13}{loss:>11.3f}{loader:>10.0f}/{consumed:<8.1f}{margin:>9.1f}{starves}")
        record(args, {"precision": precision, "row": name, "wps": wps, "relative": relative, "peak_mib": peak,
                      "overflows_per_100": overflow if precision == "fp16" else None, "final_loss": loss,
                      "loader_items_per_s": loader, "consumed_items_per_s": consumed, "margin": margin})
    if bad:
        raise SystemExit("not finite: " + "; ".join(bad))
    return {key: wps_of[ours] / wps_of[theirs] if ours in wps_of and theirs in wps_of else float("nan")
            for key, ours, theirs in (("mlm", "guided_mlm", "masked_lm"),
                                      ("denoising", "guided_denoising", "denoising"))}


def main() -> None:
    parser = benchmark_parser(__doc__)
    add_run_options(parser, updates=300, lines=4000, what="updates per training run")
    parser.add_argument("--precision", type=precision_list, default=["fp16"],
                        help="fp16, bf16 or fp16,bf16: one table each (default: fp16)")
    parser.add_argument("--runs", type=int, default=2, help="interleaved runs of the two compared pairs")
    parser.add_argument("--loader-items", type=int, default=500, help="items timed for the loader's items/s")
    parser.add_argument("--log-interval", type=int, default=20, help="updates per logged words/s interval")
    parser.add_argument("--only", help="comma-separated task names of the table (default: all)")
    parser.add_argument("--json-out", type=Path, help="append every run and table row to this file as JSON lines")
    args = shrink(parser.parse_args(), tokens=32, batch_size=8, updates=6, runs=1, lines=64, loader_items=32,
                  log_interval=1)
    logging.basicConfig(level=logging.WARNING)  # this process builds datasets: no fairseq or hydra log lines
    require_cuda(parser, args)
    device = "CPU" if args.cpu else cuda_name()
    print(f"gpu_acceptance on {device}: {', '.join(args.precision)}; blocks of {args.tokens} tokens, batch "
          f"{args.batch_size}, {args.updates} updates per run", flush=True)
    record(args, {"device": device, "precision": args.precision, "tokens": args.tokens,
                  "batch_size": args.batch_size, "updates": args.updates, "runs": args.runs})
    ratios = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = make_data(root, args.lines, args.tokens, vocab=40 if args.smoke else 5000)
        for precision in args.precision:
            args.precision_now = precision
            seq2seq = root / "ck" / precision / "guided_denoising" / "checkpoint_last.pt"
            specs = tasks(data, seq2seq)
            wanted = args.only.split(",") if args.only else list(specs)
            ratios[precision] = print_table(args, specs, measure(args, specs, wanted, root))
    print(f"(targets: ratios >= {RATIO_TARGET})")
    first = args.precision[0]
    print(" ".join(f"ratio_{key}{'' if precision == first else '_' + precision}={value:.3f}"
                   for precision in args.precision for key, value in ratios[precision].items()))


def cuda_name() -> str:
    """The CUDA device, its CUDA and torch versions, as a results file records them; ``CPU`` without one."""
    import torch
    if not torch.cuda.is_available():
        return "CPU"
    return f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda}, torch {torch.__version__})"


def add_run_options(parser: argparse.ArgumentParser, updates: int, lines: int, what: str) -> None:
    """What the GPU benchmarks' training runs take: the device (``--cpu``), the block length and batch of every run,
    its ``updates`` (``what`` says which), the synthetic corpus's ``lines`` and fairseq's loader workers."""
    parser.add_argument("--cpu", action="store_true", help="run on CPU (fp16: --memory-efficient-fp16; else --fp16 "
                                                           "on CUDA)")
    parser.add_argument("--tokens", type=int, default=512, help="tokens per sample (block length)")
    parser.add_argument("--batch-size", type=int, default=16, help="sentences per batch, every run")
    parser.add_argument("--updates", type=int, default=updates, help=what)
    parser.add_argument("--lines", type=int, default=lines, help="lines of the synthetic corpus (one epoch must hold "
                                                                  "a run's updates)")
    parser.add_argument("--num-workers", type=int, default=1, help="fairseq's data-loader processes (its default)")


def require_cuda(parser: argparse.ArgumentParser, args) -> None:
    """Without ``--cpu``, a machine with no CUDA device is refused in one line."""
    if not args.cpu and cuda_name() == "CPU":
        parser.error("no CUDA device here: give --cpu (with --smoke for the tiny shapes)")


if __name__ == "__main__":
    main()
