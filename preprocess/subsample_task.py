"""A low-resource copy of a labelled task: N train examples kept, the others moved to the test split, so that a
classifier learns from few labels (where pre-training matters most: Gururangan et al. 2020, "Don't Stop
Pretraining", sections 3-5; Gu et al. 2020 and Yao et al. 2022 report their largest gains there) and is scored on
many items (issue 88: 400 test sentences alone give a binomial standard error of about 2.3 points).

    fairseq-maskplug-subsample-task --data TASK --train-examples 400 --rest-to-test --out TASK_400

The N kept examples are drawn uniformly without replacement with ``--seed`` and keep their order
(:func:`choose_examples`); valid is left as it is. With ``--rest-to-test`` the test split becomes the task's own
test items followed by the train examples not kept (they are labelled and never trained on here), in their order;
without it the test split is left as it is. OUT mirrors TASK with links (``input0/dict.txt``, ``label/dict.txt``,
valid) beside its own train (and test) files and ``subset.json`` (the settings and which train lines were kept).
Files of the replaced splits other than their tokens and labels (a producer's track of them) are not carried
over: they would not align; make them on the copy. The command writes atomically into a folder of its own."""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from fairseq_maskplug.common.option_ranges import number

from . import HelpFormatter, add_version, command_main

COMMAND = "fairseq-maskplug-subsample-task"
PARTS = ("input0", "label")


def choose_examples(total: int, keep: int, rng: np.random.Generator) -> np.ndarray:
    """The positions of ``keep`` of ``total`` examples drawn uniformly without replacement, in increasing order
    (so the kept examples keep the split's order)."""
    if not 1 <= keep <= total:
        raise ValueError(f"keep must lie in [1, {total}] (the train split's examples), got {keep}")
    return np.sort(rng.choice(total, size=keep, replace=False))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__, formatter_class=HelpFormatter)
    add_version(parser)
    parser.add_argument("--data", type=Path, required=True,
                        help="the labelled task: input0/ and label/ as fairseq-maskplug-prepare-text writes them")
    parser.add_argument("--train-examples", type=number("[1, inf)", int), required=True,
                        help="train examples kept (at most the train split's)")
    parser.add_argument("--rest-to-test", action="store_true",
                        help="append the train examples not kept to the test split (off: test is left as it is)")
    parser.add_argument("--seed", type=number("[0, inf)", int), default=0, help="seed of which examples are kept")
    parser.add_argument("--out", type=Path, required=True,
                        help="the copy: a new or empty folder, or this command's earlier output (replaced)")
    return parser.parse_args(argv)


def write(args) -> int:
    from fairseq.data import Dictionary

    from fairseq_maskplug.common.atomic import check_output_directory
    from fairseq_maskplug.compare.views import mirror, unlink_split_links
    from fairseq_maskplug.tools.binarize import atomic_directory, read_items, write_items

    if not all((args.data / part / "dict.txt").is_file() for part in PARTS):
        raise ValueError(f"--data {args.data}: not a labelled task (no input0/dict.txt or label/dict.txt)")
    check_output_directory(args.out, "--out", COMMAND, others=[("--data", str(args.data))])
    dictionaries = {part: Dictionary.load(str(args.data / part / "dict.txt")) for part in PARTS}
    train = {part: read_items(args.data / part / "train", dictionaries[part]) for part in PARTS}
    total = len(train["label"])
    if len(train["input0"]) != total:
        raise ValueError(f"--data {args.data}: input0/train has {len(train['input0'])} lines, label/train {total}")
    if args.train_examples > total:
        raise ValueError(f"--train-examples {args.train_examples}: {args.data} has only {total} train examples")
    kept = choose_examples(total, args.train_examples, np.random.default_rng(args.seed))
    rest = np.setdiff1d(np.arange(total), kept)
    test = {part: read_items(args.data / part / "test", dictionaries[part]) for part in PARTS} \
        if args.rest_to_test else None
    with atomic_directory(args.out, COMMAND) as tmp:
        mirror(args.data, tmp)
        replaced = ("train", "test") if args.rest_to_test else ("train",)
        unlink_split_links(tmp, replaced)  # a track of a replaced split would not align with the copy's lines
        for part in PARTS:
            vocab = len(dictionaries[part])
            write_items(tmp / part / "train", (train[part][i] for i in kept), vocab)
            if test is not None:
                write_items(tmp / part / "test", [*test[part], *(train[part][i] for i in rest)], vocab)
        record = {"data": str(args.data), "train_examples": args.train_examples, "seed": args.seed,
                  "rest_to_test": args.rest_to_test, "train_lines": total, "kept": kept.tolist(),
                  "test_lines": (len(test["label"]) + rest.size) if test is not None else None}
        (tmp / "subset.json").write_text(json.dumps(record) + "\n", encoding="utf-8")
    moved = f", the other {rest.size} appended to test" if args.rest_to_test else ""
    print(f"{COMMAND}: {kept.size} of {total} train examples kept{moved}, into {args.out}")
    return 0


main = command_main(parse_args, write)


if __name__ == "__main__":
    sys.exit(main())
