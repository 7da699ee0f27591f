"""Half-precision scoring: ``--bf16``/``--fp16`` against fp32, same model, lines and batches.

Runs the real ``fairseq-maskplug-score-pll`` (L3Masking's pseudo-likelihoods) and
``fairseq-maskplug-annotate-importance`` (selective masking's tagger) once per number format on a
copy of the data, and prints for each format the scored tokens/s (the command's own timing of its
scoring loop, not of loading the model) and the largest difference of its scores from fp32's (PLT:
in log, |log p - log q|, since PLTs span orders of magnitude; tagger: probabilities). The last line is
``ratio_pll_<format>=<tokens/s over fp32's> ... ratio_tag_<format>=...`` for each half format.

Default: a synthetic Zipf corpus (``gpu_acceptance.make_data``) and models trained on it for
``--updates`` updates (``--shape base``: roberta_base; ``quickstart``: 4 layers, dim 128), a masked LM
and a tagger fine-tuned from it; ``--data`` with ``--pll-checkpoint`` and ``--tagger-checkpoint``
scores real data instead (the quickstart's: ``work/data/indomain``, ``work/general/checkpoint_last.pt``,
``work/selective/tagger/checkpoint_best.pt``). Formats: ``bf16,fp16`` on CUDA, ``bf16`` on CPU.

    python benchmarks/bench_precision.py --shape base --max-tokens 32768          # a GPU
    python benchmarks/bench_precision.py --data work/data/indomain --pll-checkpoint ... --tagger-checkpoint ...
"""

import re
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commands import run_checked  # noqa: E402
from gpu_acceptance import BIN, TINY, make_data  # noqa: E402
from smoke import benchmark_parser, shrink  # noqa: E402

SHAPES = {"tiny": TINY["roberta"], "base": ["--arch", "roberta_base"],
          "quickstart": ["--arch", "roberta_base", "--encoder-layers", "4", "--encoder-embed-dim", "128",
                         "--encoder-ffn-embed-dim", "512", "--encoder-attention-heads", "4"]}
THROUGHPUT = re.compile(r"\((\d+) tokens\) in [\d.]+ s \((\d+) tokens/s\)")


def train_models(root: Path, args) -> tuple:
    """A masked LM on ``root/mlm`` and a tagger fine-tuned from it on ``root/task/input0``'s importance."""
    import torch

    device = ["--fp16"] if torch.cuda.is_available() else ["--cpu"]
    common = [*SHAPES[args.shape], "--max-positions", str(args.tokens), "--tokens-per-sample", str(args.tokens),
              *device, "--optimizer", "adam", "--lr", "1e-4", "--batch-size", "16", "--max-update", str(args.updates),
              "--required-batch-size-multiple", "1", "--disable-validation", "--no-progress-bar",
              "--no-epoch-checkpoints", "--seed", "1"]
    run_checked([BIN / "fairseq-maskplug-train", root / "mlm", "--task", "guided_mlm", "--criterion", "masked_lm",
                 *common, "--save-dir", root / "mlm-ck"])
    mlm = root / "mlm-ck" / "checkpoint_last.pt"
    run_checked([BIN / "fairseq-maskplug-train", root / "task" / "input0", "--task", "token_importance",
                 "--criterion", "token_importance", "--label-track", "importance", "--finetune-from-model", mlm,
                 *common, "--save-dir", root / "tagger-ck"])
    return mlm, root / "tagger-ck" / "checkpoint_last.pt", root / "mlm"


def score(command: str, checkpoint: Path, data: Path, split: str, name: str, max_tokens: int, fmt: str) -> tuple:
    """``(tokens/s, scores)`` of one run of ``command`` writing track ``name`` in format ``fmt``."""
    extra = ["--word-starts", "token"] if command == "score-pll" else []
    result = run_checked([BIN / f"fairseq-maskplug-{command}", "--checkpoint", checkpoint, "--data", data,
                          "--splits", split, "--name", name, "--max-tokens", str(max_tokens), *extra,
                          *([f"--{fmt}"] if fmt != "fp32" else [])])
    found = THROUGHPUT.search(result.stdout)
    if not found:
        raise RuntimeError(f"{command} printed no throughput line:\n{result.stdout[-2000:]}")
    return int(found.group(2)), np.fromfile(data / f"{split}.{name}.bin", dtype=np.float64)


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--data", type=Path, help="binarized token data (masked-LM layout) to score")
    parser.add_argument("--split", default="train")
    parser.add_argument("--pll-checkpoint", type=Path, help="masked-LM checkpoint for score-pll (with --data)")
    parser.add_argument("--tagger-checkpoint", type=Path, help="token_importance checkpoint (with --data)")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="quickstart",
                        help="the synthetic run's model shape (without --data)")
    parser.add_argument("--lines", type=int, default=2000, help="synthetic lines")
    parser.add_argument("--tokens", type=int, default=128, help="synthetic line length and model positions")
    parser.add_argument("--updates", type=int, default=50, help="training updates of the synthetic run's models")
    parser.add_argument("--max-tokens", type=int, default=8192, help="padded tokens per forward, every format")
    parser.add_argument("--formats", default=None, help="half formats to compare with fp32 (default: bf16,fp16 "
                        "on CUDA, bf16 on CPU)")
    args = shrink(parser.parse_args(), shape="tiny", lines=40, tokens=32, updates=2, max_tokens=1024)
    if args.data is not None and not (args.pll_checkpoint and args.tagger_checkpoint):
        parser.error("--data needs --pll-checkpoint and --tagger-checkpoint")
    import torch

    cuda = torch.cuda.is_available()
    formats = (args.formats or ("bf16,fp16" if cuda else "bf16")).split(",")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.data is None:
            make_data(root, args.lines, args.tokens, vocab=8000)
            pll_checkpoint, tagger_checkpoint, source = train_models(root, args)
        else:
            pll_checkpoint, tagger_checkpoint, source = args.pll_checkpoint, args.tagger_checkpoint, args.data
        data = root / "scored"
        shutil.copytree(source, data, ignore=shutil.ignore_patterns("*.plt.*", "*.tagged*"))
        where = torch.cuda.get_device_name() if cuda else f"CPU, {torch.get_num_threads()} threads"
        print(f"{where}; {args.data or f'{args.lines} synthetic lines, {args.shape} shape'}; split {args.split}; "
              f"--max-tokens {args.max_tokens}")
        ratios = []
        for command, short, checkpoint in (("score-pll", "pll", pll_checkpoint),
                                           ("annotate-importance", "tag", tagger_checkpoint)):
            speed, reference = score(command, checkpoint, data, args.split, f"{short}fp32", args.max_tokens, "fp32")
            print(f"{command:20s} fp32: {speed:9d} tokens/s")
            for fmt in formats:
                half_speed, values = score(command, checkpoint, data, args.split, f"{short}{fmt}", args.max_tokens,
                                           fmt)
                scored = (reference > 0) & (reference < 1) & (values > 0)
                if short == "pll":
                    largest = np.abs(np.log(values[scored]) - np.log(reference[scored])).max()
                    difference = f"max |log PLT - log PLT fp32| {largest:.2e}"
                else:
                    flips = np.mean((values >= 0.5) != (reference >= 0.5))
                    difference = (f"max |P - P fp32| {np.abs(values - reference).max():.2e}; "
                                  f"{flips:.3%} of tokens change side of 0.5")
                print(f"{command:20s} {fmt}: {half_speed:9d} tokens/s ({half_speed / speed:.2f}x); {difference}")
                ratios.append(f"ratio_{short}_{fmt}={half_speed / speed:.2f}")
    print(" ".join(ratios))


if __name__ == "__main__":
    main()
