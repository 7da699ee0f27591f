"""Read a split in fairseq's ``sentence_prediction`` layout (``DATA/input0``, ``DATA/label``), checked."""

import os

import numpy as np
from fairseq.data import data_utils

from .dictionaries import check_token_ids


def label_names(label_dictionary):
    """The real labels of a label ``dict.txt`` (fairseq-preprocess pads it with ``madeupword`` symbols)."""
    return [s for s in label_dictionary.symbols[label_dictionary.nspecial:] if not s.startswith("madeupword")]


def load_class_indices(data: str, split: str, label_dictionary, num_classes: int, n_lines: int) -> np.ndarray:
    """Class index of every line of ``DATA/label/SPLIT`` (label id - specials), all checked at once:
    one label per line, ``n_lines`` lines, each a label of ``dict.txt`` below ``num_classes``."""
    prefix = os.path.join(data, "label", split)
    labels = data_utils.load_indexed_dataset(prefix, label_dictionary)
    if labels is None:
        raise FileNotFoundError(f"labels of split {split!r} not found: {prefix}.bin/.idx")
    if len(labels) != n_lines:
        raise ValueError(f"{prefix}: {len(labels)} labels for {n_lines} sentences in {data}/input0/{split}")
    sizes = np.asarray(labels.sizes)
    if (sizes != 2).any():  # label + </s>
        line = int(np.flatnonzero(sizes != 2)[0]) + 1
        raise ValueError(f"{prefix}: line {line} holds {sizes[line - 1] - 1} labels, expected one per line")
    ids = np.array([int(labels[i][0]) for i in range(len(labels))], dtype=np.int64)
    classes = ids - label_dictionary.nspecial
    bad = np.flatnonzero((classes < 0) | (classes >= num_classes))
    if bad.size:
        line = int(bad[0]) + 1
        raise ValueError(f"{prefix}: line {line} has label {label_dictionary[int(ids[bad[0]])]!r}, not one of the "
                         f"{num_classes} classes {label_names(label_dictionary)[:num_classes]} "
                         f"({bad.size} such lines; binarize with the train split's label dict.txt)")
    return classes


def load_classification_split(data: str, split: str, dictionary, label_dictionary, num_classes: int):
    """``(token dataset of DATA/input0/SPLIT, class indices)`` with the given dictionaries."""
    prefix = os.path.join(data, "input0", split)
    if not os.path.exists(prefix + ".idx"):
        raise FileNotFoundError(f"{prefix}.bin/.idx not found: --data needs the sentence_prediction layout "
                                "(input0/, label/)")
    tokens = data_utils.load_indexed_dataset(prefix, dictionary)
    check_token_ids(tokens, prefix, dictionary)
    return tokens, load_class_indices(data, split, label_dictionary, num_classes, len(tokens))
