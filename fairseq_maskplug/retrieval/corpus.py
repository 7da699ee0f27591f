"""Reading one-document-per-line text files: UTF-8 checked, line numbers in every error."""

import os
from typing import Iterator, Tuple


def read_lines(path: str, what: str) -> Iterator[Tuple[int, str]]:
    """``(0-based line number, text without its line end)`` of every line of ``path``.

    Stops with ``PATH:LINE: ...`` (1-based, as editors count) at the first line that is
    not UTF-8; an empty file stops with ``PATH: ... is empty``.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} {path} does not exist")
    n = -1
    with open(path, "rb") as f:
        for n, raw in enumerate(f):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{path}:{n + 1}: not UTF-8 (byte 0x{raw[error.start]:02x} at column "
                                 f"{error.start + 1}); re-encode the {what} as UTF-8") from None
            yield n, text.rstrip("\r\n")
    if n < 0:
        raise ValueError(f"{path}: the {what} is empty")


def count_lines(path: str, what: str) -> int:
    """The lines of ``path``, each checked as :func:`read_lines` checks it (before any work on them)."""
    from ..common.progress import progress_bar

    return sum(1 for _ in progress_bar(read_lines(path, what), desc=f"checking the {what}", unit="line"))


def read_queries(path: str):
    """Every query line of ``path``, checked before any retrieval: UTF-8 and not blank."""
    queries = []
    for n, text in read_lines(path, "query file"):
        if not text.strip():
            raise ValueError(f"{path}:{n + 1}: empty query line; every line of --queries is one task text "
                             f"(remove the line, or give the task text)")
        queries.append(text)
    return queries
