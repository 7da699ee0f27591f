"""PLT scoring speed: batched scorer vs the naive one-copy-per-forward loop, same model and sentences.

Default: a randomly initialised roberta of the quickstart's shape (4 layers, dim 128; ``--shape base``:
roberta_base, 12 layers, dim 768) on a synthetic Zipf corpus (scores are irrelevant to speed; both
scorers must agree); ``--checkpoint``/``--data`` score real data instead. The model runs on CUDA when
there is one (``--device``), in float32 as ``fairseq-maskplug-score-pll`` runs it. Prints both speeds
in sentences/s and scored tokens/s, the largest score difference, and last
``ratio=<batched / naive speed>`` (targets: >= 5 on CPU, >= 10 on CUDA).

    python benchmarks/bench_pll.py [--sentences 150] [--checkpoint CK --data DIR --split valid] [--smoke]
    python benchmarks/bench_pll.py --shape base --max-tokens 16384   # a GPU
"""

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from smoke import benchmark_parser, shrink  # noqa: E402
from task_timing import make_data  # noqa: E402


#: the randomly initialised models: the quickstart's shape, and roberta_base's
SHAPES = {"quickstart": ["--encoder-layers", "4", "--encoder-embed-dim", "128", "--encoder-ffn-embed-dim", "512",
                         "--encoder-attention-heads", "4"],
          "base": []}


def load_model(checkpoint, data, shape="quickstart"):
    import fairseq_maskplug.plugin  # noqa: F401  (registers the tasks with fairseq)
    from fairseq import checkpoint_utils, options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    if checkpoint:
        models, _, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], arg_overrides={"data": data})
        return models[0], task
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data), "--task", "guided_mlm", "--arch", "roberta_base", *SHAPES[shape],
        "--max-positions", "128", "--tokens-per-sample", "128"])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    return task.build_model(cfg.model), task


def main():
    parser = benchmark_parser(__doc__)
    parser.add_argument("--checkpoint")
    parser.add_argument("--data", type=Path)
    parser.add_argument("--split", default="train")
    parser.add_argument("--sentences", type=int, default=150)
    parser.add_argument("--max-tokens", type=int, default=2048, help="padded tokens per batched forward")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="quickstart",
                        help="the randomly initialised model's shape (without --checkpoint)")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when there is one)")
    args = shrink(parser.parse_args(), sentences=10)
    import torch
    from fairseq.data import data_utils
    from fairseq_maskplug.scoring.pll import PLTScorer, iterate_lines, word_starts_sentencepiece

    torch.set_num_threads(torch.get_num_threads())
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or make_data(Path(tmp), lines=args.sentences)
        model, task = load_model(args.checkpoint, str(data), args.shape)
        d = task.source_dictionary
        tokens = data_utils.load_indexed_dataset(str(Path(data) / args.split), d)
        lines = [l for l in iterate_lines(tokens, d.bos()) if len(l) <= 128][:args.sentences]
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    word_starts = word_starts_sentencepiece(d) if args.checkpoint else np.ones(len(d), bool)
    scorer = PLTScorer(model.to(device), task.mask_idx, d.pad(), word_starts)
    special = (d.bos(), d.eos(), d.pad())
    n_tokens = sum(len(l) - 2 for l in lines)
    scorer.score(lines[:2], special, max_tokens=args.max_tokens, progress=False)  # warm-up: kernels, allocator
    start = time.perf_counter()
    batched = scorer.score(lines, special, max_tokens=args.max_tokens, progress=False)
    t_batched = time.perf_counter() - start
    start = time.perf_counter()
    naive = scorer.score_naive(lines, special)
    t_naive = time.perf_counter() - start
    diff = max(float(np.abs(a - b).max()) for a, b in zip(naive, batched))
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"{len(lines)} sentences, {n_tokens} scored tokens, {args.checkpoint or args.shape + ' shape'}, {where}")
    print(f"naive:   {t_naive:7.2f} s  {len(lines) / t_naive:8.1f} sentences/s  {n_tokens / t_naive:9.0f} tokens/s")
    print(f"batched: {t_batched:7.2f} s  {len(lines) / t_batched:8.1f} sentences/s  "
          f"{n_tokens / t_batched:9.0f} tokens/s (max_tokens {args.max_tokens})")
    print(f"max |PLT batched - PLT naive| = {diff:.2e}")
    print(f"ratio={t_naive / t_batched:.2f}")


if __name__ == "__main__":
    main()
