"""Start/end labels of answer spans (Ye, Li et al. 2021, "+Supervised"): the policy is trained
"similar to an extractive reading comprehension model" on (context, answer) pairs without
the question, one start and one end label per context.

An answer is given as character offsets ``[start, end)`` into the raw context line. It is
mapped onto the exact binarized tokens through the bytes they spell
(:mod:`.alignment`): the first and last token overlapping the answer. The label track
holds one code per token: ``START`` on the first token, ``END`` on the last (``START +
END`` when they coincide), 0 elsewhere, so it is blocked and fingerprinted like every
side-information track (its format: :mod:`fairseq_maskplug.data.answer_labels`).
"""

from typing import Tuple

import numpy as np

from .alignment import char_to_byte_offsets, token_span


def parse_answer(line: str, where: str) -> Tuple[int, int]:
    """``"START END"`` (character offsets, end exclusive) -> ``(start, end)``; ``where`` names
    the file and line in the error."""
    fields = line.split()
    if len(fields) != 2 or not all(f.lstrip("-").isdigit() for f in fields):
        raise ValueError(f"{where}: expected two character offsets 'START END', got {line.strip()!r}")
    start, end = int(fields[0]), int(fields[1])
    if not 0 <= start < end:
        raise ValueError(f"{where}: the answer [{start}, {end}) is empty or negative")
    return start, end


def answer_tokens(text: str, byte_ranges: np.ndarray, start: int, end: int) -> Tuple[int, int]:
    """``(first, last)`` (inclusive) of the tokens covering the characters ``[start, end)`` of
    ``text``, the text the tokens spell with their byte ranges (:func:`.alignment.line_text`)."""
    if end > len(text):
        raise ValueError(f"the answer [{start}, {end}) ends after the text ({len(text)} characters)")
    if not text[start:end].strip():
        raise ValueError(f"the answer [{start}, {end}) is only whitespace")
    offsets = char_to_byte_offsets(text)
    span = token_span(byte_ranges, int(offsets[start]), int(offsets[end]))
    if span is None:
        raise ValueError(f"no token covers the answer [{start}, {end})")
    return span[0], span[1] - 1
