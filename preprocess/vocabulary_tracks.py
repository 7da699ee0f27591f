"""What the producers of a per-token track share: the data's dictionary, and, for those that compute one value per
vocabulary entry (``informask``, ``difference``), the splits loaded with their outputs checked before any work and
the tracks written by looking every token up."""

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


def load_checked_splits(data: str, splits, also, dictionary, name: str, locks) -> dict:
    """``{split: (prefix, tokens)}`` of ``splits`` and the splits in ``also``, each checked, and the track ``name``
    of every one of ``splits`` checked writable and locked (one writer: :mod:`fairseq_maskplug.common.locks`) until
    ``locks``, a :class:`contextlib.ExitStack`, closes: all before any work."""
    import sys

    from fairseq_maskplug.common.atomic import check_writable
    from fairseq_maskplug.common.locks import OutputLock, say_took_over

    loaded = {split: load_split(data, split, dictionary) for split in {*splits, *also}}
    for split in splits:
        check_writable(f"{loaded[split][0]}.{name}.bin")
        say_took_over(locks.enter_context(OutputLock(f"{loaded[split][0]}.{name}",
                                                     os.path.basename(sys.argv[0]) or "a producer")))
    return loaded


def write_lookup_tracks(loaded: dict, splits, name: str, values) -> dict:
    """Track ``name`` of each of ``splits``: every token's entry of ``values`` (one float per vocabulary entry),
    fingerprinted against the tokens and written atomically. ``{split: {"wrote": lines}}``, and ``"warnings"``:
    a line for each degenerate track (also logged; :func:`~fairseq_maskplug.tools.sharding.warn_if_degenerate`)."""
    from fairseq_maskplug.data import write_side_info
    from fairseq_maskplug.tools.sharding import warn_if_degenerate

    written = {}
    for split in splits:
        prefix, tokens = loaded[split]
        rows = (values[tokens[i].numpy()] for i in range(len(tokens)))
        written[split] = {"wrote": write_side_info(f"{prefix}.{name}", rows, "float64", tokens_prefix=prefix)}
    warnings = warn_if_degenerate([f"{loaded[split][0]}.{name}" for split in splits])
    return {**written, "warnings": warnings} if warnings else written


def run_with_locks(write, args, errors=(OSError, ValueError)) -> int:
    """``write(args, locks)`` of a producer of lookup tracks, the locks of its tracks (an
    :class:`contextlib.ExitStack`) held until it returns; an error of ``errors`` (raised by its checks before
    any work) is one line on standard error (a KeyError's without its quotes) and exit status 2."""
    import contextlib

    try:
        with contextlib.ExitStack() as locks:
            return write(args, locks)
    except errors as error:
        print(f"error: {str(error).strip(chr(39)) if isinstance(error, KeyError) else error}", file=sys.stderr)
        return 2
