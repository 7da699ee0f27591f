"""The ``self_evolution`` policy: Self-Evolution learning's masking of hard-to-learn tokens (Zhong et al.,
Findings of ACL 2023; code ``WHU-ZQH/SE4PLMs``).

Self-questioning: the current model reads each sentence unmasked and every token's probability at its own
position is recorded (``fairseq-maskplug-score-pll --metric unmasked``, a ``token_likelihood`` track);
a token whose loss ``-log P`` exceeds a threshold (0.1 in the authors' ``trainer.py``) is hard to learn.
Self-evolution training masks exactly the hard tokens of a sequence; a sequence without one is masked at
random at 15%, as the authors' ``mask_tokens_dataset.py`` falls back (:func:`self_evolution_mask`).

The paper's other half, the token-specific label smoothing (the target of a predicted token mixed with the
model's own prediction on the unmasked input), is a criterion: ``--criterion self_evolution``
(:mod:`fairseq_maskplug.criterions.self_evolution`). The authors replace every hard token by ``<mask>`` and a
fallback sequence's random masks by fairseq's 80/10/10 (``mask_tokens_dataset.py``); so does
``--se-hard-replacement mask``, the default (:meth:`SelfEvolutionPolicy.replacement`); ``run`` gives the hard tokens
the run's ``--leave-unmasked-prob``/``--random-token-prob`` too.
"""

from dataclasses import dataclass

import numpy as np

from ..common.option_ranges import option
from .random_masks import random_mask
from .registry import TrackPolicy, register_mask_policy
from .values import PROBABILITY


HARD_REPLACEMENTS = ("mask", "run")


@dataclass
class SelfEvolutionOptions:
    se_track: str = option("token_likelihood", "self_evolution policy: side-information track of each token's "
                           "probability under the current model, unmasked (fairseq-maskplug-score-pll --metric "
                           "unmasked)")
    se_threshold: float = option(0.1, "self_evolution policy: a token is hard to learn when its loss -log P "
                                 "exceeds this", range="(0, inf)", source="authors' code")
    se_fallback_prob: float = option(0.15, "self_evolution policy: random-masking rate of a sequence without a "
                                     "hard token", range="(0, 1]", source="authors' code (fairseq's mask_prob)")
    se_hard_replacement: str = option("mask", "self_evolution policy: what a sequence's hard tokens become: mask "
                                      "(every one <mask>, the authors' code) or run (the run's --leave-unmasked-prob "
                                      "and --random-token-prob, 80/10/10 by default); a sequence without a hard "
                                      "token keeps the run's (the authors' fallback)", source="authors' code",
                                      choices=HARD_REPLACEMENTS)
    se_max_share: float = option(1.0, "self_evolution policy: most of a sequence's maskable tokens masked; the "
                                 "hardest are kept (1: every hard token, as the authors)", range="(0, 1]",
                                 source="authors' code (no cap)")


def hard_tokens(likelihoods: np.ndarray, maskable: np.ndarray, threshold: float):
    """``(hard, loss)``: the maskable tokens whose loss ``-log P`` exceeds ``threshold``, and every token's loss."""
    with np.errstate(divide="ignore"):
        loss = -np.log(np.asarray(likelihoods, dtype=np.float64))
    return np.asarray(maskable, dtype=bool) & (loss > threshold), loss


def has_hard_tokens(likelihoods: np.ndarray, maskable: np.ndarray, threshold: float) -> bool:
    """Whether a sequence has a hard token (else :func:`self_evolution_mask` falls back to random masks)."""
    return bool(hard_tokens(likelihoods, maskable, threshold)[0].any())


def self_evolution_mask(likelihoods: np.ndarray, maskable: np.ndarray, threshold: float, fallback: float,
                        max_share: float, rng: np.random.Generator) -> np.ndarray:
    """The hard tokens (``-log P > threshold``) of one sequence, at most ``max(1, floor(max_share n))`` of them
    (the hardest first); none hard: a random mask at ``fallback`` (``floor(fallback n + U)`` tokens)."""
    hard, loss = hard_tokens(likelihoods, maskable, threshold)
    if not hard.any():
        return random_mask(maskable, fallback, rng)
    cap = max(1, int(np.floor(max_share * maskable.sum() + 1e-9)))
    if hard.sum() <= cap:
        return hard
    mask = np.zeros(len(hard), dtype=bool)
    positions = np.flatnonzero(hard)
    mask[positions[np.argsort(-loss[positions], kind="stable")[:cap]]] = True
    return mask


@register_mask_policy("self_evolution", dataclass=SelfEvolutionOptions)
class SelfEvolutionPolicy(TrackPolicy):
    """Mask the tokens the current model finds hard to learn (module docstring). The same every epoch until
    the track is rewritten by another self-questioning pass. Under ``--mask-unit word`` a word is as hard as its
    hardest piece (ours)."""

    producer = ("fairseq-maskplug-score-pll --metric unmasked --name {track} --checkpoint MODEL_CHECKPOINT --data {data} "
                "--splits {split}")
    track_option, track_rule, track_reduction = "se_track", PROBABILITY, "min"

    def replacement(self, tokens, maskable, side_info):
        """Every hard token ``<mask>`` (``--se-hard-replacement mask``, the authors' ``mask_tokens_dataset.py``); a
        sequence without one, masked at random, keeps the run's replacement."""
        if self.options.se_hard_replacement == "run" or not has_hard_tokens(
                side_info[self.track], maskable, self.options.se_threshold):
            return None
        return (0.0, 0.0)

    def choose(self, tokens, maskable, side_info, rng):
        o = self.options
        return self_evolution_mask(side_info[self.track], maskable, o.se_threshold, o.se_fallback_prob,
                                   o.se_max_share, rng)
