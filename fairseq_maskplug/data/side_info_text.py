"""Read per-token side information from text, one line of numbers per line of tokens."""

import os
from itertools import zip_longest
from typing import Iterator

import numpy as np

from ..common.text_lines import utf8_lines


def side_info_rows_from_text(values_path: str, tokens_path: str) -> Iterator[np.ndarray]:
    """Yield one row per line: the line's values plus 0 for the ``</s>`` fairseq appends.

    ``tokens_path`` is the exact text given to ``fairseq-preprocess`` (tokens separated
    by whitespace); line ``k`` of ``values_path`` must hold one number per token of
    line ``k``. Any disagreement stops with the file and line.
    """
    for path in (values_path, tokens_path):
        if os.path.getsize(path) == 0:
            raise ValueError(f"{path}: empty file")
    for path in (values_path, tokens_path):
        for _ in utf8_lines(path):  # a byte that is not UTF-8 named with its line, before any work
            pass
    with open(values_path, encoding="utf-8") as values, open(tokens_path, encoding="utf-8") as tokens:
        for lineno, (value_line, token_line) in enumerate(zip_longest(values, tokens), start=1):
            if value_line is None or token_line is None:
                longer, shorter = (tokens_path, values_path) if value_line is None else (values_path, tokens_path)
                raise ValueError(f"{longer}:{lineno}: {shorter} ends at line {lineno - 1}; "
                                 "both files need one line per sentence")
            fields = value_line.split()
            try:
                row = [float(v) for v in fields]
            except ValueError:
                bad = next(v for v in fields if not _is_number(v))
                raise ValueError(f"{values_path}:{lineno}: {bad!r} is not a number") from None
            n_tokens = len(token_line.split())
            if len(row) != n_tokens:
                raise ValueError(f"{values_path}:{lineno}: {len(row)} values for {n_tokens} tokens "
                                 f"in {tokens_path}:{lineno}")
            yield np.array(row + [0.0])


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False
