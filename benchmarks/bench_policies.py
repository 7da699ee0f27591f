"""The peers' policies against ``random`` on the same blocks, in one run: per-item ``__getitem__`` time of
``guided_mlm``'s training dataset with ``--mask-unit word`` (random whole words), ``--mask-policy pmi``
(PMI-Masking units, from ``fairseq-maskplug-pmi-units``), ``--mask-prob-schedule linear`` (items
drawn at the highest rate, then each batch of 32 thinned in ``train_step``: its thinning time per item
is added), and the policies that learn from training or from the domain: ``ptw``, ``informask`` (its rates
from ``fairseq-maskplug-informask``), ``self_evolution`` and ``difference`` (their tracks filled with
stand-in values: a POS tag per token id, uniform likelihoods and scores; an item's cost does not depend on
them); every item of an epoch, repeats interleaved, a new epoch each repeat; median over repeats.

Data: ``--data DIR`` (a fairseq-preprocess directory of sentencepiece pieces, e.g. the demo's
``work/data/indomain``), or a synthetic corpus of words of 1-3 pieces (Zipf over 3,000 words).

Last line: ``ratio_word=<word/random seconds per item> ratio_pmi=<pmi/random> ratio_schedule=<scheduled/random>
ratio_ptw=... ratio_informask=... ratio_self_evolution=... ratio_difference=...``.

    python benchmarks/bench_policies.py [--data DIR] [--repeats 5] [--lines 6000] [--smoke]
"""

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from commands import run_checked
from smoke import benchmark_parser, shrink
from task_timing import BIN, REPO, build_dataset, seconds_per_item

COMMON = ["--task", "guided_mlm", "--criterion", "masked_lm", "--arch", "roberta_base", "--tokens-per-sample", "128",
          "--sample-break-mode", "complete", "--shorten-method", "truncate"]
ROWS = {
    "random": ["--mask-policy", "random"],
    "word": ["--mask-policy", "random", "--mask-unit", "word"],
    "pmi": ["--mask-policy", "pmi"],
    "schedule": ["--mask-policy", "random", "--mask-prob-schedule", "linear", "--mask-prob-schedule-updates", "100"],
    "ptw": ["--mask-policy", "ptw"],
    "informask": ["--mask-policy", "informask"],
    "self_evolution": ["--mask-policy", "self_evolution", "--se-threshold", "0.2"],
    "difference": ["--mask-policy", "difference"],
}


def write_stand_in_tracks(data: Path) -> None:
    """``pos`` (token id modulo 17), ``token_likelihood`` and ``difference_score`` (uniform) for the train split."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    from fairseq_maskplug.data import write_side_info

    rng = np.random.default_rng(0)
    tokens = MMapIndexedDataset(str(data / "train"))
    lines = [tokens[i].numpy() for i in range(len(tokens))]
    prefix = str(data / "train")
    write_side_info(f"{prefix}.pos", [(t % 17).astype(np.uint8) for t in lines], "uint8", tokens_prefix=prefix)
    write_side_info(f"{prefix}.token_likelihood", [rng.uniform(0.5, 1.0, len(t)) for t in lines], "float64",
                    tokens_prefix=prefix)
    write_side_info(f"{prefix}.difference_score", [rng.random(len(t)) for t in lines], "float64",
                    tokens_prefix=prefix)


def make_pieces(root: Path, lines: int) -> Path:
    """Lines of 5-39 words, each word 1-3 sentencepiece-style pieces (``▁`` marks a word start)."""
    rng = np.random.default_rng(0)
    vocab = [[f"\u2581p{w}"] + [f"c{w}_{k}" for k in range(int(rng.integers(0, 3)))] for w in range(3000)]
    text = root / "train.txt"
    with open(text, "w", encoding="utf-8") as f:
        for n in rng.integers(5, 40, lines):
            f.write(" ".join(p for w in rng.zipf(1.3, size=n) % 3000 for p in vocab[w]) + "\n")
    run_checked([BIN / "fairseq-preprocess", "--only-source", "--trainpref", text, "--destdir", root / "bin",
                 "--workers", "2"])
    return root / "bin"


def thinning_seconds_per_item(dataset, task, epoch: int, batch: int = 32) -> float:
    """``prepare_batch``'s thinning of the schedule, per item, over an epoch's batches of ``batch`` items."""
    dataset.set_epoch(epoch)
    spent, items = 0.0, 0
    for start in range(0, len(dataset), batch):
        sample = dataset.collater([dataset[i] for i in range(start, min(start + batch, len(dataset)))])
        began = time.perf_counter()
        task.prepare_batch(sample, start // batch)
        spent += time.perf_counter() - began
        items += len(sample["id"])
    return spent / items


def main() -> None:
    parser = benchmark_parser(__doc__, repeats="passes over the data per row")
    parser.add_argument("--data", type=Path, help="binarized sentencepiece data with dict.txt and train")
    parser.add_argument("--lines", type=int, default=6000, help="lines of the synthetic corpus")
    args = shrink(parser.parse_args(), repeats=1, lines=300)
    print(f"bench_policies: {args.repeats} item-timing repeats of {len(ROWS)} rows", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "bin"
        if args.data:
            shutil.copytree(args.data, data)
        else:
            make_pieces(Path(tmp), args.lines)
        run_checked([sys.executable, "-m", "preprocess.pmi_units", "--data", data, "--splits", "train",
                     "--min-count", "2" if args.smoke else "5"], cwd=REPO)
        run_checked([sys.executable, "-m", "preprocess.informask", "--data", data, "--splits", "train"], cwd=REPO)
        write_stand_in_tracks(data)
        datasets = {name: build_dataset(data, [*COMMON, *flags]) for name, flags in ROWS.items()}
        schedule_task = build_task(data, [*COMMON, *ROWS["schedule"]])
        item = {name: [] for name in ROWS}
        for r in range(args.repeats):
            for name in ROWS:
                item[name].append(seconds_per_item(datasets[name], epoch=r + 2))
            item["schedule"][-1] += thinning_seconds_per_item(datasets["schedule"], schedule_task, epoch=r + 2)
    med = {k: statistics.median(v) for k, v in item.items()}
    print(f"blocks: {len(datasets['random'])}")
    for name in ROWS:
        print(f"{name:>14}: {med[name] * 1e6:8.1f} us/item (runs: {', '.join(f'{v * 1e6:.1f}' for v in item[name])})")
    print(" ".join(f"ratio_{name}={med[name] / med['random']:.3f}" for name in ROWS if name != "random"))


def build_task(data: Path, task_args):
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), [str(data), *task_args])
    return tasks.setup_task(convert_namespace_to_omegaconf(args).task)


if __name__ == "__main__":
    main()
