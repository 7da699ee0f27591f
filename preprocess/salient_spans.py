"""Write a salient-span track (named entities and dates) for a binarized split.

For each line of ``--text`` (the text whose tokenized form was binarized into ``--data``),
spaCy's NER finds the entities; they are mapped from characters onto the exact binarized
subword tokens (sentencepiece, or GPT-2 BPE with ``--bpe gpt2 --gpt2-encoder-json``) and
written as ``DATA/SPLIT.salient_spans.bin/.idx/.json``: one span id per token, 0 outside
spans, fingerprinted against the tokens and written atomically. Every line is first checked
to spell exactly what its tokens spell (after sentencepiece's NFKC and whitespace
normalisation); the first that does not stops the run, naming file and line, before NER.

Example (the recipe's data)::

    fairseq-maskplug-salient-spans --data work/bart/data/news --split train \\
        --text work/bart/data/text/news.train.txt

Prints a JSON summary: spans per line, the share of lines without a span, the entity types
kept and what was dropped (numeric types, spans across sentences, overlapping spans).

In shards (``--num-shards N --shard-id I``, or the ranks of a torchrun/srun launch) as every
producer: each shard checks every line's spelling, runs NER over its own lines and writes its part,
merged by ``fairseq-maskplug-merge-shards DATA`` or by rank 0; its summary counts its own lines.
spaCy's batches (``--batch-size``, which must divide ``--shard-block-lines``) then never cross a
block, so a line's batch mates do not depend on the shards (docs/scale.md).
"""

import argparse
import sys

from . import (HelpFormatter, add_spacy_text_options, check_spacy_batches, configure_tool_output,
               one_line_on_write_failure, split_name, track_name)


def parse_args(argv=None):
    from fairseq_maskplug.scoring.entities import DEFAULT_SPACY_MODEL, DROPPED_LABELS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--data", required=True, help="fairseq-preprocess output directory (holds dict.txt)")
    parser.add_argument("--split", type=split_name, required=True, help="split to annotate, e.g. train")
    parser.add_argument("--name", type=track_name, default="salient_spans",
                        help="track name (the salient_span policy's --salient-track)")
    parser.add_argument("--drop-labels", default=",".join(DROPPED_LABELS),
                        help="comma-separated entity types not kept (empty: keep all)")
    add_spacy_text_options(parser, "NER finds the spans", DEFAULT_SPACY_MODEL)
    args = parser.parse_args(argv)
    check_spacy_batches(parser, args)
    return args


def dropped_labels(args) -> list:
    """The entity types of ``--drop-labels``."""
    return [label for label in args.drop_labels.split(",") if label]


def check_labels(nlp, args) -> dict:
    """``--drop-labels`` are entity types of the model."""
    dropped = dropped_labels(args)
    known = set(nlp.get_pipe("ner").labels)
    unknown = [label for label in dropped if label not in known]
    if unknown:
        raise ValueError(f"--drop-labels {','.join(unknown)}: not an entity type of {args.spacy_model} "
                         f"(its types: {', '.join(sorted(known))})")
    return {"drop_labels": dropped}


def annotate(nlp, texts, ranges, args):
    from fairseq_maskplug.scoring.entities import span_tracks

    rows, counts = span_tracks(nlp, texts, ranges, dropped_labels(args), args.batch_size, args.workers, desc=f"ner {args.split}")
    return rows, counts.summary  # counted as the rows are written


@one_line_on_write_failure
def main(argv=None) -> int:
    configure_tool_output()
    args = parse_args(argv)
    from fairseq_maskplug.scoring.entities import load_ner
    from fairseq_maskplug.scoring.spacy_tracks import SpacyProducer, write_spacy_track

    return write_spacy_track(SpacyProducer("fairseq-maskplug-salient-spans", "int32", load_ner, check_labels,
                                           annotate), args)


if __name__ == "__main__":
    sys.exit(main())
