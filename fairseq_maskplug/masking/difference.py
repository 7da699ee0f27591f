"""The ``difference`` policy: Difference-Masking (Wilf et al., Findings of EMNLP 2023). A block's budget of
``floor(p n + U)`` tokens is drawn without replacement with probabilities in proportion to each token's weight,
from its score, the similarity to the anchor words that set the target domain apart (``fairseq-maskplug-difference``
writes the track; :mod:`fairseq_maskplug.scoring.difference` computes it). The weight is, by
``--difference-weighting``:

- ``score`` (ours, the default): the score itself;
- ``rank`` (the authors' code, ``Unimodal/AANG/AutoSearchSpace/data.py``'s ``get_masked_indices``): the block's
  ``n`` maskable *words* ranked by score (a word scores as its most anchor-like piece), the most anchor-like
  weighing ``n``, the next ``n - 1``, ... the least 1, ties in a random order drawn from the item's stream (a
  position-ordered tie-break favoured the start of every block: every clipped score of 0 ties); every piece
  takes its word's weight, and the budget of pieces is drawn from them one by one, as the authors draw single
  pieces (:func:`word_rank_weights`); optionally mixed with uniform weights (``--difference-uniform-mix``). A
  much flatter draw than ``score``'s, whose clipped cosines can be 0 for most tokens. Under ``--mask-unit word``
  the words are ranked and drawn whole, on a budget of words (:func:`rank_weights` on the word sequence).
"""

from dataclasses import dataclass

import numpy as np

from ..common.option_ranges import option
from .random_masks import probabilistic_count
from .registry import WORD_IDS, TrackPolicy, register_mask_policy
from .values import PROBABILITY


WEIGHTINGS = ("score", "rank")


@dataclass
class DifferenceOptions:
    difference_track: str = option("difference_score", "difference policy: side-information track of each token's "
                                   "similarity to the anchors (fairseq-maskplug-difference)")
    difference_mask_prob: float = option(0.15, "difference policy: share of a block's maskable tokens predicted "
                                         "(floor(p n + U)), drawn in proportion to their scores", range="(0, 1]",
                                         source="BERT (the paper's rate not confirmed)")
    difference_weighting: str = option("score", "difference policy: how a position's draw weight follows its score: "
                                       "score (the score itself; ours) or rank (the block's words ranked n ... 1 by "
                                       "their best piece, each piece drawn with its word's weight; the authors' code)",
                                       source="ours (the authors' code: rank)", choices=WEIGHTINGS)
    difference_uniform_mix: float = option(0.0, "difference policy, --difference-weighting rank: share of the "
                                           "weight spread uniformly over the block's positions", range="[0, 1]",
                                           source="authors' code (its mix, off by default)")


def rank_weights(scores: np.ndarray, maskable: np.ndarray, uniform_mix: float, rng: np.random.Generator) -> np.ndarray:
    """The authors' draw weights: the ``n`` maskable positions by descending score get ``n, n - 1, ..., 1`` (ties in
    a random order from ``rng``, so no position is favoured), normalised, then mixed with uniform:
    ``(1 - mix) r / sum(r) + mix / n``; 0 at the positions that are not maskable."""
    if not 0 <= uniform_mix <= 1:
        raise ValueError(f"rank_weights: uniform_mix {uniform_mix} outside [0, 1]")
    weights = np.zeros(len(maskable), dtype=np.float64)
    positions = np.flatnonzero(maskable)
    n = positions.size
    if n == 0:
        return weights
    shuffled = rng.permutation(n)  # ties: the stable sort keeps this random order among equal scores
    order = shuffled[np.argsort(-np.asarray(scores, dtype=np.float64)[positions][shuffled], kind="stable")]
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.arange(n, 0, -1)
    weights[positions] = (1 - uniform_mix) * ranks / ranks.sum() + uniform_mix / n
    return weights


def word_rank_weights(scores: np.ndarray, maskable: np.ndarray, words: np.ndarray, uniform_mix: float,
                      rng: np.random.Generator) -> np.ndarray:
    """The authors' piece weights: the maskable words (``words``: each position's word, :func:`~.words.word_ids`),
    each scored as its highest-scoring maskable piece, get :func:`rank_weights` ``n ... 1`` (ties in a random order
    from ``rng``) and every maskable piece its word's rank, normalised over the pieces, then mixed with uniform over
    them; 0 at the positions that are not maskable."""
    if not 0 <= uniform_mix <= 1:
        raise ValueError(f"word_rank_weights: uniform_mix {uniform_mix} outside [0, 1]")
    maskable = np.asarray(maskable, dtype=bool)
    words = np.asarray(words, dtype=np.int64)
    if words.shape != maskable.shape:
        raise ValueError(f"word_rank_weights: {words.shape} word ids for {maskable.shape} positions")
    weights = np.zeros(len(maskable), dtype=np.float64)
    positions = np.flatnonzero(maskable)
    if positions.size == 0:
        return weights
    present, word_of = np.unique(words[positions], return_inverse=True)
    best = np.full(present.size, -np.inf)
    np.maximum.at(best, word_of, np.asarray(scores, dtype=np.float64)[positions])
    word_ranks = rank_weights(best, np.ones(present.size, dtype=bool), 0.0, rng)  # n ... 1, normalised
    pieces = word_ranks[word_of]
    weights[positions] = (1 - uniform_mix) * pieces / pieces.sum() + uniform_mix / positions.size
    return weights


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

    @property
    def reads_words(self) -> bool:
        """``rank`` ranks the words of a block and draws their pieces (module docstring)."""
        return self.options.difference_weighting == "rank"

    def choose(self, tokens, maskable, side_info, rng):
        weights = side_info[self.track]
        if self.options.difference_weighting == "rank":
            if WORD_IDS in side_info:  # choosing pieces: words ranked, pieces drawn (the authors' rule)
                weights = word_rank_weights(weights, maskable, side_info[WORD_IDS],
                                            self.options.difference_uniform_mix, rng)
            else:  # on the word sequence (--mask-unit word), or a reference outside a task: each position ranked
                weights = rank_weights(weights, maskable, self.options.difference_uniform_mix, rng)
        return weighted_mask(weights, maskable, self.options.difference_mask_prob, rng)
