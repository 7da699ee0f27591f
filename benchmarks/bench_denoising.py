"""guided_denoising (random policy, +Orig) vs fairseq's denoising (BART) on the same data, in one run.

Both mask 15% of the tokens one by one with ``<mask>`` and predict the whole block
(fairseq: ``--mask 0.15 --mask-length subword --replace-length 1``, no permutation,
rotation, insertion or random tokens; ours: ``--mask-policy random --target-format full``).

1. Per-item ``__getitem__`` time of each task's training dataset, every item of an epoch,
   repeats interleaved, a new epoch each repeat; median over repeats.
2. Training words per second of ``fairseq-train --task guided_denoising`` vs ``--task
   denoising`` for the same tiny BART, runs interleaved; median over logged intervals
   after the first, then median over runs. Words are target tokens (fairseq's ``ntokens``);
   fairseq's denoising strips each line's ``</s>`` before blocking, ours keeps it, so a
   block holds the same text with a few more tokens here.

Last line: ``ratio_item=<ours/fairseq seconds per item> ratio_wps=<ours/fairseq wps>``
(targets: ratio_item <= 1.0, ratio_wps >= 0.95).

    python benchmarks/bench_denoising.py [--data DIR] [--repeats 5] [--updates 300] [--wps-runs 4]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SHAPE = ["--arch", "bart_tiny", "--encoder-embed-dim", "64", "--decoder-embed-dim", "64",
         "--encoder-ffn-embed-dim", "256", "--decoder-ffn-embed-dim", "256", "--encoder-attention-heads", "2",
         "--decoder-attention-heads", "2", "--max-source-positions", "128", "--max-target-positions", "128"]
COMMON = ["--tokens-per-sample", "128", "--sample-break-mode", "complete"]
TASK_ARGS = {
    "guided_denoising": COMMON + ["--mask-policy", "random", "--mask-prob", "0.15", "--target-format", "full"],
    "denoising": COMMON + ["--mask", "0.15", "--mask-length", "subword", "--replace-length", "1", "--mask-random", "0",
                           "--permute-sentences", "0", "--rotate", "0", "--insert", "0", "--poisson-lambda", "3.5"],
}
TASKS = ("guided_denoising", "denoising")


def make_data(root: Path, lines: int = 6000) -> Path:
    """A Zipf-distributed synthetic corpus (as bench_masking's), binarized with fairseq-preprocess."""
    rng = np.random.default_rng(0)
    words = rng.zipf(1.3, size=lines * 20) % 5000
    text = root / "train.txt"
    with open(text, "w") as f:
        pos = 0
        for n in rng.integers(5, 40, lines):
            f.write(" ".join(f"w{w}" for w in words[pos:pos + n]) + "\n")
            pos += n
    subprocess.run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", text, "--destdir",
                    root / "bin", "--workers", "2"], check=True, capture_output=True)
    return root / "bin"


def build_dataset(data: Path, task_name: str):
    import fairseq_maskplug.plugin  # noqa: F401  (registers the tasks with fairseq)
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(),
                                       [str(data), "--task", task_name, *SHAPE, *TASK_ARGS[task_name]])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    task.load_dataset("train")
    return task.dataset("train")


def seconds_per_item(dataset, epoch: int) -> float:
    dataset.set_epoch(epoch)
    start = time.perf_counter()
    for i in range(len(dataset)):
        dataset[i]
    return (time.perf_counter() - start) / len(dataset)


def train_wps(data: Path, task_name: str, updates: int, save_dir: Path) -> float:
    result = subprocess.run(
        [BIN / "fairseq-train", data, "--user-dir", REPO / "fairseq_maskplug", "--task", task_name,
         "--criterion", "cross_entropy", *SHAPE, *TASK_ARGS[task_name], "--optimizer", "adam", "--lr", "1e-4",
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, help="binarized data dir with dict.txt and train (default: synthetic)")
    parser.add_argument("--repeats", type=int, default=5, help="passes over the data for the item timing")
    parser.add_argument("--updates", type=int, default=300,
                        help="updates per training run (shorter runs vary by more than 5%%)")
    parser.add_argument("--wps-runs", type=int, default=4, help="training runs per task, interleaved")
    args = parser.parse_args()
    print(f"bench_denoising: {args.repeats} item-timing repeats and {args.wps_runs} x 2 training runs of "
          f"{args.updates} updates; about 20 minutes on 2 idle CPU cores", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or make_data(Path(tmp))
        datasets = {name: build_dataset(data, name) for name in TASKS}
        item = {name: [] for name in TASKS}
        for r in range(args.repeats):
            for name in TASKS:
                item[name].append(seconds_per_item(datasets[name], epoch=r + 2))
        wps = {name: [] for name in TASKS}
        for r in range(args.wps_runs):
            for name in TASKS if r % 2 == 0 else TASKS[::-1]:
                wps[name].append(train_wps(data, name, args.updates, Path(tmp) / "ck"))
    med = {k: statistics.median(v) for k, v in item.items()}
    wmed = {k: statistics.median(v) for k, v in wps.items()}
    print(f"blocks: " + ", ".join(f"{name} {len(datasets[name])}" for name in TASKS))
    for name in TASKS[::-1]:
        print(f"{name:>16}: {med[name] * 1e6:8.1f} us/item (runs: "
              f"{', '.join(f'{v * 1e6:.1f}' for v in item[name])})  "
              f"{wmed[name]:9.0f} wps (runs: {', '.join(f'{v:.0f}' for v in wps[name])})")
    print(f"ratio_item={med['guided_denoising'] / med['denoising']:.3f} "
          f"ratio_wps={wmed['guided_denoising'] / wmed['denoising']:.3f}")


if __name__ == "__main__":
    main()
