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
import json
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


@one_line_on_write_failure
def main(argv=None) -> int:
    configure_tool_output()
    args = parse_args(argv)
    from fairseq_maskplug.common.extras import import_spacy
    from fairseq_maskplug.tools.cli import check_spacy_lengths
    from fairseq_maskplug.scoring.alignment import spelled_split
    from fairseq_maskplug.scoring.pos_tags import load_tagger, pos_tracks
    from fairseq_maskplug.tools.sharding import ShardedTrack, file_identity, line_lengths, start_producer

    try:
        spacy = import_spacy("fairseq-maskplug-pos-tags")
        split_prefix, prefix, texts, ranges, _ = spelled_split(args.data, args.split, args.name, args.text, args.bpe,
                                                               args.gpt2_encoder_json)
        nlp = load_tagger(args.spacy_model)
        check_spacy_lengths(nlp, texts, args)
        shard = start_producer(args, args.data)
        options = {**file_identity(args.text, "text"), "spacy": spacy.__version__, "spacy_model": args.spacy_model,
                   "spacy_model_version": nlp.meta.get("version"), "bpe": args.bpe, "batch_size": args.batch_size}
        track = ShardedTrack(shard, options, args.shard_block_lines)
        written = track.already_written(prefix, split_prefix, len(texts), "uint8")
    except (ValueError, OSError, ImportError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    summary = {"track": prefix, "spacy_model": args.spacy_model}
    if written:
        print(f"{args.split}: shard {shard.shard_id} of {shard.num_shards} is already written: skipped")
    else:
        lines = track.lines(len(texts))  # whole blocks: spaCy's batches never cross them
        rows, counts = pos_tracks(nlp, texts[lines.start:lines.stop], ranges[lines.start:lines.stop], args.batch_size,
                                  args.workers, desc=f"pos {args.split}")
        summary["wrote"] = track.write(prefix, split_prefix, len(texts), rows, "uint8")
        summary["tokens_per_tag"] = dict(counts.most_common())
    summary["merges"] = track.finish(lambda split_prefix: line_lengths(split_prefix, None), args.data)
    if track.warnings:
        summary["warnings"] = track.warnings
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
