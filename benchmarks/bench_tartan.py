"""Cost of META-TARTAN weighting: joint fine-tuning updates with ``--loss-weighting tartan``
vs fixed weights, same model, batches and machine, in one run.

Default: a randomly initialised roberta of the quickstart's shape (4 layers, dim 128) on a
synthetic labelled corpus (speed does not depend on the weights); ``--data`` takes a
sentence_prediction directory (``input0/``, ``label/``, e.g. the demo's MR data) instead.
Each mode runs ``--updates`` timed updates (after 2 untimed), alternating twice; the best
round counts. Prints both speeds and last ``ratio=<tartan / fixed updates per second>``.

    python benchmarks/bench_tartan.py [--updates 20] [--batch-size 32] [--data DIR] [--smoke]
"""

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commands import run_checked  # noqa: E402
from smoke import benchmark_parser, shrink  # noqa: E402

BIN = Path(sys.executable).parent
SHAPE = ["--arch", "roberta_base", "--encoder-layers", "4", "--encoder-embed-dim", "128",
         "--encoder-ffn-embed-dim", "512", "--encoder-attention-heads", "4", "--max-positions", "128"]


def make_task_data(root: Path, train: int = 2000, valid: int = 400) -> Path:
    """Zipf sentences of 5..40 words labelled by whether they contain ``w1``, binarized."""
    rng = np.random.default_rng(0)
    for split, n in (("train", train), ("valid", valid)):
        lines = [" ".join(f"w{w % 5000}" for w in rng.zipf(1.3, size=k)) for k in rng.integers(5, 40, n)]
        (root / f"{split}.input0").write_text("\n".join(lines) + "\n")
        (root / f"{split}.label").write_text("\n".join("yes" if "w1" in l.split() else "no" for l in lines) + "\n")
    for sub in ("input0", "label"):
        run_checked([BIN / "fairseq-preprocess", "--only-source", "--trainpref", root / f"train.{sub}",
                     "--validpref", root / f"valid.{sub}", "--destdir", root / "task" / sub, "--workers", "2"])
    return root / "task"


def build(data: Path, batch_size: int, weighting: list):
    from fairseq_maskplug.commands.train_cli import build_in_process

    task, model, criterion, optimizer, _ = build_in_process([
        str(data), "--task", "joint_mlm_classification", "--criterion", "joint_mlm_classification",
        "--num-classes", "2", "--tokens-per-sample", "128", "--cpu", "--optimizer", "adam", "--lr", "1e-4",
        "--batch-size", str(batch_size), *SHAPE, *weighting])
    return task, model, criterion, optimizer


def updates_per_second(data: Path, batch_size: int, weighting: list, updates: int) -> float:
    task, model, criterion, optimizer = build(data, batch_size, weighting)
    dataset = task.dataset("train")
    batches = [dataset.collater([dataset[j] for j in range(i * batch_size, (i + 1) * batch_size)])
               for i in range(updates + 2)]
    for n, sample in enumerate(batches):
        if n == 2:
            start = time.perf_counter()
        optimizer.zero_grad()
        task.train_step(sample, model, criterion, optimizer, update_num=n)
        task.optimizer_step(optimizer, model, update_num=n)
    return updates / (time.perf_counter() - start)


def main():
    parser = benchmark_parser(__doc__)
    parser.add_argument("--data", type=Path, help="sentence_prediction layout (input0/, label/)")
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sentences", type=int, default=2000, help="training sentences of the synthetic task")
    args = shrink(parser.parse_args(), updates=2, batch_size=8, sentences=64)
    modes = {"fixed": ["--loss-weighting", "fixed", "--mlm-weight", "1"], "tartan": ["--loss-weighting", "tartan"]}
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or make_task_data(Path(tmp), train=args.sentences)
        best = {name: 0.0 for name in modes}
        for _ in range(2):
            for name, weighting in modes.items():
                best[name] = max(best[name], updates_per_second(data, args.batch_size, weighting, args.updates))
    for name, speed in best.items():
        print(f"{name}: {speed:.2f} updates/s ({args.batch_size} sentences per update)")
    print(f"ratio={best['tartan'] / best['fixed']:.3f}")


if __name__ == "__main__":
    main()
