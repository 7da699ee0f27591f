"""Binarize per-token side information parallel to fairseq-binarized tokens.

Example: tokens binarized with ``fairseq-preprocess --only-source --trainpref
train.tok`` into ``data-bin/``, one number per token in ``train.flags``::

    python -m preprocess.binarize_side_info --tokens train.tok --values train.flags \\
        --destdir data-bin --split train --name flags --dtype uint8

writes ``data-bin/train.flags.bin/.idx`` atomically, after checking every line
against ``train.tok`` and against the binarized ``data-bin/train``.
"""

import argparse
import os
import sys

from fairseq.data.indexed_dataset import MMapIndexedDataset

from fairseq_maskplug.data import SIDE_INFO_DTYPES, check_aligned, side_info_prefix, write_side_info
from fairseq_maskplug.data.indexed_files import open_checked
from fairseq_maskplug.data.side_info_text import side_info_rows_from_text

from . import HelpFormatter, add_version, split_name, track_name


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    add_version(parser)
    parser.add_argument("--tokens", required=True, help="tokenized text given to fairseq-preprocess")
    parser.add_argument("--values", required=True, help="one whitespace-separated number per token, one line per line")
    parser.add_argument("--destdir", required=True, help="fairseq-preprocess output directory")
    parser.add_argument("--split", type=split_name, required=True, help="split name, e.g. train, valid, test")
    parser.add_argument("--name", type=track_name, required=True, help="track name; policies refer to it")
    parser.add_argument("--dtype", default="float64", choices=sorted(SIDE_INFO_DTYPES),
                        help="storage type (float64 for scores, uint8 for 0/1 labels)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    split_prefix = os.path.join(args.destdir, args.split)
    if not MMapIndexedDataset.exists(split_prefix):
        print(f"error: binarized tokens not found: {split_prefix}.bin/.idx", file=sys.stderr)
        return 2
    prefix = side_info_prefix(split_prefix, args.name)
    try:
        rows = list(side_info_rows_from_text(args.values, args.tokens))
        tokens = open_checked(split_prefix)  # keep it alive: .sizes is a view of its mmap
        check_aligned(tokens.sizes, [len(row) for row in rows],
                      split=args.split, name=args.name, path=f"{args.values} vs {split_prefix}")
        write_side_info(prefix, rows, args.dtype, tokens_prefix=split_prefix)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {len(rows)} lines of side information {args.name!r} to {prefix}.bin/.idx")
    return 0


if __name__ == "__main__":
    sys.exit(main())
