"""The answer-span label track (Ye, Li et al. 2021, "+Supervised"): one code per token, ``START`` on
the answer's first token, ``END`` on its last (``START + END`` when they coincide), 0 elsewhere.

What a producer writes (:mod:`fairseq_maskplug.scoring.span_labels`, from character offsets)
and what a task reads (``span_policy``): the format lives here, below both.
"""

from typing import Tuple

import numpy as np

from ..masking.values import ValueRule

START, END = 1, 2
ANSWER_LABELS = ValueRule("an answer label: 0, 1 (start), 2 (end) or 3 (both)", 0, START + END, integral=True)


def label_row(length: int, first: int, last: int) -> np.ndarray:
    """The label codes of a line of ``length`` tokens whose answer is tokens ``first..last``."""
    if not 0 <= first <= last < length:
        raise ValueError(f"answer tokens {first}..{last} do not fit a line of {length} tokens")
    row = np.zeros(length, dtype=np.int64)
    row[first] += START
    row[last] += END
    return row


def answer_positions(row: np.ndarray) -> Tuple[int, int]:
    """``(first, last)`` of a label row; a ValueError unless it holds exactly one start and one end, in order."""
    starts = np.flatnonzero(np.asarray(row, dtype=np.int64) & START)
    ends = np.flatnonzero(np.asarray(row, dtype=np.int64) & END)
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise ValueError(f"{len(starts)} start and {len(ends)} end labels (need one of each, start first)")
    return int(starts[0]), int(ends[0])
