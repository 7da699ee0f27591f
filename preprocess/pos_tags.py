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

import sys
from dataclasses import dataclass

from fairseq_maskplug.common.option_ranges import option
from fairseq_maskplug.scoring.entities import DEFAULT_SPACY_MODEL
from fairseq_maskplug.scoring.spacy_tracks import SpacyTextOptions, add_counts, spacy_values
from fairseq_maskplug.tools.producer import TokenProducer, Track

COMMAND = "fairseq-maskplug-pos-tags"


@dataclass
class PosOptions(SpacyTextOptions):
    spacy_model: str = option(DEFAULT_SPACY_MODEL, "installed spaCy pipeline (package name or path) whose tagger "
                              "sets the tags")


def tag(nlp, texts, ranges, options: PosOptions):
    from fairseq_maskplug.scoring.pos_tags import pos_tracks

    rows, counts = pos_tracks(nlp, texts, ranges, options.batch_size, options.workers, desc=None)
    return rows, lambda: {"tokens_per_tag": dict(counts.most_common())}  # counted as the rows are written


def load(model: str):
    from fairseq_maskplug.scoring.pos_tags import load_tagger

    return load_tagger(model)


PRODUCER = TokenProducer(COMMAND, __doc__, PosOptions, [Track("pos", "--ptw-track")], "uint8",
                         spacy_values(COMMAND, load, lambda nlp, options: {}, tag), finish=add_counts, splits=())
main = PRODUCER.main


if __name__ == "__main__":
    sys.exit(main())
