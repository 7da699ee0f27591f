"""Write the side-information tracks whose shards independent jobs wrote (``--num-shards N --shard-id I``).

    fairseq-maskplug-merge-shards DATA

finds every ``SPLIT.NAME.shardI-of-N`` part in ``DATA``, checks that the parts of a track are all
there, complete, made from the split's current token data with one set of options and tiling its
lines, writes ``SPLIT.NAME.bin/.idx/.json`` (the bytes a single process writes) and removes the
parts (and the counting passes' parts of ``fairseq-maskplug-pmi-units``, ``-informask`` and ``-difference``). Under ``torchrun``/``srun`` the
producers merge by themselves (rank 0, after a barrier).

    fairseq-maskplug-merge-shards OUT

with ``OUT`` the ``--out`` of ``fairseq-maskplug-retrieve`` run in query shards, or of
``fairseq-maskplug-select`` run in document shards: checks the parts in ``OUT.shards/``, writes ``OUT`` (the
output of one process) and removes them.
"""

import argparse
import glob
import os
import sys

from . import HelpFormatter, add_version, command_main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="fairseq-maskplug-merge-shards", description=__doc__,
                                     formatter_class=HelpFormatter)
    add_version(parser)
    parser.add_argument("data", help="the producer's --data: the directory its shards wrote their parts in (a "
                                     "sentence_prediction root: its input0/); or retrieve's or select's --out")
    return parser.parse_args(argv)


def merge(args) -> int:
    """Merge what ``args.data`` holds: select's or retrieve's parts, or the producers' track parts."""
    import numpy as np
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    from fairseq_maskplug.data.indexed_files import RECOPY, check_indexed_pair
    from fairseq_maskplug.data.layout import token_data_dir
    from fairseq_maskplug.data.side_info import check_recorded_files
    from fairseq_maskplug.data.track_shards import finish_merges, merge_parts, part_prefix, parts_in, split_of

    from fairseq_maskplug.common.atomic import owner
    from fairseq_maskplug.retrieval import select_command
    from fairseq_maskplug.retrieval.query_shards import parts_directory
    from fairseq_maskplug.retrieval.retrieve_command import merge_query_shards
    from fairseq_maskplug.tools.pass_parts import remove_parts_directory

    from . import difference, informask, pmi_units

    parts = parts_directory(args.data)
    if os.path.isdir(parts) and owner(parts) == select_command.COMMAND:  # select's document shards
        select_command.report(select_command.merge_select_shards(args.data))
        return 0
    if os.path.isdir(parts):  # retrieve's query shards
        merge_query_shards(args.data)
        return 0
    if not os.path.isdir(args.data):
        raise FileNotFoundError(f"{args.data} is not a directory")
    data = token_data_dir(args.data)
    finished = finish_merges(data)
    for prefix in finished:
        print(f"removed the parts left by the earlier merge of {prefix}.bin/.idx")
    found = parts_in(data)
    if not found and not finished:
        raise ValueError(f"{data} holds no shard parts (SPLIT.NAME.shardI-of-N.bin/.idx/.json): nothing to merge "
                         "(a merge removes the parts it merged)")
    for prefix, num_shards in found.items():
        first = next(part_prefix(prefix, num_shards, i) for i in range(num_shards)
                     if os.path.exists(part_prefix(prefix, num_shards, i) + ".json"))
        split_prefix = split_of(first)
        check_indexed_pair(split_prefix, RECOPY)
        check_recorded_files(first, f"remove {first}.* and rerun its shard")  # before it is opened
        dtype = np.dtype(MMapIndexedDataset.Index(first + ".idx").dtype).name
        tokens = MMapIndexedDataset(split_prefix)  # alive while its sizes (a view of its mmap) are read
        lines = merge_parts(prefix, split_prefix, tokens.sizes, num_shards, dtype)
        print(f"merged {num_shards} shards into {prefix}.bin/.idx ({lines} lines)")
    for counts in sorted(glob.glob(os.path.join(glob.escape(data), "*.counts.shards"))):
        # the counting passes' parts of pmi-units, informask and difference: their tracks are merged now
        for command in (pmi_units.COMMAND, informask.COMMAND, difference.COMMAND):
            if owner(counts) == command:
                remove_parts_directory(counts, command)
                print(f"removed the shards' counts {counts}")
    return 0


main = command_main(parse_args, merge)


if __name__ == "__main__":
    sys.exit(main())
