"""Forwards under a token budget: the one batching rule of every scorer."""

from typing import Iterator, Sequence, Tuple


def budget_runs(lengths: Sequence[int], max_tokens: int, extra: int = 0) -> Iterator[Tuple[int, int]]:
    """``(start, end)`` runs of consecutive items whose padded batch, ``(longest + extra) x count``
    tokens, stays within ``max_tokens``; an item longer than the budget forms a run of its own.

    Items are taken in the given order (sort them by length first to keep padding low);
    ``extra`` counts tokens every input gains when it is framed (``<s>``/``</s>``: 2).
    """
    start, n = 0, len(lengths)
    while start < n:
        width, end = lengths[start] + extra, start + 1
        while end < n and max(width, lengths[end] + extra) * (end - start + 1) <= max_tokens:
            width = max(width, lengths[end] + extra)
            end += 1
        yield start, end
        start = end
