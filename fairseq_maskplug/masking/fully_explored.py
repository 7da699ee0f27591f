"""Fully-explored masks (Zheng et al., FE-MLM): K non-overlapping masks of one sequence.

Eq. 10 of the paper: masks ``m_1 .. m_K`` of equal size ``tau`` with
``H(m_i, m_j) = 2 tau`` for ``i != j`` (pairwise disjoint), ``K tau / n <= 1``. Lemma 2
(the K-view gradient of Eq. 6 is unbiased) needs each ``m_k`` on its own to have the
baseline's mask distribution; only the joint distribution may differ.

What holds here (``tests/test_fully_explored.py``):

- subword granularity: ``tau`` is drawn as the ``random`` policy draws its count and each
  view is then a uniform ``tau``-subset: every view has exactly the mask distribution of
  ``--mask-policy random`` (same ``--mask-prob``), wherever ``K * ceil(p n) <= n``;
- span granularity: every position lies in view ``j`` with probability ``tau / n``, but a
  view's whole distribution is *not* that of the ``span`` policy (a view starts or ends
  inside a span cut at a view boundary; spans wrap around the sequence end), so no
  unbiasedness with respect to MLM+span is claimed;
- views of a policy that masks every token independently with probability ``p_i`` (``l3``;
  :func:`bernoulli_views`): each view has exactly that policy's mask distribution (ours: the
  paper draws views of uniform random masks only).
"""

from typing import Optional

import numpy as np

from .random_masks import probabilistic_count
from .span_masks import GeometricSpans


def views_fit(k: int, rate: float) -> bool:
    """Whether ``k`` disjoint views fit in a sequence when each masks a share ``rate`` of its maskable tokens, or,
    for per-token probabilities, when ``rate`` is the largest one: Eq. 10's ``K tau / n <= 1``. The one test of
    this condition (the views' functions here, ``pmi_views`` and ``--task fe_mlm``'s checks call it)."""
    if k < 1:
        raise ValueError(f"need at least one view, got k={k}")
    return 0.0 <= rate and k * rate <= 1.0 + 1e-12


def view_size(n: int, k: int, ratio: float, rng: np.random.Generator) -> int:
    """``tau = floor(ratio * n + U)``, the random policy's count (mean exactly ``ratio * n``),
    drawn once per sequence and shared by its K views; capped at ``n // k`` so that K
    disjoint views fit (the cap only binds, and lowers the mean, where ``K * ceil(ratio * n) > n``)."""
    return min(probabilistic_count(ratio, n, rng), n // k)


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
    if not views_fit(k, ratio):
        raise ValueError(f"k * ratio must be <= 1 (K disjoint masks of ratio*n tokens), got {k} * {ratio}")
    maskable = np.ones(length, dtype=bool) if maskable is None else np.asarray(maskable, dtype=bool)
    if maskable.shape != (length,):
        raise ValueError(f"maskable has shape {maskable.shape}, expected ({length},)")
    positions = np.flatnonzero(maskable)
    n = positions.size
    tau = view_size(n, k, ratio, rng)
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


def bernoulli_views(probabilities: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` pairwise-disjoint masks, each distributed as independent ``Bernoulli(p_i)`` draws.

    One uniform ``u_i`` per token: token ``i`` is in view ``j`` when ``j p_i <= u_i < (j + 1) p_i``
    (``j < k``) and in no view when ``u_i >= k p_i``. The ``u_i`` are independent, so within one
    view the tokens are independent, each in with probability ``p_i``: every view has the
    distribution of one mask of the policy (Lemma 2 of Zheng et al. asks exactly this of each
    view), and the views are disjoint by construction. Needs ``k * max p_i <= 1``.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    if np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise ValueError("inclusion probabilities must lie in [0, 1]")
    if not views_fit(k, float(p.max()) if p.size else 0.0):
        raise ValueError(f"{k} disjoint views need every inclusion probability <= 1/{k}, but the largest is "
                         f"{float(p.max()):.4g}")
    u = rng.random(p.shape)
    view = np.where(p > 0, np.floor(u / np.where(p > 0, p, 1.0)), k)  # the view token i falls in, or >= k
    return np.arange(k)[:, None] == view[None, :]
