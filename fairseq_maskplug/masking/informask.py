"""The ``informask`` policy (Sadeq, Xu, McAuley, EMNLP 2022): every token masked independently at its
vocabulary entry's rate, a track written by ``fairseq-maskplug-informask``
(:mod:`fairseq_maskplug.scoring.informask` computes the rates), as the authors' ``pretrain/dataset.py``
masks with its table."""

from dataclasses import dataclass

import numpy as np

from ..common.option_ranges import option
from .registry import TrackPolicy, register_mask_policy
from .values import PROBABILITY


@dataclass
class InforMaskOptions:
    informask_track: str = option("informask_rate", "informask policy: side-information track of each token's "
                                  "masking rate (fairseq-maskplug-informask)")


@register_mask_policy("informask", dataclass=InforMaskOptions)
class InforMaskPolicy(TrackPolicy):
    """Mask token i with probability ``rate_i`` (its entry's InforMask rate), redrawn every visit. Its rate is the
    table's (about the producer's ``--rate`` on average), so ``--mask-prob-schedule`` does not apply. Under
    ``--mask-unit word`` a word is masked at the largest rate of its pieces (ours)."""

    producer = "fairseq-maskplug-informask --data {data} --splits {split}"
    track_option, track_rule, track_reduction = "informask_track", PROBABILITY, "max"

    def probabilities(self, tokens, maskable, side_info):
        return np.where(maskable, np.asarray(side_info[self.track], dtype=np.float64), 0.0)

    def choose(self, tokens, maskable, side_info, rng):
        return rng.random(len(tokens)) < self.probabilities(tokens, maskable, side_info)
