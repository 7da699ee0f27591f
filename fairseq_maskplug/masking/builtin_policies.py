"""Built-in policies: ``random`` (RoBERTa) and ``matched_random`` (the fair baseline)."""

from dataclasses import dataclass
from typing import Optional

from ..common.option_ranges import option

from .fully_explored import fully_explored_masks
from .random_masks import matched_random_mask, random_mask
from .registry import MaskPolicy, PolicyWrapper, build_mask_policy, register_mask_policy


@dataclass
class RandomPolicyOptions:
    mask_prob: float = option(0.15, "random policy: probability that a maskable token is chosen (count per sequence "
                              "= floor(p*n + U[0,1)), as in fairseq masked_lm)", range="(0, 1]", source="BERT")


@register_mask_policy("random", dataclass=RandomPolicyOptions)
class RandomPolicy(MaskPolicy):
    """Uniform random masking at rate ``--mask-prob`` (Devlin et al. 2019; fairseq ``masked_lm``)."""

    rate_option = "mask_prob"

    def choose(self, tokens, maskable, side_info, rng):
        return random_mask(maskable, self.options.mask_prob, rng)

    def views(self, tokens, maskable, side_info, rng, k):
        """FE-MLM's subword views (Zheng et al., Eq. 10): ``tau`` drawn as :meth:`choose` draws its
        count, K disjoint uniform ``tau``-subsets; each view has exactly this policy's mask
        distribution wherever ``K * ceil(p n) <= n`` (:mod:`.fully_explored`)."""
        return fully_explored_masks(len(tokens), k, self.options.mask_prob, rng, maskable)


@dataclass
class MatchedRandomOptions:
    matched_policy: str = option("random", "matched_random policy: the policy whose number of masks per sequence is "
                                 "matched; positions are then chosen uniformly at random",
                                 source="authors' code (with_rand: a matched random baseline; theirs is matched per "
                                        "spaCy sentence and written once, ours per block and drawn per visit)")


@register_mask_policy("matched_random", dataclass=MatchedRandomOptions)
class MatchedRandomPolicy(PolicyWrapper):
    """Mask as many uniformly random tokens as ``--matched-policy`` would (Gu et al. 2020, §3.3).

    The reference policy (:attr:`reference`, the wrapped policy) runs first on the very same generator, so
    for every (seed, epoch, index) the count is exactly the count the guided run masks for that sequence at
    that visit; only the positions differ. Under ``--mask-unit word`` both run on the word sequence: the
    count matched is in words.
    """

    wraps_option = "matched_policy"

    def __init__(self, options=None, reference: Optional[MaskPolicy] = None):
        super().__init__(options, reference)
        if self.options.matched_policy == self.registered_name:
            raise ValueError("--matched-policy must name another policy than matched_random")
        if reference is None:
            self.inner = build_mask_policy(self.options.matched_policy)
        if self.reference.registered_name != self.options.matched_policy:
            raise ValueError(f"matched_random: the reference policy is {self.reference.registered_name!r} but "
                             f"--matched-policy names {self.options.matched_policy!r}")

    @classmethod
    def build(cls, options, wrapped=None):
        return cls(options, wrapped)

    @property
    def reference(self) -> MaskPolicy:
        """The policy whose count is matched."""
        return self.inner

    def replacement(self, tokens, maskable, side_info):
        """The run's: the positions are random ones, whatever the reference replaces its own by."""
        return None

    def choose(self, tokens, maskable, side_info, rng):
        count = int(self.reference.choose(tokens, maskable, side_info, rng).sum())
        return matched_random_mask(maskable, count, rng)
