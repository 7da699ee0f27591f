"""guided_mlm (random policy) vs fairseq's masked_lm on the same binarized data, in one run.

1. Per-item ``__getitem__`` time of each task's training dataset (mask + 80/10/10 +
   target), every item of an epoch, repeats interleaved, a new epoch each repeat so
   no cache carries over; median over repeats.
2. Training words per second of ``fairseq-train --task guided_mlm`` vs ``--task
   masked_lm`` for the same tiny roberta, runs interleaved; median over logged
   intervals after the first, then median over runs.

Last line: ``ratio_item=<ours/fairseq seconds per item> ratio_wps=<ours/fairseq wps>``
(targets: ratio_item <= 1.2, ratio_wps >= 0.95).

    python benchmarks/bench_masking.py [--data DIR] [--repeats 5] [--updates 300] [--wps-runs 4] [--smoke]
"""

from task_timing import compare

SHAPE = ["--arch", "roberta_base", "--encoder-layers", "2", "--encoder-embed-dim", "64",
         "--encoder-ffn-embed-dim", "256", "--encoder-attention-heads", "2", "--max-positions", "128"]
DATA_ARGS = ["--tokens-per-sample", "128", "--sample-break-mode", "complete", "--mask-prob", "0.15"]
TASK_ARGS = {task: ["--task", task, "--criterion", "masked_lm", *SHAPE, *DATA_ARGS]
             for task in ("guided_mlm", "masked_lm")}

if __name__ == "__main__":
    compare("bench_masking", __doc__, "guided_mlm", "masked_lm", TASK_ARGS, minutes=5)
