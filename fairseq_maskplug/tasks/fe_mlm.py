"""``--task fe_mlm``: fully-explored masked-LM training (Zheng et al.), K disjoint views per sequence of a mask
policy's masks: ``random`` (the default) and ``span`` draw the paper's views, other policies that define views
(ours) theirs."""

from dataclasses import dataclass

import numpy as np

from ..common.option_ranges import option
from ..data import PolicyMaskedDataset
from ..masking import maskable_positions
from ..masking.fully_explored import views_fit
from ..common.progress import progress_bar
from .masked_lm_base import MaskedLMBaseTask, MaskedLMDataConfig
from .policy_options import build_task_policy, register_policy_task


@dataclass
class FullyExploredMLMConfig(MaskedLMDataConfig):
    mask_policy: str = option("random", "the mask policy whose K disjoint views every sequence gets: random (the "
                              "paper's subword views, tau = floor(--mask-prob * n + U) tokens each), span (the "
                              "paper's span views: --span-mask-prob, --span-geometric-p, --span-max-length), l3 (each "
                              "view has exactly l3's distribution; needs K * max p_i <= 1), pmi, or a plugin's policy "
                              "that defines probabilities() or views()", source="paper (subword views)")
    fe_views: int = option(4, "K: disjoint masked views of every sequence (paper default 4); needs K times the "
                           "policy's rate <= 1", range="[1, inf)", source="paper")


@register_policy_task("fe_mlm", dataclass=FullyExploredMLMConfig)
class FullyExploredMLMTask(MaskedLMBaseTask):
    """Every sequence becomes K views, each masking a disjoint set of tau tokens (Eq. 10).

    The K views of a sequence sit in the same batch, so with fairseq's ``masked_lm``
    criterion (loss summed over masked tokens, divided by their number) and equal
    tau per view, a sequence's gradient is the mean of its K views' gradients (Eq. 6).

    Compute accounting: ``--batch-size B`` counts *sequences*, so a batch holds
    ``B * K`` rows; ``--max-tokens`` counts the tokens of all K views. FE-MLM with
    ``--batch-size B`` therefore costs what ``guided_mlm`` with ``--batch-size B*K``
    costs (or use the same ``--max-tokens`` for both). Logged ``wpb``/``wps`` count view
    tokens, ``bsz`` counts sequences, and ``masks_per_seq``/``seq_unmasked`` count views.

    The views are those of ``--mask-policy P`` (:meth:`~fairseq_maskplug.masking.MaskPolicy.views`), and P's
    options set them: ``random`` (the default) draws the paper's subword views and ``span`` its span views.
    A policy that masks each token independently with probability ``p_i`` (``l3``) gives views that each
    have exactly its mask distribution (``tests/test_fully_explored.py``); its ``K * max p_i <= 1`` is
    checked over the whole split when it loads. The paper's own flags (``--fe-mask-prob``,
    ``--fe-granularity``, ``--fe-span-p``, ``--fe-span-max``) are gone: ``fairseq-maskplug-train`` names
    their replacements, and checkpoints saved with them load with their meaning
    (:mod:`~fairseq_maskplug.integration.renamed_options`).
    """

    cfg: FullyExploredMLMConfig

    def build_policy(self, cfg, rate=None):
        return policy_views(cfg, rate)

    def build_inputs(self, split, tokens, side_info):
        if self.cfg.sample_break_mode == "eos":
            # a block is <s> + line + </s>: fewer than K tokens cannot hold K non-empty views, and a
            # batch of such lines has no masked token at all (fairseq then logs a nan loss)
            short = int(np.sum(np.asarray(tokens.sizes, dtype=np.int64) - 2 < self.cfg.fe_views))
            if short:
                raise ValueError(f"--fe-views {self.cfg.fe_views} with --sample-break-mode eos: {short} of "
                                 f"{len(tokens)} lines of split {split!r} have fewer than {self.cfg.fe_views} "
                                 "tokens and cannot hold that many views; use --sample-break-mode complete, "
                                 "fewer --fe-views, or leave the short lines out of the data")
        check_view_capacity(self.policy, split, tokens, side_info, self.special_ids, self.cfg.fe_views)
        return PolicyMaskedDataset(tokens, side_info, self.policy, self.corruption, self.special_ids,
                                   pad_idx=self.dictionary.pad(), seed=self.cfg.seed, views=self.cfg.fe_views)


def policy_views(cfg, rate=None):
    """The policy of ``--mask-policy``, refused unless it defines views, and unless ``--fe-views`` K views at its
    rate fit (:func:`checked_views_policy`)."""
    return checked_views_policy(build_task_policy(cfg, rate), cfg.mask_policy, cfg.fe_views)


def checked_views_policy(policy, name: str, k: int):
    """``policy`` (registered as ``name``), refused unless it defines views, and unless ``k`` views at its rate
    fit (:func:`~fairseq_maskplug.masking.fully_explored.views_fit`; per-token probabilities are checked over each
    split when it loads, :func:`check_view_capacity`). The task's and the Hugging Face collator's one check."""
    if not policy.defines_views():
        reason = policy.views_refused or ("it defines neither probabilities() (independent per-token choices) "
                                          "nor views(); a policy supports fe_mlm by defining one of them")
        raise ValueError(f"--task fe_mlm cannot draw K disjoint views of --mask-policy {name}: {reason}")
    rate_option = policy.rate_option
    given = None if rate_option is None else getattr(policy.options, rate_option)
    if given is not None and not views_fit(k, given):
        raise ValueError(f"--fe-views {k} with --{rate_option.replace('_', '-')} {given:g}: K disjoint "
                         f"views need K * rate <= 1; use --fe-views {max(1, int(1 // given))} or fewer, or a lower "
                         "rate")
    return policy


def check_view_capacity(policy, split, tokens, side_info, special_ids, k: int) -> None:
    """Refuse, before training, a split whose views cannot be drawn: for a policy with per-token
    probabilities, any block with ``k * p_i > 1`` (scanned over the whole split, naming the largest
    ``p_i``); for any other, the views of the first block (a rate too high for k views fails there)."""
    first = tokens[0].numpy()
    first_side = {n: d[0].numpy() for n, d in side_info.items()}
    if policy.probabilities(first, maskable_positions(first, special_ids), first_side) is None:  # none per token
        try:
            policy.views(first, maskable_positions(first, special_ids), first_side, np.random.default_rng(0), k)
        except ValueError as error:
            raise ValueError(f"--fe-views {k} with --mask-policy {policy.registered_name}: {error}") from None
        return
    largest, where = 0.0, None
    for i in progress_bar(range(len(tokens)), desc=f"fe_mlm: checking {split}'s mask probabilities", unit="block",
                          disable=len(tokens) < 10000):
        block = tokens[i].numpy()
        p = policy.probabilities(block, maskable_positions(block, special_ids),
                                 {n: d[i].numpy() for n, d in side_info.items()})
        if p.size and float(p.max()) > largest:
            largest, where = float(p.max()), i
    if not views_fit(k, largest):
        raise ValueError(f"--fe-views {k} with --mask-policy {policy.registered_name}: block {where} of split "
                         f"{split!r} masks a token with probability {largest:.4g} > 1/{k}, so {k} disjoint views "
                         f"with the policy's distribution do not exist; use --fe-views {int(1 // largest)} or "
                         f"fewer, or cap the policy's probabilities at 1/{k} (l3: --l3-max-prob {1 / k:.4g})")
