"""L3Masking mask probabilities (Kimura et al., §3.2, Eq. 4) and the ``l3`` policy.

From token pseudo-likelihoods ``PLT_i`` of the frozen vanilla model: ``p_i = 1 - PLT_i``
(``PLT^c``), scaled by ``alpha = n p_bar / sum_i p_i`` so that the mean is ``p_bar``; a value
above 1 is clipped and "the exceeded value is equally distributed to all the other
tokens in the sentence", repeated until no value exceeds 1. The authors' code uses
``p_i = surprisal_i / max surprisal`` and clips without redistributing (its realised
mean falls below ``p_bar``); the surprisal transform is offered here as an option,
always with the redistribution, so the mean is exact either way.
"""

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..common.option_ranges import option
from .registry import TrackPolicy, register_mask_policy
from .values import PROBABILITY

TRANSFORMS = ("complement", "surprisal")
REDISTRIBUTIONS = ("equal", "proportional")


def mask_probabilities(plt: np.ndarray, mean: float = 0.15, maskable: Optional[np.ndarray] = None,
                       transform: str = "complement", redistribute: str = "equal", cap: float = 1.0) -> np.ndarray:
    """Per-token mask probabilities whose mean over the maskable tokens is exactly ``mean``.

    Args:
        plt: token pseudo-likelihoods in [0, 1].
        mean: ``p_bar``, the mean probability over the maskable tokens (0 <= mean <= 1).
        maskable: tokens that may be masked (default: all); the others get 0.
        transform: ``complement`` (paper): ``1 - PLT``; ``surprisal`` (authors' code):
            ``-log PLT / max(-log PLT)``.
        redistribute: how the excess of clipped values (> 1) is spread over the maskable
            tokens still below 1: ``equal`` shares (paper) or ``proportional`` to their values.
        cap: the largest probability (paper: 1); values above it are clipped at it and their
            excess redistributed the same way (ours: ``fe_mlm`` with K views needs ``cap <= 1/K``).
            Needs ``mean <= cap``.

    Edge cases: with no maskable token the result is all 0. If every transformed value
    is 0 (all PLT = 1), nothing distinguishes the tokens and each maskable token gets
    ``mean``. With ``proportional``, if every token still below 1 has value 0, the
    excess is shared equally. ``mean * (number of maskable tokens)`` can never exceed
    ``cap`` times that number since ``mean <= cap``, so the mean is always reached exactly.
    """
    plt = np.asarray(plt, dtype=np.float64)
    if not 0.0 <= mean <= 1.0:
        raise ValueError(f"mean must lie in [0, 1], got {mean}")
    if not mean <= cap <= 1.0:
        raise ValueError(f"cap must lie in [mean, 1] = [{mean}, 1], got {cap}")
    if np.any((plt < 0) | (plt > 1)) or not np.all(np.isfinite(plt)):
        raise ValueError("pseudo-likelihoods must lie in [0, 1]")
    if transform not in TRANSFORMS or redistribute not in REDISTRIBUTIONS:
        raise ValueError(f"transform must be one of {TRANSFORMS}, redistribute one of {REDISTRIBUTIONS}")
    maskable = np.ones(plt.shape, bool) if maskable is None else np.asarray(maskable, dtype=bool)
    p = np.zeros_like(plt)
    m = int(maskable.sum())
    if m == 0:
        return p
    if transform == "complement":
        base = 1.0 - plt[maskable]
    else:
        surprisal = -np.log(np.clip(plt[maskable], np.finfo(np.float64).tiny, 1.0))
        base = surprisal / surprisal.max() if surprisal.max() > 0 else surprisal
    total = mean * m
    if base.sum() <= 0:
        p[maskable] = mean
        return p
    q = base * (total / base.sum())  # alpha * p_i
    for _ in range(m):  # each round fixes at least one more value at the cap
        over = q > cap
        if not over.any():
            break
        excess = float((q[over] - cap).sum())
        q[over] = cap
        free = q < cap
        if not free.any():  # every token at the cap (mean = cap, or rounding): nothing left to spread onto
            break
        if redistribute == "proportional" and q[free].sum() > 0:
            q[free] += excess * q[free] / q[free].sum()
        else:
            q[free] += excess / free.sum()
    p[maskable] = np.minimum(q, cap)
    return p


@dataclass
class L3PolicyOptions:
    l3_track: str = option("plt", "l3 policy: side-information track with the token pseudo-likelihoods (PLT)")
    l3_mean: float = option(0.15, "l3 policy: mean mask probability p_bar over the maskable tokens of a block",
                            range="(0, 1]", source="paper")
    l3_transform: str = option("complement", "l3 policy: complement (paper, 1 - PLT) or surprisal (authors' code, "
                               "-log PLT / max)", source="paper (authors' code: surprisal)", choices=TRANSFORMS)
    l3_redistribute: str = option("equal", "l3 policy: spread the excess of probabilities clipped at 1 equally "
                                  "(paper) or proportional", source="paper", choices=REDISTRIBUTIONS)
    l3_max_prob: float = option(1.0, "l3 policy: largest mask probability of a token, the excess spread as above "
                                "(paper: 1; ours: --task fe_mlm with K views needs at most 1/K); at least --l3-mean",
                                range="(0, 1]", source="paper (no cap below 1)")


@register_mask_policy("l3", dataclass=L3PolicyOptions)
class L3Policy(TrackPolicy):
    """Mask token i with probability ``p_i`` from :func:`mask_probabilities`, redrawn every visit.

    The mean ``p_bar`` holds per block: with ``--sample-break-mode eos`` a block is one
    sentence, as in the paper.
    """

    rate_option = "l3_mean"

    def __init__(self, options=None):
        super().__init__(options)
        options = self.options
        if options.l3_max_prob < options.l3_mean:
            raise ValueError(f"--l3-max-prob {options.l3_max_prob} is below --l3-mean {options.l3_mean}: no "
                             "probabilities with that mean stay under that cap")

    #: ``--mask-unit word``: a word's PLT is the product of its subwords' PLTs, and ``p_bar`` is the mean over the
    #: words. Under score-pll's default ``--metric word_l2r`` (the paper's PLL-word-l2r) each subword was scored with
    #: itself and the later subwords of its word masked, the earlier ones visible, so the product is the chain rule
    #: of the word's left-to-right pseudo-likelihood; under ``--metric original`` (one subword masked) it
    #: approximates it
    producer = "fairseq-maskplug-score-pll --checkpoint VANILLA_MLM_CHECKPOINT --data {data} --splits {split}"
    track_option, track_rule, track_reduction = "l3_track", PROBABILITY, "prod"

    def probabilities(self, tokens, maskable, side_info):
        return mask_probabilities(side_info[self.track], self.options.l3_mean, maskable,
                                  self.options.l3_transform, self.options.l3_redistribute, self.options.l3_max_prob)

    def choose(self, tokens, maskable, side_info, rng):
        return rng.random(len(tokens)) < self.probabilities(tokens, maskable, side_info)
