"""Layer 1: pure-NumPy masking policies (no torch, no fairseq).

In: a token array, the maskable positions, optional per-token side information and a
``numpy.random.Generator``. Out: a boolean mask. :func:`corrupt` applies the one
shared 80/10/10 replacement; :mod:`.seq2seq` turns a mask into a text-to-text pair.
"""

from .corruption import Corruption, corrupt
from .feedback import Feedback, group_loss_sums
from .random_masks import matched_random_mask, maskable_positions, probabilistic_count, random_mask
from .registry import (
    MASK_POLICY_DATACLASS_REGISTRY,
    MASK_POLICY_REGISTRY,
    MaskPolicy,
    PolicyWrapper,
    TrackPolicy,
    build_mask_policy,
    ignored_policy_options,
    on_policy_registered,
    options_at_rate,
    policies_read,
    policy_option_dataclasses,
    policy_options,
    register_mask_policy,
)
# registers random, matched_random, l3, selective, span, salient_span, learned_span, pmi, then the policies
# that learn from training or from the domain: ptw, informask, self_evolution, difference (the --help order)
from . import builtin_policies, l3, learned_span, pmi, salient, selective, spans  # noqa: F401
from . import ptw, informask, self_evolution, difference  # noqa: F401,I001
from .l3 import mask_probabilities
from .learned_span import candidate_spans, choose_learned_spans, span_distribution
from .salient import SPAN_IDS, SPAN_LENGTH_BASE, complete_spans, span_ids
from .seq2seq import TARGET_FORMATS, previous_output_tokens, seq2seq_source, seq2seq_target
from .selective import selective_count, selective_mask
from .span_masks import GeometricSpans, span_mask

__all__ = [
    "Corruption", "corrupt", "Feedback", "group_loss_sums", "matched_random_mask", "maskable_positions",
    "probabilistic_count", "random_mask",
    "MASK_POLICY_DATACLASS_REGISTRY", "MASK_POLICY_REGISTRY", "MaskPolicy", "PolicyWrapper", "TrackPolicy",
    "build_mask_policy",
    "ignored_policy_options", "on_policy_registered", "options_at_rate", "policies_read",
    "policy_option_dataclasses", "policy_options", "register_mask_policy", "mask_probabilities",
    "selective_count", "selective_mask", "GeometricSpans", "span_mask", "SPAN_IDS", "SPAN_LENGTH_BASE",
    "complete_spans", "span_ids", "candidate_spans", "choose_learned_spans", "span_distribution",
    "TARGET_FORMATS", "previous_output_tokens", "seq2seq_source", "seq2seq_target",
]
