"""``fairseq-maskplug-hf-track``: a producer's track of raw text in a Hugging Face tokenizer's ids, from the command
line (:mod:`fairseq_maskplug.hf_tracks`; options after ``--`` go to the producer)::

    fairseq-maskplug-hf-track --tokenizer HF_DIR --producer pmi-units --text lines.txt --out rows.jsonl -- --min-count 5
    fairseq-maskplug-hf-track --tokenizer HF_DIR --producer pos-tags --dataset SAVED_DIR --out NEW_DIR

With ``--text`` (one example per line) it writes JSON lines ``{"text", "input_ids", TRACK}``, atomically; with
``--dataset`` (a ``datasets.Dataset`` saved by ``save_to_disk``) it saves the dataset with the track as a new
column to ``--out``, a new or empty directory (or one it wrote before), written whole under a temporary name
first. Every input and the output are checked before any work; a bad one is one ``error:`` line, exit status 2.
"""

import argparse
import json
import os
import shutil
import sys

from ..common.extras import MissingExtra
from ..tools.cli import add_version, command_main

COMMAND = "fairseq-maskplug-hf-track"


def parse_args(argv=None):
    from ..hf_tracks import PRODUCERS

    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(parser)
    parser.add_argument("--tokenizer", required=True, help="a Hugging Face tokenizer (or model) directory")
    parser.add_argument("--model", default=None, help="score-pll: the Hugging Face masked-LM directory it scores "
                        "with (default: --tokenizer's, for score-pll)")
    parser.add_argument("--producer", required=True, choices=list(PRODUCERS), help="the producer whose track is made")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="raw text, one example per line")
    source.add_argument("--dataset", help="a datasets.Dataset saved with save_to_disk")
    parser.add_argument("--text-column", default="text", help="--dataset: the column of raw text")
    parser.add_argument("--column", default=None, help="the new column's name (default: the producer's track name)")
    parser.add_argument("--out", required=True, help="--text: a JSON-lines file; --dataset: a new directory")
    args = parser.parse_args(argv[:split])
    args.producer_options = argv[split + 1:]
    if args.model is None and PRODUCERS[args.producer]["model"]:
        args.model = args.tokenizer
    return args


def read_lines(path: str) -> list:
    """The examples of a ``--text`` file: one a line, each ended by ``\n`` (or ``\r\n``) alone, as
    ``fairseq-preprocess`` reads its text; a line holding another line break (U+2028, a form feed, U+001E, a lone
    ``\r``, ...) is refused with its number, since a reader that breaks there would see other rows."""
    import unicodedata

    from ..common.text_lines import LINE_BREAKS

    with open(path, encoding="utf-8", newline="") as handle:
        text = handle.read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    for number, line in enumerate(lines, 1):
        found = next((c for c in line if c in LINE_BREAKS), None)  # "\n" ended the line
        if found is not None:
            name = unicodedata.name(found, "a control character")
            raise ValueError(f"--text {path}, line {number}: holds U+{ord(found):04X} ({name}), a line break to "
                             "some readers: one example a line, ended by \\n alone; replace it (e.g. by a space)")
    return lines


def check_not_inside(out: str, inputs) -> None:
    """``--out`` is none of the inputs, lies inside none of them and holds none of them."""
    target = os.path.realpath(out)
    for option, path in inputs:
        if not path:
            continue
        source = os.path.realpath(path)
        if target == source or target.startswith(source + os.sep) or source.startswith(target + os.sep):
            raise ValueError(f"--out {out} {'is' if target == source else 'lies inside' if target.startswith(source) else 'holds'} "
                             f"{option} {path}: the output would overwrite an input; give it a place of its own")


def check_paths(args) -> None:
    """The inputs exist and the output may be written, before any work."""
    from ..common.atomic import check_output_directory, check_writable

    source = args.text or args.dataset
    if not os.path.exists(source):
        raise FileNotFoundError(f"{'--text' if args.text else '--dataset'} {source}: no such file or directory")
    if not os.path.isdir(args.tokenizer):
        raise FileNotFoundError(f"--tokenizer {args.tokenizer}: no such directory")
    check_not_inside(args.out, [("--text", args.text), ("--dataset", args.dataset), ("--tokenizer", args.tokenizer),
                                ("--model", args.model)])
    if args.text:
        read_lines(args.text)
        if os.path.realpath(args.out) == os.path.realpath(args.text):
            raise ValueError(f"--out {args.out} is --text: give the rows a file of their own")
        if os.path.isdir(args.out):
            raise ValueError(f"--out {args.out} is a directory: with --text it is a JSON-lines file")
        check_writable(args.out)
    else:
        check_output_directory(args.out, "--out", COMMAND, [("--dataset", args.dataset), ("--tokenizer", args.tokenizer)])


def write(args) -> int:
    from ..common.atomic import temporary_name, write_owner, write_text
    from ..common.extras import require_extra
    from ..hf_tracks import PRODUCERS, track_values, with_track
    from ..interop import import_transformers

    check_paths(args)
    require_extra("hf", COMMAND)
    if args.dataset:
        require_extra("datasets", f"{COMMAND} --dataset")
    tokenizer = import_transformers().AutoTokenizer.from_pretrained(args.tokenizer)
    name = args.column or PRODUCERS[args.producer]["track"]
    if args.text:
        lines = read_lines(args.text)
        result = track_values(lines, tokenizer, args.producer, args.producer_options, model=args.model)
        ids = [tokenizer(line, verbose=False)["input_ids"] for line in lines]  # (no length warning: not fed here)
        write_text(args.out, "".join(json.dumps({"text": line, "input_ids": row_ids, name: row.tolist()}) + "\n"
                                     for line, row_ids, row in zip(lines, ids, result.values)))
        rows = len(lines)
    else:
        import datasets

        rows_in = datasets.load_from_disk(args.dataset)
        if not isinstance(rows_in, datasets.Dataset):
            raise ValueError(f"--dataset {args.dataset} holds a {type(rows_in).__name__}: give one split's Dataset "
                             "(dataset_dict['train'].save_to_disk(...))")
        added = with_track(rows_in, tokenizer, args.producer, args.producer_options, args.text_column, args.column,
                           model=args.model)
        staging = temporary_name(args.out)
        added.save_to_disk(staging)
        write_owner(staging, COMMAND)
        if os.path.isdir(args.out):  # empty, or this command's earlier output (check_paths)
            shutil.rmtree(args.out)
        os.replace(staging, args.out)
        rows = len(added)
    print(json.dumps({"rows": rows, "column": name, "out": args.out}))
    return 0


main = command_main(parse_args, write, (OSError, ValueError, MissingExtra))


def console_main() -> None:
    sys.exit(main())
