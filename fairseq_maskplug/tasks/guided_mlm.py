"""``--task guided_mlm``: masked-LM training where a registered policy chooses what to mask."""

from dataclasses import dataclass

from ..common.option_ranges import option
from ..data import PolicyMaskedDataset
from .masked_lm_base import MaskedLMBaseTask, MaskedLMDataConfig
from .policy_options import register_policy_task


@dataclass
class GuidedMLMConfig(MaskedLMDataConfig):
    mask_policy: str = option("random", "registered mask policy that chooses the positions to predict (plugins add "
                              "more)")


@register_policy_task("guided_mlm", dataclass=GuidedMLMConfig)
class GuidedMLMTask(MaskedLMBaseTask):
    """Masked-LM training with a pluggable mask policy (``--mask-policy``).

    Data layout and blocking are those of fairseq ``masked_lm``; the chosen policy
    picks positions per (seed, epoch, index), the shared 80/10/10 rule corrupts them.
    Per-token side information that the policy needs is read from
    ``<data>/<split>.<name>.bin/idx`` and blocked exactly like the tokens.
    """

    cfg: GuidedMLMConfig
    feedback_refused = None

    def build_inputs(self, split, tokens, side_info):
        return PolicyMaskedDataset(tokens, side_info, self.policy, self.corruption, self.special_ids,
                                   pad_idx=self.dictionary.pad(), seed=self.cfg.seed, states=self.feedback_states)
