"""A producer in one file: a track marking the long subwords of binarized splits (1 where a token's piece,
its word-start mark left out, has at least ``--min-length`` characters; 0 elsewhere and at special tokens),
the kind of track ``examples/flagged_policy`` masks from ("Writing a producer" on docs/own-policy.md).

It declares its options and one function of the tokens (:func:`long_subwords`); everything else comes from
:class:`fairseq_maskplug.tools.producer.TokenProducer`: the command's options (``--data``, ``--splits``,
``--name``, ``--num-shards``/``--shard-id``, ``--shard-block-lines`` and its own), every input and output checked
before any work, the shards (torchrun/srun ranks, or independent jobs and ``fairseq-maskplug-merge-shards``), the
tracks fingerprinted against the tokens and written atomically, one line for an error, a JSON summary.

    python examples/long_subwords.py --data DATA --name long --min-length 7
"""

import sys
from dataclasses import dataclass

import numpy as np

from fairseq_maskplug.common.option_ranges import option
from fairseq_maskplug.tools.producer import TokenProducer, Track


@dataclass
class LongSubwordOptions:
    min_length: int = option(7, "the shortest piece flagged, in characters", range="[1, inf)",
                             source="ours")


def long_entries(dictionary, min_length: int) -> np.ndarray:
    """1.0 for each dictionary entry of at least ``min_length`` characters, its sentencepiece word-start mark
    (``▁``) not counted; 0.0 for the others and for the special symbols."""
    if min_length < 1:
        raise ValueError(f"long_entries: min_length {min_length} < 1")
    flags = np.array([float(len(dictionary[i].lstrip("\u2581")) >= min_length) for i in range(len(dictionary))])
    flags[:dictionary.nspecial] = 0.0
    return flags


def long_subwords(options: LongSubwordOptions, inputs):
    """The values of a block of lines: each token's flag (``inputs.dictionary``: the data's); the summary says how
    many entries are flagged, of how many."""
    flags = long_entries(inputs.dictionary, options.min_length)
    inputs.summary.update(long_entries=int(flags.sum()), of=len(inputs.dictionary))
    return lambda lines: [flags[line] for line in lines]


PRODUCER = TokenProducer("examples/long_subwords.py", __doc__, LongSubwordOptions,
                         tracks=[Track("long", read_by="--flagged-track")], dtype="float64", values=long_subwords)
main = PRODUCER.main


if __name__ == "__main__":
    sys.exit(main())
