"""The ``difference`` policy: Difference-Masking (Wilf et al., Findings of EMNLP 2023). A block's budget of
``floor(p n + U)`` tokens is drawn without replacement with probabilities in proportion to each token's score,
its similarity to the anchor words that set the target domain apart (``fairseq-maskplug-difference`` writes
the track; :mod:`fairseq_maskplug.scoring.difference` computes it)."""

from dataclasses import dataclass

import numpy as np

from ..common.option_ranges import option
from .random_masks import probabilistic_count
from .registry import TrackPolicy, register_mask_policy
from .values import PROBABILITY


@dataclass
class DifferenceOptions:
    difference_track: str = option("difference_score", "difference policy: side-information track of each token's "
                                   "similarity to the anchors (fairseq-maskplug-difference)")
    difference_mask_prob: float = option(0.15, "difference policy: share of a block's maskable tokens predicted "
                                         "(floor(p n + U)), drawn in proportion to their scores", range="(0, 1]",
                                         source="BERT (the paper's rate not confirmed)")


def weighted_mask(scores: np.ndarray, maskable: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """``floor(rate n + U)`` of the ``n`` maskable positions drawn without replacement with probabilities in
    proportion to ``scores`` (the positions of score 0 only when too few others remain)."""
    mask = np.zeros(len(maskable), dtype=bool)
    positions = np.flatnonzero(maskable)
    count = probabilistic_count(rate, positions.size, rng)
    if count == 0:
        return mask
    weights = np.asarray(scores, dtype=np.float64)[positions]
    # Efraimidis-Spirakis keys u^(1/w): the largest `count` are a weighted draw without replacement
    with np.errstate(divide="ignore"):
        keys = np.where(weights > 0, np.log(rng.random(positions.size)) / np.where(weights > 0, weights, 1.0),
                        -np.inf)
    chosen = positions[np.argsort(-keys, kind="stable")[:count]]
    mask[chosen] = True
    return mask


@register_mask_policy("difference", dataclass=DifferenceOptions)
class DifferencePolicy(TrackPolicy):
    """Mask the tokens most like what sets the target domain apart (module docstring). Under ``--mask-unit word``
    a word scores as its most anchor-like piece (ours)."""

    rate_option = "difference_mask_prob"
    producer = ("fairseq-maskplug-difference --data {data} --splits {split} --general GENERAL_DATA "
                "--checkpoint MODEL_CHECKPOINT")
    track_option, track_rule, track_reduction = "difference_track", PROBABILITY, "max"

    def choose(self, tokens, maskable, side_info, rng):
        return weighted_mask(side_info[self.track], maskable, self.options.difference_mask_prob, rng)
