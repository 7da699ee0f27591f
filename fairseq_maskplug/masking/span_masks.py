"""SpanBERT span masking (Joshi et al. 2020, §3.1): the span lengths and the masks, with no policy
registration (the ``span`` policy is :mod:`.spans`; FE-MLM's span views use these too).

Span lengths are ``Geometric(p)`` clipped at ``max_length`` (SpanBERT: p = 0.2, at most
10; mean length 4.46 before spans are cut at sentence ends or at the budget). A span starts at a uniformly
random maskable position that is not masked yet and runs over the following maskable
positions of the same sentence (it never crosses ``<s>``, ``</s>`` or padding); spans are
added until the budget ``floor(rate * n + U)`` of the ``n`` maskable tokens is reached,
the last span cut to fit. So exactly the random policy's count is masked per sequence
(mean ``rate * n``: the realised rate is unbiased), in contiguous runs. SpanBERT spans
whole words; here spans are subword runs (this package scores subwords everywhere).
"""

from dataclasses import dataclass

import numpy as np

from .random_masks import maskable_runs, probabilistic_count


@dataclass(frozen=True)
class GeometricSpans:
    """SpanBERT span lengths (Joshi et al. 2020): ``Geometric(p)`` clipped at ``max_length``."""

    p: float = 0.2
    max_length: int = 10

    def __post_init__(self):
        if not 0 < self.p <= 1 or self.max_length < 1:
            raise ValueError(f"need 0 < p <= 1 and max_length >= 1, got {self}")

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return np.minimum(rng.geometric(self.p, size=size), self.max_length)


def segment_ends(maskable: np.ndarray) -> np.ndarray:
    """For each maskable position, one past the end of its sentence (its run of maskable positions)."""
    ends = np.arange(len(maskable))
    for start, end in zip(*maskable_runs(maskable)):
        ends[start:end] = end
    return ends


def span_mask(maskable: np.ndarray, rate: float, spans: GeometricSpans, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask of ``floor(rate * n + U)`` maskable positions in geometric spans (module docstring)."""
    maskable = np.asarray(maskable, dtype=bool)
    budget = probabilistic_count(rate, int(maskable.sum()), rng)
    mask = np.zeros(len(maskable), dtype=bool)
    if budget == 0:
        return mask
    ends = segment_ends(maskable)
    count = 0
    while count < budget:  # each span masks >= 1 new position
        length = min(int(rng.geometric(spans.p)), spans.max_length)  # spans.sample(rng, 1)[0], one call less
        free = np.flatnonzero(maskable & ~mask)
        start = int(free[rng.integers(0, free.size, dtype=np.int64)])  # rng.choice(free): the same draw, faster
        stop = min(start + length, int(ends[start]))
        new = np.flatnonzero(~mask[start:stop])[:budget - count] + start
        mask[new] = True
        count += len(new)
    return mask
