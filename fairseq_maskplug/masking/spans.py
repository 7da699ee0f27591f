"""SpanBERT span masking (Joshi et al. 2020, §3.1) and its ``span`` policy.

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

from ..common.option_ranges import option
from .random_masks import maskable_runs, probabilistic_count
from .registry import MaskPolicy, register_mask_policy


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
        length = int(spans.sample(rng, 1)[0])
        start = int(rng.choice(np.flatnonzero(maskable & ~mask)))
        stop = min(start + length, int(ends[start]))
        new = np.flatnonzero(~mask[start:stop])[:budget - count] + start
        mask[new] = True
        count += len(new)
    return mask


@dataclass
class SpanPolicyOptions:
    span_mask_prob: float = option(0.15, "span policy: share of the maskable tokens masked, count per sequence "
                                   "floor(p*n + U) as the random policy (SpanBERT: 0.15)", range="(0, 1]",
                                   source="SpanBERT")
    span_geometric_p: float = option(0.2, "span policy: span lengths ~ Geometric(p) (SpanBERT: 0.2)", range="(0, 1]",
                                     source="SpanBERT")
    span_max_length: int = option(10, "span policy: longest span (SpanBERT: 10)", range="[1, inf)", source="SpanBERT")


@register_mask_policy("span", dataclass=SpanPolicyOptions)
class SpanPolicy(MaskPolicy):
    """Contiguous spans of geometric length, as many tokens as the random policy (SpanBERT)."""

    rate_option = "span_mask_prob"

    chooses_spans = True

    def __init__(self, cfg):
        super().__init__(cfg)
        self.spans = GeometricSpans(cfg.span_geometric_p, cfg.span_max_length)

    def choose(self, tokens, maskable, side_info, rng):
        return span_mask(maskable, self.cfg.span_mask_prob, self.spans, rng)

    def views(self, tokens, maskable, side_info, rng, k):
        """FE-MLM's span views (``fully_explored_masks`` with these spans): every position is in a
        view with this policy's rate, but a view is not distributed as one of its masks (spans cut
        at view boundaries), so no unbiasedness is claimed for them."""
        from .fully_explored import fully_explored_masks

        return fully_explored_masks(len(tokens), k, self.cfg.span_mask_prob, rng, maskable, self.spans)
