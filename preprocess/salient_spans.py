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
"""

import argparse
import json
import sys

from fairseq_maskplug.common.option_ranges import number

from . import HelpFormatter, configure_tool_output, one_line_on_write_failure, split_name, track_name


def parse_args(argv=None):
    from fairseq_maskplug.scoring.entities import DEFAULT_SPACY_MODEL, DROPPED_LABELS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--data", required=True, help="fairseq-preprocess output directory (holds dict.txt)")
    parser.add_argument("--split", type=split_name, required=True, help="split to annotate, e.g. train")
    parser.add_argument("--text", required=True, help="the raw text of the split, one line per binarized line")
    parser.add_argument("--name", type=track_name, default="salient_spans",
                        help="track name (the salient_span policy's --salient-track)")
    parser.add_argument("--bpe", default="sentencepiece", choices=["sentencepiece", "gpt2"],
                        help="how the binarized symbols spell text")
    parser.add_argument("--gpt2-encoder-json", default=None, help="GPT-2 BPE encoder.json (with --bpe gpt2)")
    parser.add_argument("--spacy-model", default=DEFAULT_SPACY_MODEL,
                        help="installed spaCy pipeline (package name or path) whose NER finds the spans")
    parser.add_argument("--drop-labels", default=",".join(DROPPED_LABELS),
                        help="comma-separated entity types not kept (empty: keep all)")
    parser.add_argument("--workers", type=number("[1, inf)", int),
                        default=1, help="spaCy worker processes (nlp.pipe n_process)")
    parser.add_argument("--batch-size", type=number("[1, inf)", int), default=256, help="lines per spaCy batch")
    return parser.parse_args(argv)


@one_line_on_write_failure
def main(argv=None) -> int:
    configure_tool_output()
    args = parse_args(argv)
    from fairseq_maskplug.data import write_side_info
    from fairseq_maskplug.scoring.alignment import spelled_split
    from fairseq_maskplug.scoring.entities import load_ner, span_tracks

    try:
        split_prefix, prefix, texts, ranges, _ = spelled_split(args.data, args.split, args.name, args.text, args.bpe,
                                                               args.gpt2_encoder_json)
        nlp = load_ner(args.spacy_model)
        dropped = [label for label in args.drop_labels.split(",") if label]
        known = set(nlp.get_pipe("ner").labels)
        unknown = [label for label in dropped if label not in known]
        if unknown:
            raise ValueError(f"--drop-labels {','.join(unknown)}: not an entity type of {args.spacy_model} "
                             f"(its types: {', '.join(sorted(known))})")
    except (ValueError, OSError, ImportError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    rows, counts = span_tracks(nlp, texts, ranges, dropped, args.batch_size, args.workers, desc=f"ner {args.split}")
    write_side_info(prefix, rows, "int32", tokens_prefix=split_prefix)
    summary = {"track": prefix, "spacy_model": args.spacy_model, **counts.summary()}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
