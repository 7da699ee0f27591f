"""Fully-explored masks (Zheng et al., FE-MLM): K non-overlapping masks of one sequence.

Eq. 10 of the paper: masks ``m_1 .. m_K`` of equal size ``tau`` with
``H(m_i, m_j) = 2 tau`` for ``i != j`` (pairwise disjoint), ``K tau / n <= 1``; each
``m_k`` on its own is uniform over the masks of size ``tau`` (Lemma 2: the K-view
gradient, Eq. 6, stays unbiased), only the joint distribution differs.
"""

from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class GeometricSpans:
    """SpanBERT span lengths (Joshi et al. 2019): ``Geometric(p)`` clipped at ``max_length``."""

    p: float = 0.2
    max_length: int = 10

    def __post_init__(self):
        if not 0 < self.p <= 1 or self.max_length < 1:
            raise ValueError(f"need 0 < p <= 1 and max_length >= 1, got {self}")

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return np.minimum(rng.geometric(self.p, size=size), self.max_length)


def view_size(n: int, k: int, ratio: float) -> int:
    """``tau = round(ratio * n)``, capped at ``n // k`` so that K disjoint views fit."""
    return min(int(round(ratio * n)), n // k)


def fully_explored_masks(length: int, k: int, ratio: float, rng: np.random.Generator,
                         maskable: Optional[np.ndarray] = None,
                         span: Optional[GeometricSpans] = None) -> np.ndarray:
    """Return a ``k x length`` boolean array: ``k`` pairwise-disjoint masks of ``tau`` tokens each.

    Args:
        length: sequence length.
        k: number of views ``K``.
        ratio: per-view masking ratio ``tau / n`` over the ``n`` maskable positions;
            ``k * ratio <= 1`` is required.
        rng: the only source of randomness.
        maskable: positions that may be masked (default: all).
        span: ``None`` for subword granularity; a :class:`GeometricSpans` for span
            granularity.

    Subword: a uniform permutation of the maskable positions is cut into ``k``
    consecutive chunks of ``tau``. Span: starting at a uniformly random offset, the
    maskable positions (taken cyclically, in order) are cut into spans of
    ``span.sample`` lengths; the spans are shuffled, concatenated, and view ``j`` takes
    tokens ``j tau .. (j+1) tau - 1`` of that sequence: exactly ``tau`` tokens made of
    whole spans, except that a span crossing a view boundary is split between the two
    views. The random offset makes the procedure
    invariant under rotation, so in both modes every maskable position is in view
    ``j`` with the same probability ``tau / n``.
    """
    if k < 1:
        raise ValueError(f"need at least one view, got k={k}")
    if not 0.0 <= ratio or k * ratio > 1.0 + 1e-12:
        raise ValueError(f"k * ratio must be <= 1 (K disjoint masks of ratio*n tokens), got {k} * {ratio}")
    maskable = np.ones(length, dtype=bool) if maskable is None else np.asarray(maskable, dtype=bool)
    if maskable.shape != (length,):
        raise ValueError(f"maskable has shape {maskable.shape}, expected ({length},)")
    positions = np.flatnonzero(maskable)
    n = positions.size
    tau = view_size(n, k, ratio)
    masks = np.zeros((k, length), dtype=bool)
    if tau == 0:
        return masks
    if span is None:
        order = rng.permutation(positions)
        for j in range(k):
            masks[j, order[j * tau:(j + 1) * tau]] = True
        return masks
    rotated = np.roll(positions, -int(rng.integers(n)))
    lengths = span.sample(rng, n)  # n spans of length >= 1 always cover n positions
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    bounds = bounds[:np.searchsorted(bounds, n) + 1]
    bounds[-1] = n
    spans = [rotated[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    spans = [spans[i] for i in rng.permutation(len(spans))]
    dealt = np.concatenate(spans)[:k * tau]  # views take consecutive runs of the shuffled spans
    for j in range(k):
        masks[j, dealt[j * tau:(j + 1) * tau]] = True
    return masks
