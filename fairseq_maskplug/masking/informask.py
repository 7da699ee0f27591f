"""The ``informask`` policy (Sadeq, Xu, McAuley, EMNLP 2022): every token masked independently at its
vocabulary entry's rate, a track written by ``fairseq-maskplug-informask``
(:mod:`fairseq_maskplug.scoring.informask` computes the rates), as the authors' ``pretrain/dataset.py``
masks with its table."""

from dataclasses import dataclass

import numpy as np

from ..common.option_ranges import option
from .registry import MaskPolicy, register_mask_policy
from .values import PROBABILITY


@dataclass
class InforMaskOptions:
    informask_track: str = option("informask_rate", "informask policy: side-information track of each token's "
                                  "masking rate (fairseq-maskplug-informask)")


@register_mask_policy("informask", dataclass=InforMaskOptions)
class InforMaskPolicy(MaskPolicy):
    """Mask token i with probability ``rate_i`` (its entry's InforMask rate), redrawn every visit. Its rate is the
    table's (about the producer's ``--rate`` on average), so ``--mask-prob-schedule`` does not apply."""

    @property
    def side_info_names(self):
        return (self.options.informask_track,)

    @property
    def side_info_rules(self):
        return {self.options.informask_track: PROBABILITY}

    @property
    def word_reductions(self):
        """``--mask-unit word``: a word is masked at the largest rate of its pieces (ours)."""
        return {self.options.informask_track: "max"}

    def probabilities(self, tokens, maskable, side_info):
        return np.where(maskable, np.asarray(side_info[self.options.informask_track], dtype=np.float64), 0.0)

    def choose(self, tokens, maskable, side_info, rng):
        return rng.random(len(tokens)) < self.probabilities(tokens, maskable, side_info)
