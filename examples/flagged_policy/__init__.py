"""A mask policy defined outside fairseq-maskplug and loaded with ``--user-dir``.

``flagged`` masks exactly the tokens whose value in a side-information track is
non-zero (for instance 0/1 labels written with ``preprocess.binarize_side_info``).
Because every policy's options become options of every policy-consuming task::

    fairseq-train data-bin --user-dir examples/flagged_policy \\
        --task guided_mlm --mask-policy flagged --flagged-track flags ...

and the fair random baseline with the same number of masks per sequence is::

    ... --mask-policy matched_random --matched-policy flagged --flagged-track flags
"""

from dataclasses import dataclass, field

import fairseq_maskplug.plugin  # noqa: F401  (registers the tasks this policy plugs into)
from fairseq_maskplug.masking import MaskPolicy, register_mask_policy


@dataclass
class FlaggedOptions:
    flagged_track: str = field(default="flags", metadata={
        "help": "flagged policy: side-information track whose non-zero values mark the tokens to mask"})


@register_mask_policy("flagged", dataclass=FlaggedOptions)
class FlaggedPolicy(MaskPolicy):
    """Mask every maskable token flagged in ``--flagged-track``."""

    @property
    def side_info_names(self):
        return (self.options.flagged_track,)

    def choose(self, tokens, maskable, side_info, rng):
        return maskable & (side_info[self.options.flagged_track] != 0)
