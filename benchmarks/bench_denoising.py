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

    python benchmarks/bench_denoising.py [--data DIR] [--repeats 5] [--updates 300] [--wps-runs 4] [--smoke]
"""

from task_timing import compare

SHAPE = ["--arch", "bart_tiny", "--encoder-embed-dim", "64", "--decoder-embed-dim", "64",
         "--encoder-ffn-embed-dim", "256", "--decoder-ffn-embed-dim", "256", "--encoder-attention-heads", "2",
         "--decoder-attention-heads", "2", "--max-source-positions", "128", "--max-target-positions", "128"]
COMMON = ["--criterion", "cross_entropy", *SHAPE, "--tokens-per-sample", "128", "--sample-break-mode", "complete"]
TASK_ARGS = {
    "guided_denoising": ["--task", "guided_denoising", *COMMON, "--mask-policy", "random", "--mask-prob", "0.15",
                         "--target-format", "full"],
    "denoising": ["--task", "denoising", *COMMON, "--mask", "0.15", "--mask-length", "subword", "--replace-length", "1",
                  "--mask-random", "0", "--permute-sentences", "0", "--rotate", "0", "--insert", "0",
                  "--poisson-lambda", "3.5"],
}

if __name__ == "__main__":
    compare("bench_denoising", __doc__, "guided_denoising", "denoising", TASK_ARGS, minutes=20)
