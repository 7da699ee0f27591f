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

import sys
from dataclasses import dataclass

from fairseq_maskplug.common.option_ranges import option
from fairseq_maskplug.scoring.entities import DEFAULT_SPACY_MODEL, DROPPED_LABELS
from fairseq_maskplug.scoring.spacy_tracks import SpacyTextOptions, add_counts, spacy_values
from fairseq_maskplug.tools.producer import TokenProducer, Track

COMMAND = "fairseq-maskplug-salient-spans"


@dataclass
class SalientOptions(SpacyTextOptions):
    spacy_model: str = option(DEFAULT_SPACY_MODEL, "installed spaCy pipeline (package name or path) whose NER finds "
                              "the spans")
    drop_labels: str = option(",".join(DROPPED_LABELS), "comma-separated entity types not kept (empty: keep all)")


def dropped_labels(options: SalientOptions) -> list:
    """The entity types of ``--drop-labels``."""
    return [label for label in options.drop_labels.split(",") if label]


def check_labels(nlp, options: SalientOptions) -> dict:
    """``--drop-labels`` are entity types of the model."""
    dropped = dropped_labels(options)
    known = set(nlp.get_pipe("ner").labels)
    unknown = [label for label in dropped if label not in known]
    if unknown:
        raise ValueError(f"--drop-labels {','.join(unknown)}: not an entity type of {options.spacy_model} "
                         f"(its types: {', '.join(sorted(known))})")
    return {"drop_labels": dropped}


def find_spans(nlp, texts, ranges, options: SalientOptions):
    from fairseq_maskplug.scoring.entities import span_tracks

    rows, counts = span_tracks(nlp, texts, ranges, dropped_labels(options), options.batch_size, options.workers,
                               desc=None)
    return rows, counts.summary  # counted as the rows are written


def load(model: str):
    from fairseq_maskplug.scoring.entities import load_ner

    return load_ner(model)


PRODUCER = TokenProducer(COMMAND, __doc__, SalientOptions, [Track("salient_spans", "--salient-track")], "int32",
                         spacy_values(COMMAND, load, check_labels, find_spans), finish=add_counts, splits=())
main = PRODUCER.main


if __name__ == "__main__":
    sys.exit(main())
