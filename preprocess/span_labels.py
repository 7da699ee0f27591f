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

Prints a JSON summary: the contexts, and the mean and longest answer in tokens. In shards (``--num-shards N
--shard-id I``, or the ranks of a torchrun/srun launch) as every producer (docs/scale.md).
"""

import sys
from dataclasses import dataclass

from fairseq_maskplug.common.option_ranges import option
from fairseq_maskplug.tools.producer import TokenProducer, Track

COMMAND = "fairseq-maskplug-span-labels"


@dataclass
class SpanLabelOptions:
    text: str = option(None, "the raw contexts of the split, one line per binarized line", required=True,
                       recorded=False)
    answers: str = option(None, "one line per context: START END, character offsets of the answer (end exclusive)",
                          required=True, recorded=False)
    bpe: str = option("sentencepiece", "how the binarized symbols spell text", choices=["sentencepiece", "gpt2"])
    gpt2_encoder_json: str = option(None, "GPT-2 BPE encoder.json (with --bpe gpt2)")


def answer_labels(options: SpanLabelOptions, inputs):
    """Every context's label row (:func:`~fairseq_maskplug.data.answer_labels.label_row`), every line of ``--text``
    and ``--answers`` checked before any is written."""
    from fairseq_maskplug.data.answer_labels import label_row
    from fairseq_maskplug.scoring.alignment import spelled_split
    from fairseq_maskplug.scoring.span_labels import answer_tokens, parse_answer
    from fairseq_maskplug.tools.sharding import file_identity

    if len(inputs.splits) != 1:
        raise ValueError(f"--text {options.text} is the text of one split: give one --split, not "
                         f"{' '.join(inputs.splits)}")
    _, _, texts, ranges, (answers,) = spelled_split(inputs.data, inputs.splits[0], inputs.names[0], options.text,
                                                    options.bpe, options.gpt2_encoder_json, also=[options.answers])
    rows, lengths = [], []
    for number, (text, byte_ranges, line) in enumerate(zip(texts, ranges, answers), start=1):
        start, end = parse_answer(line, f"{options.answers}:{number}")
        try:
            first, last = answer_tokens(text, byte_ranges, start, end)
        except ValueError as error:
            raise ValueError(f"{options.answers}:{number}: {error}") from None
        rows.append(label_row(len(byte_ranges), first, last))
        lengths.append(last - first + 1)
    inputs.recorded.update(**file_identity(options.text, "text"), **file_identity(options.answers, "answers"))
    inputs.summary.update(contexts=len(rows), answer_tokens_mean=round(sum(lengths) / max(len(lengths), 1), 2),
                          answer_tokens_max=max(lengths, default=0))
    return lambda lines: rows[lines.numbers.start:lines.numbers.stop]


PRODUCER = TokenProducer(COMMAND, __doc__, SpanLabelOptions, [Track("answer_span", "--label-track")],
                         "uint8", answer_labels, splits=())
main = PRODUCER.main


if __name__ == "__main__":
    sys.exit(main())
