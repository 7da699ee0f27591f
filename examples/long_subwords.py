"""A producer in one file (docs/own-policy.md, "Writing a producer", shows this file as it is): a track that is
1 where a token's piece, its word-start mark left out, has at least --min-length characters, 0 elsewhere and at
the special tokens; examples/flagged_policy masks from it. TokenProducer gives it the command's options
(--data, --splits, --name, the shard options and its own), checks before any work, shards and their merge,
fingerprinted tracks written atomically, one-line errors and a JSON summary.

    python examples/long_subwords.py --data DATA --name long --min-length 7
"""

import sys
from dataclasses import dataclass

import numpy as np

from fairseq_maskplug.common.option_ranges import option
from fairseq_maskplug.tools.producer import TokenProducer, Track


@dataclass
class LongSubwordOptions:
    min_length: int = option(7, "the shortest piece flagged, in characters", range="[1, inf)", source="ours")


def long_subwords(options: LongSubwordOptions, inputs):
    """The function of a block of lines: each token's flag, looked up by its id in ``inputs.dictionary`` (the
    data's); the JSON summary says how many entries are flagged, of how many."""
    dictionary = inputs.dictionary
    flags = np.array([float(i >= dictionary.nspecial and len(dictionary[i].lstrip("\u2581")) >= options.min_length)
                      for i in range(len(dictionary))])
    inputs.summary.update(long_entries=int(flags.sum()), of=len(dictionary))
    return lambda lines: [flags[line] for line in lines]  # one row per line, one value per token


PRODUCER = TokenProducer("examples/long_subwords.py", __doc__, LongSubwordOptions,
                         tracks=[Track("long", read_by="--flagged-track")], dtype="float64", values=long_subwords)
main = PRODUCER.main


if __name__ == "__main__":
    sys.exit(main())
