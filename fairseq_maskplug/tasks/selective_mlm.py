"""``--task selective_mlm``: task-guided pre-training (TaskPT) with selective masking (Gu et al. 2020).

``guided_mlm`` whose default policy is ``selective``: the in-domain corpus carries a
per-token importance track (``preprocess.annotate_importance``) and the tokens the
tagger selected are masked, highest score first, capped per sequence. The fair
baseline at the same budget is ``--mask-policy matched_random --matched-policy selective``.
"""

from dataclasses import dataclass

from ..common.option_ranges import option
from .guided_mlm import GuidedMLMConfig, GuidedMLMTask
from .policy_options import register_policy_task


@dataclass
class SelectiveMLMConfig(GuidedMLMConfig):
    mask_policy: str = option("selective", "mask policy: selective (default; options --selective-*), or "
                              "matched_random --matched-policy selective for the random baseline with the same "
                              "number of masks")


@register_policy_task("selective_mlm", dataclass=SelectiveMLMConfig)
class SelectiveMLMTask(GuidedMLMTask):
    """TaskPT: masked-LM training on in-domain text, masking the tokens a tagger found important."""

    cfg: SelectiveMLMConfig
