"""The ``span`` policy: SpanBERT span masking (Joshi et al. 2020, §3.1; the masks are :mod:`.span_masks`)."""

from dataclasses import dataclass

from ..common.option_ranges import option
from .fully_explored import fully_explored_masks
from .registry import MaskPolicy, register_mask_policy
from .span_masks import GeometricSpans, segment_ends, span_mask  # noqa: F401  (segment_ends: its old home)


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

    def __init__(self, options=None):
        super().__init__(options)
        options = self.options
        self.spans = GeometricSpans(options.span_geometric_p, options.span_max_length)

    def choose(self, tokens, maskable, side_info, rng):
        return span_mask(maskable, self.options.span_mask_prob, self.spans, rng)

    def views(self, tokens, maskable, side_info, rng, k):
        """FE-MLM's span views (``fully_explored_masks`` with these spans): every position is in a
        view with this policy's rate, but a view is not distributed as one of its masks (spans cut
        at view boundaries), so no unbiasedness is claimed for them."""
        return fully_explored_masks(len(tokens), k, self.options.span_mask_prob, rng, maskable, self.spans)
