"""What bench_masking.py and bench_denoising.py share: one of our tasks against a fairseq task
on the same binarized data, in one run.

1. Per-item ``__getitem__`` time of each task's training dataset, every item of an epoch,
   repeats interleaved, a new epoch each repeat so no cache carries over; median over repeats.
2. Training words per second of ``fairseq-train`` for each task on the same model, runs
   interleaved; median over logged intervals after the first, then median over runs.

The last line printed is ``ratio_item=<ours/fairseq seconds per item> ratio_wps=<ours/fairseq wps>``.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Sequence

import numpy as np

from commands import run_checked
from smoke import add_smoke_option, shrink

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def make_data(root: Path, lines: int = 6000) -> Path:
    """A Zipf-distributed synthetic corpus of ``lines`` lines of 5-39 words, binarized with fairseq-preprocess."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 40, lines)
    words = rng.zipf(1.3, size=int(lengths.sum())) % 5000  # (it drew 20 per line: the last lines were empty)
    text = root / "train.txt"
    with open(text, "w") as f:
        pos = 0
        for n in lengths:
            f.write(" ".join(f"w{w}" for w in words[pos:pos + n]) + "\n")
            pos += n
    run_checked([BIN / "fairseq-preprocess", "--only-source", "--trainpref", text, "--destdir",
                 root / "bin", "--workers", "2"])
    return root / "bin"


def build_dataset(data: Path, task_args: Sequence[str]):
    """The training dataset fairseq-train would build from ``DATA *task_args``."""
    import fairseq_maskplug.plugin  # noqa: F401  (registers the tasks with fairseq)
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), [str(data), *task_args])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    task.load_dataset("train")
    return task.dataset("train")


def seconds_per_item(dataset, epoch: int) -> float:
    dataset.set_epoch(epoch)
    start = time.perf_counter()
    for i in range(len(dataset)):
        dataset[i]
    return (time.perf_counter() - start) / len(dataset)


def train_wps(data: Path, task_args: Sequence[str], updates: int, save_dir: Path) -> float:
    result = subprocess.run(
        [BIN / "fairseq-train", data, "--user-dir", REPO / "fairseq_maskplug", *task_args,
         "--optimizer", "adam", "--lr", "1e-4",
         "--batch-size", "32", "--max-update", str(updates), "--cpu", "--num-workers", "0",
         "--distributed-world-size", "1", "--required-batch-size-multiple", "1", "--no-save",
         "--disable-validation", "--no-progress-bar", "--log-format", "json", "--log-interval", "10",
         "--save-dir", save_dir, "--seed", "1"],
        capture_output=True, text=True, env={"PYTHONWARNINGS": "ignore", "PATH": str(BIN)})
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    records = [json.loads(line.split("| train_inner |", 1)[1]) for line in (result.stdout + result.stderr).splitlines()
               if "| train_inner |" in line]
    return statistics.median(float(r["wps"]) for r in records[1:])


def compare(bench: str, doc: str, ours: str, theirs: str, task_args: Dict[str, Sequence[str]], minutes: int) -> None:
    """Parse the command line, time ``ours`` against ``theirs`` (both keys of ``task_args``, the
    fairseq-train arguments of each task: --task, --criterion, model and data options) and print
    the medians and the ratio line."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, help="binarized data dir with dict.txt and train (default: synthetic)")
    parser.add_argument("--repeats", type=int, default=5, help="passes over the data for the item timing")
    parser.add_argument("--updates", type=int, default=300,
                        help="updates per training run (shorter runs vary by more than 5%%)")
    parser.add_argument("--wps-runs", type=int, default=4, help="training runs per task, interleaved")
    parser.add_argument("--lines", type=int, default=6000, help="lines of the synthetic corpus")
    add_smoke_option(parser)
    args = shrink(parser.parse_args(), repeats=1, updates=20, wps_runs=1, lines=300)
    print(f"{bench}: {args.repeats} item-timing repeats and {args.wps_runs} x 2 training runs of "
          f"{args.updates} updates; about {minutes} minutes on 2 idle CPU cores", flush=True)
    names = (ours, theirs)
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or make_data(Path(tmp), args.lines)
        datasets = {name: build_dataset(data, task_args[name]) for name in names}
        item = {name: [] for name in names}
        for r in range(args.repeats):
            for name in names:
                item[name].append(seconds_per_item(datasets[name], epoch=r + 2))
        wps = {name: [] for name in names}
        for r in range(args.wps_runs):
            for name in names if r % 2 == 0 else names[::-1]:
                wps[name].append(train_wps(data, task_args[name], args.updates, Path(tmp) / "ck"))
    med = {k: statistics.median(v) for k, v in item.items()}
    wmed = {k: statistics.median(v) for k, v in wps.items()}
    print("blocks: " + ", ".join(f"{name} {len(datasets[name])}" for name in names))
    width = max(len(name) for name in names)
    for name in names[::-1]:
        print(f"{name:>{width}}: {med[name] * 1e6:8.1f} us/item (runs: "
              f"{', '.join(f'{v * 1e6:.1f}' for v in item[name])})  "
              f"{wmed[name]:9.0f} wps (runs: {', '.join(f'{v:.0f}' for v in wps[name])})")
    print(f"ratio_item={med[ours] / med[theirs]:.3f} ratio_wps={wmed[ours] / wmed[theirs]:.3f}")
