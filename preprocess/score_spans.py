"""Score a corpus with a learned span policy: the start/end tracks of ``--mask-policy learned_span``.

    fairseq-maskplug-score-spans --checkpoint policy/checkpoint_best.pt \\
        --data work/bart/data/news --splits train valid

The checkpoint is a ``span_policy`` (supervised) or ``meta_span_policy`` (meta-learned)
model; the corpus must use its dictionary. For each split writes atomically
``DATA/SPLIT.span_start`` and ``DATA/SPLIT.span_end`` (``.bin/.idx/.json``, one float
logit per token, ``</s>`` = 0, fingerprinted against the tokens), and a preview
``DATA/SPLIT.span_start.preview.txt`` of the first lines with the top-1 span (at most
``--max-length`` tokens, as the policy's default) in ``[...]``.

In shards (``--num-shards N --shard-id I``, or the ranks of a torchrun/srun launch) as every
producer: both tracks of a shard are one part each, merged by ``fairseq-maskplug-merge-shards DATA``
or by rank 0; the preview is shard 0's (docs/scale.md).
"""

import sys
from dataclasses import dataclass

import numpy as np

from fairseq_maskplug.common.option_ranges import option
from fairseq_maskplug.scoring.loading import POLICY_TASKS
from fairseq_maskplug.scoring.model_tracks import PreviewedScoringOptions, ReadsCheckpoint
from fairseq_maskplug.tools.producer import TokenProducer, Track


@dataclass
class SpanOptions(PreviewedScoringOptions):
    max_length: int = option(10, "longest span of the preview (--learned-max-length)", range="[1, inf)",
                             source="ours", recorded=False)


def start_end(options: SpanOptions, inputs):
    """Each line's start and end logits from the policy's span head."""
    from fairseq_maskplug.scoring.span_scorer import SpanScorer

    d = inputs.task.source_dictionary
    scorer = SpanScorer(inputs.model, inputs.task.cfg.span_head_name, d.bos(), d.eos(), d.pad())
    return lambda lines: scorer.start_end(lines, options.max_tokens)


def report(options: SpanOptions, inputs, done) -> str:
    """The split's line; shard 0 writes the preview of the top-1 spans of its first lines."""
    from fairseq_maskplug.masking.learned_span import choose_learned_spans
    from fairseq_maskplug.scoring.preview import render_marked, throughput, write_preview

    d, (starts, ends), wrote = inputs.dictionary, done.rows, done.wrote
    lengths, shown = [], []
    for k, (line, start, end) in enumerate(zip(done.lines, starts, ends)):
        maskable = line != d.eos()
        if not maskable.any():
            continue
        (i, j), = choose_learned_spans(start, end, maskable, options.max_length, 1, 0.0, None)
        lengths.append(j - i + 1)
        if k < options.preview_lines:
            marked = np.zeros(len(line), dtype=bool)
            marked[i:j + 1] = True
            shown.append(render_marked([d[t] for t in line[:-1]], marked[:-1]))
    if inputs.shard.shard_id == 0:  # the first lines of the split (with shards: of shard 0's range)
        preview = done.tracks.prefixes[0] + ".preview.txt"
        write_preview(preview, shown)
        wrote = wrote + [preview]
    words = sum(len(line) - 1 for line in done.lines)
    return (f"{done.tracks.split}: {throughput('scored', len(done.lines), words, done.seconds)}; top-1 spans hold "
            f"{np.mean(lengths or [0]):.2f} tokens on average; {inputs.precision}; wrote {', '.join(wrote)}")


PRODUCER = TokenProducer(
    "fairseq-maskplug-score-spans", __doc__, SpanOptions,
    [Track("span_start", "--learned-start-track", "--start-name"),
     Track("span_end", "--learned-end-track", "--end-name")],
    "float64", start_end, report=report,
    reads=ReadsCheckpoint("a span policy (a span_policy or meta_span_policy checkpoint)",
                          tasks=POLICY_TASKS))
main = PRODUCER.main


if __name__ == "__main__":
    sys.exit(main())
