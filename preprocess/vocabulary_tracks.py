"""What the producers of a per-token track share: the data's dictionary, a split loaded and checked, and one line
for an error."""

import os
import sys


def data_dictionary(flag: str, path: str):
    """The dictionary of the fairseq-preprocess output ``path`` (given as ``flag``), checked."""
    from fairseq_maskplug.data.dictionaries import read_dictionary

    if not os.path.isfile(os.path.join(path, "dict.txt")):
        raise ValueError(f"{flag} {path}: no dict.txt (give a fairseq-preprocess output directory)")
    return read_dictionary(os.path.join(path, "dict.txt"))


def load_split(data, split, dictionary):
    """``(prefix, tokens)`` of the binarized ``split`` of ``data``: its .bin/.idx pair and token ids checked."""
    from fairseq.data import data_utils
    from fairseq_maskplug.data.dictionaries import check_token_ids
    from fairseq_maskplug.data.indexed_files import RECOPY, check_indexed_pair

    prefix = os.path.join(data, split)
    check_indexed_pair(prefix, RECOPY)
    tokens = data_utils.load_indexed_dataset(prefix, dictionary)
    if tokens is None:
        raise ValueError(f"--data {data}: no split {split!r} ({prefix}.bin/.idx, as fairseq-preprocess writes)")
    check_token_ids(tokens, prefix, dictionary)
    return prefix, tokens


def run_with_one_line_errors(write, args, errors=(OSError, ValueError)) -> int:
    """``write(args)``, a producer's work; an error of ``errors`` (raised by its checks before any work, or by a
    shard part made otherwise) is one line on standard error (a KeyError's without its quotes) and exit
    status 2."""
    try:
        return write(args)
    except errors as error:
        print(f"error: {str(error).strip(chr(39)) if isinstance(error, KeyError) else error}", file=sys.stderr)
        return 2
