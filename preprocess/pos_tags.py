"""Write a part-of-speech track (spaCy's universal POS tags) for a binarized split, for the ``ptw`` policy.

For each line of ``--text`` (the text whose tokenized form was binarized into ``--data``), spaCy's tagger
tags the words; each binarized subword token (sentencepiece, or GPT-2 BPE with ``--bpe gpt2
--gpt2-encoder-json``) takes the tag of the first word it overlaps (``X`` where it overlaps none), written as
``DATA/SPLIT.pos.bin/.idx/.json``: one index of ADJ, ADP, ..., X per token (uint8), fingerprinted against
the tokens and written atomically. Every line is first checked to spell exactly what its tokens spell; the
first that does not stops the run, naming file and line, before tagging.

Example::

    fairseq-maskplug-pos-tags --data work/data/general --split train --text work/text/general.train.txt

Prints a JSON summary: the tokens of each tag. In shards (``--num-shards N --shard-id I``, or the ranks of
a torchrun/srun launch) as every producer (docs/scale.md).
"""

import argparse
import sys

from . import (HelpFormatter, add_spacy_text_options, check_spacy_batches, configure_tool_output,
               one_line_on_write_failure, split_name, track_name)


def parse_args(argv=None):
    from fairseq_maskplug.scoring.entities import DEFAULT_SPACY_MODEL

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--data", required=True, help="fairseq-preprocess output directory (holds dict.txt)")
    parser.add_argument("--split", type=split_name, required=True, help="split to tag, e.g. train")
    parser.add_argument("--name", type=track_name, default="pos", help="track name (the ptw policy's --ptw-track)")
    add_spacy_text_options(parser, "tagger sets the tags", DEFAULT_SPACY_MODEL)
    args = parser.parse_args(argv)
    check_spacy_batches(parser, args)
    return args


def annotate(nlp, texts, ranges, args):
    from fairseq_maskplug.scoring.pos_tags import pos_tracks

    rows, counts = pos_tracks(nlp, texts, ranges, args.batch_size, args.workers, desc=f"pos {args.split}")
    return rows, lambda: {"tokens_per_tag": dict(counts.most_common())}  # counted as the rows are written


@one_line_on_write_failure
def main(argv=None) -> int:
    configure_tool_output()
    args = parse_args(argv)
    from fairseq_maskplug.scoring.pos_tags import load_tagger
    from fairseq_maskplug.scoring.spacy_tracks import SpacyProducer, write_spacy_track

    return write_spacy_track(SpacyProducer("fairseq-maskplug-pos-tags", "uint8", load_tagger, lambda nlp, args: {},
                                           annotate), args)


if __name__ == "__main__":
    sys.exit(main())
