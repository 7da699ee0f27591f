"""Selective masking (Gu et al. 2020, §2.2-2.3 and Appendix A, "In-domain Mask") and its policy.

The tagger scores every token of the in-domain corpus (probability of "important");
tokens scored at or above a threshold are *selected*; per sentence at most
``max(1, floor(cap * n))`` of them are masked (``n`` maskable tokens, cap 15%): the cap
is a ceiling, never a target, and nothing is filled in at random (a sentence with no
selected token has no mask). The authors keep the highest-scoring selected tokens and
write the masks once (static); the ``per_epoch`` mode instead draws the kept tokens
uniformly among the selected ones at every visit.

Sources of the defaults: the paper (§2.3) masks every selected token and states no cap;
the cap, its 15%, the per-sentence scope, the 0.5 threshold and the static masks follow
the authors' code, which masks sentence by sentence. ``--selective-cap-scope block``
caps over a whole block instead (where, with ``--sample-break-mode complete``, the
highest-scoring tokens of any of its sentences win).
"""

import math
from dataclasses import dataclass

import numpy as np

from ..common.option_ranges import option
from .random_masks import maskable_runs
from .registry import MaskPolicy, register_mask_policy

MODES = ("fixed", "per_epoch")
SCOPES = ("sentence", "block")


def selective_count(n_selected: int, n_maskable: int, cap: float) -> int:
    """How many selected tokens are masked: ``min(n_selected, max(1, floor(cap * n_maskable)))``."""
    if n_selected == 0 or n_maskable == 0:
        return 0
    return min(n_selected, max(1, math.floor(cap * n_maskable + 1e-9)))


def selective_mask(scores: np.ndarray, maskable: np.ndarray, threshold: float = 0.5, cap: float = 0.15,
                   rng: np.random.Generator = None) -> np.ndarray:
    """Positions to mask in one sequence.

    Args:
        scores: per-token importance (tagger probabilities, or 0/1 labels).
        maskable: True where a token may be masked (not at special tokens).
        threshold: tokens with ``score >= threshold`` are selected.
        cap: at most ``max(1, floor(cap * n_maskable))`` tokens are masked.
        rng: ``None``: keep the highest scores (ties: the earlier position), the same at
            every visit (the paper's static masks); a generator: keep a uniformly
            random subset of the selected tokens of that size (re-drawn per visit).
    """
    if not 0.0 < cap <= 1.0:
        raise ValueError(f"cap must lie in (0, 1], got {cap}")
    scores = np.asarray(scores, dtype=np.float64)
    selected = np.flatnonzero(maskable & (scores >= threshold))
    count = selective_count(len(selected), int(np.count_nonzero(maskable)), cap)
    mask = np.zeros(len(scores), dtype=bool)
    if count == 0:
        return mask
    if rng is None:
        keep = selected[np.argsort(-scores[selected], kind="stable")[:count]]
    else:
        keep = rng.choice(selected, size=count, replace=False)
    mask[keep] = True
    return mask


def selective_mask_per_sentence(scores: np.ndarray, maskable: np.ndarray, threshold: float = 0.5,
                                cap: float = 0.15, rng: np.random.Generator = None) -> np.ndarray:
    """:func:`selective_mask` applied to every sentence of a block on its own (the runs of
    maskable positions between special tokens), so each sentence has its own cap."""
    scores = np.asarray(scores, dtype=np.float64)
    mask = np.zeros(len(scores), dtype=bool)
    for start, end in zip(*maskable_runs(maskable)):
        mask[start:end] = selective_mask(scores[start:end], maskable[start:end], threshold, cap, rng)
    return mask


@dataclass
class SelectivePolicyOptions:
    selective_track: str = option("importance", "selective policy: side-information track with per-token importance "
                                  "scores (preprocess.annotate_importance) or 0/1 labels "
                                  "(preprocess.score_importance)")
    selective_threshold: float = option(0.5, "selective policy: tokens whose score is at least this are selected",
                                        range="(0, 1]", source="authors' code")
    selective_cap: float = option(0.15, "selective policy: at most max(1, floor(cap * n)) selected tokens are masked "
                                  "per sentence (or block) of n maskable tokens (a cap, not a target: there is no "
                                  "random fill; the paper states no cap, the authors' code caps at 0.15)",
                                  range="(0, 1]", source="authors' code (the paper states no cap)")
    selective_cap_scope: str = option("sentence", "selective policy: sentence = the cap holds for every sentence of "
                                      "a block on its own (authors' code); block = for the whole block",
                                      source="authors' code", choices=SCOPES)
    selective_masks: str = option("fixed", "selective policy: fixed = the highest-scoring selected tokens at every "
                                  "epoch (paper's static masks); per_epoch = a random subset of the selected tokens, "
                                  "re-drawn per visit", source="paper and authors' code (static masks)", choices=MODES)


@register_mask_policy("selective", dataclass=SelectivePolicyOptions)
class SelectivePolicy(MaskPolicy):
    """Mask the tokens the tagger selected, highest score first, capped per sentence (Gu et al. 2020).

    With ``fixed`` masks the positions never change; the 80/10/10 replacement of those
    positions is still drawn per visit like every policy's. The fair baseline is
    ``--mask-policy matched_random --matched-policy selective``: as many random tokens
    per sequence.
    """

    producer = ("fairseq-maskplug-annotate-importance --checkpoint TAGGER_CHECKPOINT --data {data} --splits {split}"
                " (or fairseq-maskplug-score-importance on labelled data)")
    views_refused = ("its masks are tokens its tagger selected (fixed: the same ones at every visit; per_epoch: "
                     "a capped subset of them), which do not hold K disjoint masks of its distribution; train it "
                     "with --task selective_mlm or guided_mlm")

    def __init__(self, options=None):
        super().__init__(options)
        options = self.options
        self.mask_fn = selective_mask_per_sentence if options.selective_cap_scope == "sentence" else selective_mask

    @property
    def side_info_names(self):
        return (self.options.selective_track,)

    @property
    def word_reductions(self):
        """``--mask-unit word``: a word is as important as its most important subword (ours); the cap
        then counts words."""
        return {self.options.selective_track: "max"}

    def choose(self, tokens, maskable, side_info, rng):
        return self.mask_fn(side_info[self.options.selective_track], maskable, self.options.selective_threshold,
                            self.options.selective_cap, rng if self.options.selective_masks == "per_epoch" else None)
