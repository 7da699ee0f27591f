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
import json
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


@one_line_on_write_failure
def main(argv=None) -> int:
    configure_tool_output()
    args = parse_args(argv)
    from fairseq_maskplug.common.extras import import_spacy
    from fairseq_maskplug.tools.cli import check_spacy_lengths
    from fairseq_maskplug.scoring.alignment import spelled_split
    from fairseq_maskplug.scoring.entities import load_ner, span_tracks
    from fairseq_maskplug.tools.sharding import ShardedTrack, file_identity, line_lengths, start_producer

    try:
        spacy = import_spacy("fairseq-maskplug-salient-spans")
        split_prefix, prefix, texts, ranges, _ = spelled_split(args.data, args.split, args.name, args.text, args.bpe,
                                                               args.gpt2_encoder_json)
        nlp = load_ner(args.spacy_model)
        check_spacy_lengths(nlp, texts, args)
        dropped = [label for label in args.drop_labels.split(",") if label]
        known = set(nlp.get_pipe("ner").labels)
        unknown = [label for label in dropped if label not in known]
        if unknown:
            raise ValueError(f"--drop-labels {','.join(unknown)}: not an entity type of {args.spacy_model} "
                             f"(its types: {', '.join(sorted(known))})")
        shard = start_producer(args, args.data)
    except (ValueError, OSError, ImportError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    options = {**file_identity(args.text, "text"), "spacy": spacy.__version__, "spacy_model": args.spacy_model,
               "spacy_model_version": nlp.meta.get("version"), "drop_labels": dropped, "bpe": args.bpe,
               "batch_size": args.batch_size}
    track = ShardedTrack(shard, options, args.shard_block_lines)
    summary = {"track": prefix, "spacy_model": args.spacy_model}
    try:
        written = track.already_written(prefix, split_prefix, len(texts), "int32")
    except ValueError as error:  # a part made with other options or from other tokens
        print(f"error: {error}", file=sys.stderr)
        return 2
    if written:
        print(f"{args.split}: shard {shard.shard_id} of {shard.num_shards} is already written: skipped")
    else:
        lines = track.lines(len(texts))  # whole blocks, starting on one: batches of a divisor never cross them
        rows, counts = span_tracks(nlp, texts[lines.start:lines.stop], ranges[lines.start:lines.stop], dropped,
                                   args.batch_size, args.workers, desc=f"ner {args.split}")
        summary["wrote"] = track.write(prefix, split_prefix, len(texts), rows, "int32")
        summary.update(counts.summary())
    summary["merges"] = track.finish(lambda split_prefix: line_lengths(split_prefix, None), args.data)
    if track.warnings:
        summary["warnings"] = track.warnings
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
