"""Cost of one meta-learned policy update (``--task meta_span_policy``) relative to one plain
update of the seq2seq model it masks for (``--task guided_denoising``, +SSM-like masked target),
in one run, in process, on the same sentences.

Both sides: bart_tiny (2+2 layers, dim 128) as the seq2seq model; 8 sentences per batch.
The meta side adds the policy (roberta_tiny) forward, 8 candidate examples per sentence
(64 seq2seq examples), the virtual step and a downstream batch of 16 pairs, with
``--meta-gradient exact`` (second order) and ``finite_difference`` (DARTS). Timed: the
task's ``train_step`` plus the optimizer step, after 3 warm-up updates, interleaved
repeats, median. Takes about 2 minutes on 2 CPU cores. The last line is
``ratio_exact=<meta exact / plain> ratio_fd=<meta finite difference / plain>``.

    python benchmarks/bench_meta_step.py [--lines 3000] [--repeats 5] [--smoke]
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commands import run_checked  # noqa: E402
from smoke import benchmark_parser, shrink  # noqa: E402
from task_timing import BIN, REPO, make_data  # noqa: E402

from fairseq_maskplug.evaluation.probe import word_cloze  # noqa: E402

BATCH = 8
CPU = ["--cpu", "--num-workers", "0", "--required-batch-size-multiple", "1", "--distributed-world-size", "1",
       "--optimizer", "adam", "--lr", "1e-4", "--batch-size", str(BATCH), "--dropout", "0.1"]


def cloze_data(root: Path, corpus: Path) -> Path:
    """q -> a pairs from the corpus text (one word replaced by <mask>), on the corpus dictionary plus <mask>."""
    (root / "dict.probe.txt").write_text((corpus / "dict.txt").read_text() + "<mask> 0\n")
    rng = np.random.default_rng(0)
    lines = (root / "train.txt").read_text().splitlines()[:2000]
    cut = len(lines) * 9 // 10
    for split, part in (("train", lines[:cut]), ("valid", lines[cut:])):
        questions, answers = word_cloze(part, rng)
        (root / f"cloze.{split}.q").write_text("\n".join(questions) + "\n")
        (root / f"cloze.{split}.a").write_text("\n".join(answers) + "\n")
    run_checked([BIN / "fairseq-preprocess", "--source-lang", "q", "--target-lang", "a", "--trainpref",
                 root / "cloze.train", "--validpref", root / "cloze.valid", "--srcdict", root / "dict.probe.txt",
                 "--tgtdict", root / "dict.probe.txt", "--destdir", root / "cloze", "--workers", "2"])
    return root / "cloze"


def build(argv, n_batches: int):
    import fairseq_maskplug.plugin  # noqa: F401
    from fairseq import optim, options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(),
                                                                     [str(a) for a in argv]))
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    optimizer = optim.build_optimizer(cfg.optimizer, [p for p in model.parameters() if p.requires_grad])
    dataset = task.dataset("train")
    n_batches = min(n_batches, len(dataset) // BATCH)
    batches = [dataset.collater([dataset[i] for i in range(k * BATCH, (k + 1) * BATCH)]) for k in range(n_batches)]
    return task, model, criterion, optimizer, batches


def seconds_per_update(side, updates: int, start: int) -> float:
    task, model, criterion, optimizer, batches = side
    model.train()
    began = time.perf_counter()
    for k in range(start, start + updates):
        optimizer.zero_grad()
        task.train_step(batches[k % len(batches)], model, criterion, optimizer, update_num=k)
        optimizer.step()
    return (time.perf_counter() - began) / updates


def main() -> int:
    parser = benchmark_parser(__doc__, repeats="interleaved timed repeats per side")
    parser.add_argument("--lines", type=int, default=3000, help="lines of the synthetic corpus")
    parser.add_argument("--updates", type=int, default=4, help="timed updates per repeat")
    parser.add_argument("--batches", type=int, default=20, help="distinct batches cycled through")
    args = shrink(parser.parse_args(), lines=300, repeats=1, updates=1, batches=3)
    print(__doc__.split("\n\n")[0], flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = make_data(root, lines=args.lines)
        run_checked([BIN / "fairseq-train", corpus, "--user-dir", REPO / "fairseq_maskplug", "--task",
                     "guided_denoising", "--criterion", "cross_entropy", "--arch", "bart_tiny", "--max-update", "1",
                     "--tokens-per-sample", "64", "--save-dir", root / "bart", "--no-epoch-checkpoints",
                     "--disable-validation", *CPU])
        cloze = cloze_data(root, corpus)
        common = ["--tokens-per-sample", "64", *CPU]
        plain = build([corpus, "--task", "guided_denoising", "--criterion", "cross_entropy", "--arch", "bart_tiny",
                       "--mask-policy", "span", "--target-format", "masked", *common], args.batches)
        meta = {mode: build([corpus, "--task", "meta_span_policy", "--criterion", "meta_span_policy", "--arch",
                             "roberta_tiny", "--downstream-data", cloze, "--seq2seq-checkpoint",
                             root / "bart" / "checkpoint_last.pt", "--meta-gradient", mode, *common], args.batches)
                for mode in ("exact", "finite_difference")}
        sides = {"plain": plain, **meta}
        for side in sides.values():
            seconds_per_update(side, 3, 0)  # warm-up
        times = {name: [] for name in sides}
        for repeat in range(args.repeats):
            for name, side in sides.items():
                times[name].append(seconds_per_update(side, args.updates, 3 + args.updates * repeat))
        median = {name: statistics.median(t) for name, t in times.items()}
        for name, t in median.items():
            print(f"{name}: {1000 * t:.1f} ms per update (runs: {', '.join(f'{1000 * x:.0f}' for x in times[name])})")
        print(f"ratio_exact={median['exact'] / median['plain']:.2f} "
              f"ratio_fd={median['finite_difference'] / median['plain']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
