"""POS-Tagging Weighted masking, PTW (Yang, Zhang, Zhao, ACL 2023, "Learning Better Masking for Better
Language Model Pre-training", §4.2; code ``mutonix/better_masking``).

The model's running loss on each part of speech decides how often words of that part of speech are
masked: the harder a tag, the more of its words are predicted. Following the authors' code
(``bert_ptw_pretrain.py``, ``data_utils.py``):

- the state is one score per universal POS tag (17), 0 at the start; after every forward each
  tag predicted in it moves towards the batch's mean loss on that tag, ``s <- m s + (1 - m) mean``
  with ``m = 0.999`` (:func:`fold_scores`);
- a tag's weight is ``sigmoid(2 (s - mean(s)) / std(s))`` (``std`` with Bessel's correction, as
  torch's; 1e-4 when 0, so at the start every weight is 1/2) (:func:`tag_weights`);
- a sequence's candidates are visited in a random order, each accepted with its tag's weight, until
  ``round(p n)`` tokens are (at least one; under ``--mask-unit word`` whole words, skipping one that would
  overflow the token budget, as the code's ``_whole_word_mask``: :func:`ptw_mask`).

Where we differ from the code: its candidates are whole words (``--mask-unit word`` does the same
here) and its count counts ``[CLS]``/``[SEP]`` (here: maskable tokens only); its scores are kept per
process, here every worker's losses are summed first, so all workers share one state; every
training batch is drawn again with the current state (:mod:`.feedback`), as the code's loader workers read a
shared dictionary whenever they build a batch. The paper's masking-ratio decay is
``--mask-prob-schedule``.
"""

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..common.option_ranges import option
from .feedback import Feedback
from .registry import WORD_TOKENS, TrackPolicy, register_mask_policy
from .values import ValueRule

#: spaCy's universal POS tags in the authors' order; a ``pos`` track holds their index
UPOS_TAGS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
             "SCONJ", "SYM", "VERB", "X")
POS_IDS = ValueRule(f"a universal POS tag index 0..{len(UPOS_TAGS) - 1}", 0, len(UPOS_TAGS) - 1, integral=True)


@dataclass
class PTWOptions:
    ptw_mask_prob: float = option(0.15, "ptw policy: share of a sequence's maskable tokens predicted (round(p n), at "
                                  "least 1)", range="(0, 1]", source="authors' code (BERT's 15%)")
    ptw_momentum: float = option(0.999, "ptw policy: how much of a tag's score one training batch keeps "
                                 "(s <- m s + (1 - m) batch mean loss)", range="[0, 1)", source="authors' code")
    ptw_sharpness: float = option(2.0, "ptw policy: a tag's weight is sigmoid(sharpness * (s - mean) / std)",
                                  range="(0, inf)", source="authors' code")
    ptw_track: str = option("pos", "ptw policy: side-information track of universal POS tag indices "
                            "(fairseq-maskplug-pos-tags)")


def fold_scores(scores: np.ndarray, loss_sums: np.ndarray, counts: np.ndarray, momentum: float) -> np.ndarray:
    """The tag scores after one batch: each tag with a predicted position moves to ``m s + (1 - m)``
    times its mean loss in the batch; the others keep theirs."""
    scores = np.array(scores, dtype=np.float64)
    seen = np.asarray(counts) > 0
    scores[seen] = momentum * scores[seen] + (1 - momentum) * np.asarray(loss_sums)[seen] / np.asarray(counts)[seen]
    return scores


def tag_weights(scores: np.ndarray, sharpness: float = 2.0) -> np.ndarray:
    """Each tag's acceptance probability: ``sigmoid(sharpness (s - mean) / std)`` (std: 1e-4 when 0)."""
    scores = np.asarray(scores, dtype=np.float64)
    std = scores.std(ddof=1) if scores.size > 1 else 0.0
    std = 1e-4 if std == 0 else std
    return 1.0 / (1.0 + np.exp(-sharpness * (scores - scores.mean()) / std))


def ptw_mask(tags: np.ndarray, maskable: np.ndarray, weights: np.ndarray, prob: float,
             rng: np.random.Generator, sizes: Optional[np.ndarray] = None) -> np.ndarray:
    """The positions to predict: the maskable positions in a random order, each accepted with its tag's
    weight, taken while they fit a budget of ``max(1, round(prob n))`` tokens (``n`` the maskable tokens;
    fewer when fewer are accepted).

    ``sizes`` (``--mask-unit word``: each position is a word of that many tokens) makes the budget count tokens, as
    the authors' ``_whole_word_mask`` does: an accepted word that would overflow it is skipped, and the next ones
    are tried. Without it every position is one token, and the first ``budget`` accepted are taken."""
    if not 0 < prob <= 1:
        raise ValueError(f"ptw_mask: prob {prob} outside (0, 1]")
    if sizes is None:  # every position one token: the first `budget` accepted (the same draws, fewer steps)
        mask = np.zeros(len(maskable), dtype=bool)
        candidates = rng.permutation(np.flatnonzero(maskable))
        if candidates.size:
            accepted = candidates[rng.random(candidates.size) < np.asarray(weights)[np.asarray(tags)[candidates]]]
            mask[accepted[:max(1, int(round(candidates.size * prob)))]] = True
        return mask
    sizes = np.asarray(sizes, dtype=np.int64)
    if sizes.shape != np.shape(maskable) or (sizes < 1).any():
        raise ValueError(f"ptw_mask: sizes {sizes.shape} must be positive, one per position {np.shape(maskable)}")
    mask = np.zeros(len(maskable), dtype=bool)
    candidates = rng.permutation(np.flatnonzero(maskable))
    if candidates.size == 0:
        return mask
    budget = max(1, int(round(int(sizes[candidates].sum()) * prob)))
    accepted = candidates[rng.random(candidates.size) < np.asarray(weights)[np.asarray(tags)[candidates]]]
    taken = np.cumsum(sizes[accepted]) <= budget
    if not taken.all() and (sizes[accepted] > 1).any():  # words: skip one that overflows, try the next ones
        taken, left = np.zeros(len(accepted), dtype=bool), budget
        for i, size in enumerate(sizes[accepted]):
            if size <= left:
                taken[i], left = True, left - size
            if left == 0:
                break
    mask[accepted[taken]] = True
    return mask


def describe_tag_weights(weights: np.ndarray, shown: int = 3) -> str:
    """The ``shown`` most and least often accepted tags with their weights, for a log line:
    ``tag weights: NOUN 0.88, VERB 0.81, ADJ 0.77 ... PUNCT 0.12, DET 0.2, ADP 0.25``."""
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (len(UPOS_TAGS),):
        raise ValueError(f"describe_tag_weights: {weights.shape} weights for {len(UPOS_TAGS)} tags")
    if np.ptp(weights) == 0:
        return f"tag weights: every tag {weights[0]:.3g} (no tag scored yet, or all alike)"
    order = np.argsort(-weights, kind="stable")
    top = ", ".join(f"{UPOS_TAGS[i]} {weights[i]:.3g}" for i in order[:shown])
    bottom = ", ".join(f"{UPOS_TAGS[i]} {weights[i]:.3g}" for i in order[::-1][:shown])
    return f"tag weights (the most and the least masked): {top} ... {bottom}"


@register_mask_policy("ptw", dataclass=PTWOptions)
class PTWPolicy(TrackPolicy):
    """POS-Tagging Weighted masking (module docstring); its state is the tag scores, learnt in training. Under
    ``--mask-unit word`` a word's tag is its first piece's (the authors' alignment)."""

    rate_option = "ptw_mask_prob"
    producer = "fairseq-maskplug-pos-tags --data {data} --split {split} --text RAW_TEXT_OF_{split}"
    track_option, track_rule, track_reduction = "ptw_track", POS_IDS, "first"

    @property
    def feedback(self) -> Feedback:
        momentum, sharpness = self.options.ptw_momentum, self.options.ptw_sharpness
        return Feedback(self.track, len(UPOS_TAGS), lambda n: np.zeros(n),
                        lambda s, sums, counts: fold_scores(s, sums, counts, momentum),
                        lambda s: describe_tag_weights(tag_weights(s, sharpness)))

    _weights: Optional[np.ndarray] = None

    def with_state(self, state):
        changed = super().with_state(state)
        changed._weights = None  # (a copy: computed again for the new state, once, not per sequence)
        return changed

    def weights(self) -> np.ndarray:
        """The tags' acceptance probabilities under the current state (computed once per state)."""
        if self._weights is None:
            state = self.state if self.state is not None else self.feedback.initial(len(UPOS_TAGS))
            self._weights = tag_weights(state, self.options.ptw_sharpness)
        return self._weights

    #: ``--mask-unit word``: the budget counts tokens, as the authors' whole-word masking does (:func:`ptw_mask`)
    budgets_tokens = True

    def choose(self, tokens, maskable, side_info, rng):
        return ptw_mask(side_info[self.track], maskable, self.weights(), self.options.ptw_mask_prob, rng,
                        side_info.get(WORD_TOKENS))
