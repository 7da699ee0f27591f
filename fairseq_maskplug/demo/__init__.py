"""The recipes' demo data (``preprocess/prepare_demo.py``'s news, reviews and MR; the TLM recipe's general corpus and
retrieved data, :mod:`.tlm_data`; BART's news with entity spans and its closed-book probe, :mod:`.bart_data`), built
from the packages the registries hold (:mod:`fairseq_maskplug.data.demo_sources`). The commands in ``preprocess/``
parse and call these; here, what every demo-data command shares: its parser's common options and its checks."""

import argparse
from pathlib import Path

from ..common.atomic import check_output_directory
from ..common.option_ranges import number
from ..tools.binarize import gpt2_bpe_files
from ..tools.cli import HelpFormatter, add_version


def demo_data_parser(doc: str, seed_help: str) -> argparse.ArgumentParser:
    """A demo-data command's parser: ``--version``, ``--out``, ``--cache``, ``--seed`` and the encoding
    (``--vocab-size``, or ``--gpt2-bpe`` with ``--srcdict``), as every demo-data command takes them."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=HelpFormatter)
    add_version(parser)
    parser.add_argument("--out", type=Path, required=True,
                        help="output directory (new or empty, or this command's earlier output, which is replaced "
                             "atomically)")
    parser.add_argument("--cache", type=Path, default=None, help="download cache (default: OUT/../downloads)")
    parser.add_argument("--seed", type=number("[0, inf)", int), default=1234, help=seed_help)
    parser.add_argument("--vocab-size", type=number("[1, inf)", int),
                        default=8000, help="sentencepiece vocabulary size")
    parser.add_argument("--gpt2-bpe", type=Path, default=None,
                        help="directory with GPT-2 BPE encoder.json and vocab.bpe: encode with fairseq's GPT-2 BPE "
                             "(a released model's) instead of a new sentencepiece model (needs --srcdict)")
    parser.add_argument("--srcdict", type=Path, default=None,
                        help="the released model's dict.txt every split is binarized with (with --gpt2-bpe)")
    return parser


def check_demo_inputs(args, command: str, writes) -> None:
    """Refuse, before any work: ``--gpt2-bpe`` without ``--srcdict`` (or the other way round), a missing file of
    theirs, and an ``--out`` the command may not write (:func:`check_output_directory`)."""
    if (args.gpt2_bpe is None) != (args.srcdict is None):
        raise ValueError("--gpt2-bpe and --srcdict go together (a released model's BPE files and its dict.txt)")
    if args.gpt2_bpe is not None:
        gpt2_bpe_files(args.gpt2_bpe)
        if not args.srcdict.is_file():
            raise FileNotFoundError(f"{args.srcdict}: no such file (--srcdict)")
    check_output_directory(args.out, "--out", command, [("--cache", args.cache), ("--gpt2-bpe", args.gpt2_bpe),
                                                        ("--srcdict", args.srcdict)], legacy=writes)
