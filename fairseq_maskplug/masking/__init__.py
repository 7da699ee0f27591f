"""Layer 1: pure-NumPy masking policies (no torch, no fairseq).

In: a token array, the maskable positions, optional per-token side information and a
``numpy.random.Generator``. Out: a boolean mask. :func:`corrupt` applies the one
shared 80/10/10 replacement.
"""

from .corruption import Corruption, corrupt
from .random_masks import matched_random_mask, maskable_positions, probabilistic_count, random_mask
from .registry import (
    MASK_POLICY_DATACLASS_REGISTRY,
    MASK_POLICY_REGISTRY,
    MaskPolicy,
    build_mask_policy,
    ignored_policy_options,
    on_policy_registered,
    policy_option_dataclasses,
    register_mask_policy,
)
# registers random, matched_random, l3, selective, span
from . import builtin_policies, l3, selective, spans  # noqa: F401
from .l3 import mask_probabilities
from .selective import selective_count, selective_mask
from .spans import GeometricSpans, span_mask

__all__ = [
    "Corruption", "corrupt", "matched_random_mask", "maskable_positions",
    "probabilistic_count", "random_mask", "MASK_POLICY_DATACLASS_REGISTRY",
    "MASK_POLICY_REGISTRY", "MaskPolicy", "build_mask_policy", "ignored_policy_options", "on_policy_registered",
    "policy_option_dataclasses", "register_mask_policy", "mask_probabilities", "selective_count",
    "selective_mask", "GeometricSpans", "span_mask",
]
