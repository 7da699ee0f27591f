"""In-domain Mask (Gu et al. 2020, §2.3): write the tagger's importance scores for a corpus.

    python -m preprocess.annotate_importance --checkpoint tagger/checkpoint_best.pt \\
        --data data-bin/indomain --splits train valid --name importance

For each split writes atomically ``DATA/SPLIT.NAME.bin/.idx/.json`` (one float per token:
P(important); ``</s>`` = 0), the track ``--task selective_mlm`` masks from, and a
preview ``DATA/SPLIT.NAME.preview.txt`` of the first lines with the tokens the
selective policy would select (score >= 0.5) in ``[...]``. The corpus must use the
tagger's dictionary.

In shards (``--num-shards N --shard-id I`` and ``fairseq-maskplug-merge-shards DATA``, or the ranks
of ``torchrun``/``srun``) as ``score-pll``: batches within blocks of ``--shard-block-lines`` lines,
so the merged track is the one a single process writes; the preview is shard 0's.
"""

import argparse
import sys

import numpy as np

from fairseq_maskplug.scoring.model_tracks import add_model_options
from fairseq_maskplug.tools.sharding import warn_if_all_or_none

from . import HelpFormatter, add_splits, command_main, track_name


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="token_importance checkpoint (the tagger)")
    parser.add_argument("--data", required=True, help="binarized corpus directory (dict.txt, SPLIT.bin/.idx; "
                        "a sentence_prediction root: its input0/)")
    add_splits(parser, ["train", "valid"], "annotate")
    parser.add_argument("--name", type=track_name, default="importance", help="side-information track name")
    parser.add_argument("--gpt2-bpe", default=None,
                        help="GPT-2 BPE directory (encoder.json) of GPT-2 BPE data: the preview shows text, not labels")
    add_model_options(parser)
    return parser.parse_args(argv)


def annotate(args) -> int:
    """The command's work: every input and output checked before any work, then the tagger's tracks written."""
    from fairseq_maskplug.scoring.loading import load_tagger
    from fairseq_maskplug.scoring.model_tracks import model_track, start_model_tracks, write_model_tracks
    from fairseq_maskplug.data.layout import token_data_dir
    from fairseq_maskplug.scoring.preview import preview_symbols, render_marked, throughput, write_preview
    from fairseq_maskplug.scoring.tagger import TokenTagger

    args.data = token_data_dir(args.data)
    outputs, shard, precision, device = start_model_tracks(args, [("--name", args.name)])
    model, head, d = load_tagger(args.checkpoint, args.data, args.trust_dictionary)
    tagger = TokenTagger(model, head, d.bos(), d.eos(), d.pad())
    symbols = preview_symbols(d, args.gpt2_bpe)
    track = model_track(args, shard, precision)
    def report(split, lines, rows, seconds, wrote):
        scores, (prefix,) = rows[0], outputs[split][1]
        if shard.shard_id == 0:  # the first lines of the split (with shards: of shard 0's range)
            preview = prefix + ".preview.txt"
            write_preview(preview, (render_marked([symbols[t] for t in line[:-1]], score[:-1] >= 0.5)
                                    for line, score in zip(lines[:args.preview_lines], scores)))
            wrote = [f"{wrote[0]} and {preview}"]
        words = np.concatenate([s[:-1] for s in scores]) if scores else np.zeros(0)
        share = f"{np.mean(words >= 0.5):.1%}" if words.size else "-"
        if words.size:
            warn_if_all_or_none(prefix, float(np.mean(words >= 0.5)), "scored >= 0.5")
        return (f"{split}: {throughput('tagged', len(lines), words.size, seconds)}; {share} of the tokens scored "
                f">= 0.5; {precision}; wrote {wrote[0]}")

    write_model_tracks(track, outputs, d, lambda lines: [tagger.score(lines, args.max_tokens)], report, precision,
                       device, args.data)
    return 0


main = command_main(parse_args, annotate)


if __name__ == "__main__":
    sys.exit(main())
