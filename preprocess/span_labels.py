"""Write the answer-span labels ``--task span_policy`` trains on (Ye, Li et al. 2021, "+Supervised").

Input: a binarized split of contexts (``--data``/``--split``, from fairseq-preprocess), the
raw text those tokens came from (``--text``, one context per line) and the answers
(``--answers``, one line per context: ``START END``, character offsets into the raw line,
end exclusive). Only the downstream task's **training** contexts belong here: the
question is not used. Each answer is mapped onto the exact binarized tokens
(sentencepiece, or GPT-2 BPE with ``--bpe gpt2 --gpt2-encoder-json``) and written as
``DATA/SPLIT.answer_span.bin/.idx/.json``: 1 on the answer's first token, 2 on its last
(3 when one token), 0 elsewhere; fingerprinted against the tokens, written atomically.
Every line is checked before anything is written; the first bad one stops the run naming
``FILE:LINE``.

Example::

    fairseq-maskplug-span-labels --data work/bart/data/policy --split train \\
        --text work/bart/data/text/policy.train.txt --answers work/bart/data/text/policy.train.answers
"""

import argparse
import json
import sys

from . import HelpFormatter, configure_tool_output, one_line_on_write_failure, split_name, track_name


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--data", required=True, help="fairseq-preprocess output directory (holds dict.txt)")
    parser.add_argument("--split", type=split_name, required=True, help="split to label, e.g. train")
    parser.add_argument("--text", required=True, help="the raw contexts of the split, one line per binarized line")
    parser.add_argument("--answers", required=True,
                        help="one line per context: START END, character offsets of the answer (end exclusive)")
    parser.add_argument("--name", type=track_name, default="answer_span",
                        help="track name (span_policy's --label-track)")
    parser.add_argument("--bpe", default="sentencepiece", choices=["sentencepiece", "gpt2"],
                        help="how the binarized symbols spell text")
    parser.add_argument("--gpt2-encoder-json", default=None, help="GPT-2 BPE encoder.json (with --bpe gpt2)")
    return parser.parse_args(argv)


@one_line_on_write_failure
def main(argv=None) -> int:
    configure_tool_output()
    args = parse_args(argv)
    from fairseq_maskplug.data import write_side_info
    from fairseq_maskplug.data.answer_labels import label_row
    from fairseq_maskplug.scoring.alignment import spelled_split
    from fairseq_maskplug.scoring.span_labels import answer_tokens, parse_answer

    try:
        split_prefix, prefix, texts, ranges, (answers,) = spelled_split(
            args.data, args.split, args.name, args.text, args.bpe, args.gpt2_encoder_json, also=[args.answers])
        spans = [parse_answer(line, f"{args.answers}:{number}") for number, line in enumerate(answers, start=1)]
        rows, lengths = [], []
        for number, (text, byte_ranges, (start, end)) in enumerate(zip(texts, ranges, spans), start=1):
            try:
                first, last = answer_tokens(text, byte_ranges, start, end)
            except ValueError as error:
                raise ValueError(f"{args.answers}:{number}: {error}") from None
            rows.append(label_row(len(byte_ranges), first, last))
            lengths.append(last - first + 1)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    write_side_info(prefix, rows, "uint8", tokens_prefix=split_prefix)
    print(json.dumps({"track": prefix, "contexts": len(rows),
                      "answer_tokens_mean": round(sum(lengths) / max(len(lengths), 1), 2),
                      "answer_tokens_max": max(lengths, default=0)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
