"""A producer in one file: a track marking the long subwords of binarized splits (1 where a token's piece,
its word-start mark left out, has at least ``--min-length`` characters; 0 elsewhere and at special tokens),
the kind of track ``examples/flagged_policy`` masks from ("Writing a producer" on docs/own-policy.md).

It computes one value per vocabulary entry (:func:`long_entries`); everything else comes from
``preprocess/vocabulary_tracks.py``, the steps ``fairseq-maskplug-informask`` and ``-difference`` run on: the
options (``--data``, ``--splits``, ``--name``, ``--num-shards``/``--shard-id``, ``--shard-block-lines``), every
input and output checked before any work, the shards (torchrun/srun ranks, or independent jobs and
``fairseq-maskplug-merge-shards``), the tracks fingerprinted against the tokens and written atomically, one
line for an error, a JSON summary.

    python examples/long_subwords.py --data DATA --name long --min-length 7
"""

import json
import sys

import numpy as np

from fairseq_maskplug.common.option_ranges import number
from fairseq_maskplug.tools.cli import command_main
from fairseq_maskplug.preprocess.vocabulary_tracks import (add_output_options, data_dictionary, load_lookup_inputs,
                                                            lookup_parser, write_lookup_tracks)

COMMAND = "examples/long_subwords.py"


def long_entries(dictionary, min_length: int) -> np.ndarray:
    """1.0 for each dictionary entry of at least ``min_length`` characters, its sentencepiece word-start mark
    (``▁``) not counted; 0.0 for the others and for the special symbols."""
    if min_length < 1:
        raise ValueError(f"long_entries: min_length {min_length} < 1")
    flags = np.array([float(len(dictionary[i].lstrip("\u2581")) >= min_length) for i in range(len(dictionary))])
    flags[:dictionary.nspecial] = 0.0
    return flags


def write(args) -> int:
    dictionary = data_dictionary("--data", args.data)
    loaded, shard = load_lookup_inputs(args, dictionary, COMMAND)  # everything checked before any work
    flags = long_entries(dictionary, args.min_length)
    summary = {"long_entries": int(flags.sum()), "of": len(dictionary)}
    write_lookup_tracks(args, shard, loaded, dictionary, flags, {"min_length": args.min_length}, summary, COMMAND)
    print(json.dumps(summary))
    return 0


def parse_args(argv=None):
    parser = lookup_parser(__doc__, "fairseq-preprocess output directory (holds dict.txt)")
    parser.add_argument("--min-length", type=number("[1, inf)", int), default=7,
                        help="the shortest piece flagged, in characters (ours: the flagged policy's example)")
    add_output_options(parser, "long", "--flagged-track")
    return parser.parse_args(argv)


main = command_main(parse_args, write)


if __name__ == "__main__":
    sys.exit(main())
