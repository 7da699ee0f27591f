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

import argparse
import sys

import numpy as np

from fairseq_maskplug.common.option_ranges import number
from fairseq_maskplug.scoring.model_tracks import add_model_options

from . import HelpFormatter, add_splits, command_main, track_name



def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="span_policy or meta_span_policy checkpoint")
    parser.add_argument("--data", required=True, help="binarized corpus directory (dict.txt, SPLIT.bin/.idx)")
    add_splits(parser, ["train", "valid"], "score")
    parser.add_argument("--start-name", type=track_name, default="span_start",
                        help="track of start logits (--learned-start-track)")
    parser.add_argument("--end-name", type=track_name, default="span_end",
                        help="track of end logits (--learned-end-track)")
    parser.add_argument("--max-length", type=number("[1, inf)", int),
                        default=10, help="longest span of the preview (--learned-max-length)")
    add_model_options(parser)
    return parser.parse_args(argv)


def score(args) -> int:
    """The command's work: every input and output checked before any work, then the start and end tracks written."""
    from fairseq_maskplug.scoring.loading import load_scorer
    from fairseq_maskplug.masking.learned_span import choose_learned_spans
    from fairseq_maskplug.scoring.model_tracks import model_track, start_model_tracks, write_model_tracks
    from fairseq_maskplug.scoring.preview import render_marked, throughput, write_preview

    outputs, shard, precision, device = start_model_tracks(args, [("--start-name", args.start_name),
                                                                  ("--end-name", args.end_name)])
    scorer, d = load_scorer(args.checkpoint, args.data, args.trust_dictionary)
    track = model_track(args, shard, precision)
    def report(split, lines, rows, seconds, wrote):
        (starts, ends), prefixes = rows, outputs[split][1]
        lengths, shown = [], []
        for k, (line, start, end) in enumerate(zip(lines, starts, ends)):
            maskable = line != d.eos()
            if not maskable.any():
                continue
            (i, j), = choose_learned_spans(start, end, maskable, args.max_length, 1, 0.0, None)
            lengths.append(j - i + 1)
            if k < args.preview_lines:
                marked = np.zeros(len(line), dtype=bool)
                marked[i:j + 1] = True
                shown.append(render_marked([d[t] for t in line[:-1]], marked[:-1]))
        if shard.shard_id == 0:  # the first lines of the split (with shards: of shard 0's range)
            preview = prefixes[0] + ".preview.txt"
            write_preview(preview, shown)
            wrote = wrote + [preview]
        words = sum(len(line) - 1 for line in lines)
        return (f"{split}: {throughput('scored', len(lines), words, seconds)}; top-1 spans hold "
                f"{np.mean(lengths or [0]):.2f} tokens on average; {precision}; wrote {', '.join(wrote)}")

    write_model_tracks(track, outputs, d, lambda lines: scorer.start_end(lines, args.max_tokens), report, precision,
                       device, args.data)
    return 0


main = command_main(parse_args, score)


if __name__ == "__main__":
    sys.exit(main())
