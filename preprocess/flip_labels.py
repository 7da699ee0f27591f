"""A labelled task whose train labels have a known share flipped: a harm known in advance, the positive control of
a comparison (issue 88: "the report must name the direction once the effect exceeds the design's sensitivity").

    fairseq-maskplug-flip-labels --data TASK --share 0.3 --out TASK_NOISY

Exactly round(share x n) of the train split's n labels, chosen uniformly without replacement, each become another
class drawn uniformly among the others (:func:`flip_labels`); valid and test are untouched, so a classifier
fine-tuned on OUT reads noisy labels and is scored on clean ones. OUT mirrors TASK with links (``input0/``,
``label/dict.txt``, the valid and test labels) beside its own ``label/train.{bin,idx}`` and ``flipped.json`` (the
share, the seed, which lines were flipped). A plan's arm takes it as ``label_noise = SHARE`` (docs/compare.md)."""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from fairseq_maskplug.common.option_ranges import number

from . import HelpFormatter, add_version, command_main

COMMAND = "fairseq-maskplug-flip-labels"


def flip_labels(labels: np.ndarray, classes: np.ndarray, share: float, rng: np.random.Generator):
    """``(flipped labels, flipped positions)``: ``round(share * n)`` of the ``n`` labels, chosen uniformly without
    replacement, each replaced by one of the other ``classes`` drawn uniformly (a label outside ``classes`` is
    refused)."""
    labels, classes = np.asarray(labels), np.unique(classes)
    if not 0 <= share <= 1:
        raise ValueError(f"share must lie in [0, 1], got {share}")
    if classes.size < 2:
        raise ValueError(f"flipping a label needs at least two classes, got {classes.size}")
    if not np.isin(labels, classes).all():
        raise ValueError(f"labels {sorted(set(labels.tolist()) - set(classes.tolist()))} are not classes")
    positions = np.sort(rng.choice(labels.size, size=int(round(share * labels.size)), replace=False))
    flipped = labels.copy()
    for position in positions:
        others = classes[classes != labels[position]]
        flipped[position] = others[rng.integers(others.size)]
    return flipped, positions


def label_classes(dictionary) -> np.ndarray:
    """The ids of a label ``dict.txt``'s real labels: not its specials, not the ``madeupword`` rows fairseq-preprocess
    pads it with (a label flipped to one of those is a class the classifier does not have)."""
    from fairseq_maskplug.data.classification import label_names

    return np.array([dictionary.index(name) for name in label_names(dictionary)])


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__, formatter_class=HelpFormatter)
    add_version(parser)
    parser.add_argument("--data", type=Path, required=True,
                        help="the labelled task: input0/ and label/ as fairseq-maskplug-prepare-text writes them")
    parser.add_argument("--share", type=number("[0, 1]"), required=True,
                        help="the share of the train labels flipped (exactly round(share x n))")
    parser.add_argument("--seed", type=number("[0, inf)", int), default=0,
                        help="seed of which labels are flipped and what they become")
    parser.add_argument("--out", type=Path, required=True,
                        help="the noisy copy: a new or empty folder, or this command's earlier output (replaced)")
    return parser.parse_args(argv)


def write(args) -> int:
    import torch
    from fairseq.data import Dictionary

    from fairseq_maskplug.common.atomic import check_output_directory
    from fairseq_maskplug.compare.views import mirror
    from fairseq_maskplug.tools.binarize import atomic_directory, read_items, write_items

    label_dir = args.data / "label"
    if not (label_dir / "dict.txt").is_file() or not (args.data / "input0").is_dir():
        raise ValueError(f"--data {args.data}: not a labelled task (no input0/ or label/dict.txt)")
    check_output_directory(args.out, "--out", COMMAND, others=[("--data", str(args.data))])
    dictionary = Dictionary.load(str(label_dir / "dict.txt"))
    items = read_items(label_dir / "train", dictionary)
    labels = np.array([int(item[0]) for item in items])
    classes = label_classes(dictionary)
    flipped, positions = flip_labels(labels, classes, args.share, np.random.default_rng(args.seed))
    with atomic_directory(args.out, COMMAND) as tmp:
        mirror(args.data, tmp)
        write_items(tmp / "label" / "train", (torch.cat([torch.tensor([label], dtype=item.dtype), item[1:]])
                                              for item, label in zip(items, flipped)), len(dictionary))
        record = {"data": str(args.data), "share": args.share, "seed": args.seed, "lines": int(labels.size),
                  "flipped": int(positions.size), "positions": positions.tolist()}
        (tmp / "flipped.json").write_text(json.dumps(record) + "\n", encoding="utf-8")
    print(f"{COMMAND}: {positions.size} of {labels.size} train labels flipped into {args.out}")
    return 0


main = command_main(parse_args, write)


if __name__ == "__main__":
    sys.exit(main())
