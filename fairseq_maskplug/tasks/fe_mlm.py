"""``--task fe_mlm``: fully-explored masked-LM training (Zheng et al.), K disjoint views per sequence,
of the paper's uniform masks or (ours) of any mask policy that defines views."""

import dataclasses
from dataclasses import dataclass

import numpy as np
from fairseq.data import IdDataset, NestedDictionaryDataset, NumelDataset, NumSamplesDataset
from fairseq.dataclass import ChoiceEnum

from ..common.option_ranges import option
from ..data import FlatViewsDataset, FullyExploredDataset, ViewCountedDataset
from ..masking import MASK_POLICY_DATACLASS_REGISTRY, maskable_positions
from ..masking.span_masks import GeometricSpans
from ..common.progress import progress_bar
from .masked_lm_base import MaskedLMBaseTask, MaskedLMDataConfig
from .policy_options import build_task_policy, register_policy_task

#: the options of the paper's views, which a --mask-policy replaces by its own
PAPER_VIEW_OPTIONS = ("fe_mask_prob", "fe_granularity", "fe_span_p", "fe_span_max")


@dataclass
class FullyExploredMLMConfig(MaskedLMDataConfig):
    mask_policy: str = option("", "a registered mask policy whose K disjoint views replace the paper's (ours): "
                              "random (the paper's subword views at --mask-prob), span, l3 (each view has exactly "
                              "l3's distribution; needs K * max p_i <= 1), or a plugin's policy that defines "
                              "probabilities() or views(); empty: the paper's views (--fe-mask-prob, "
                              "--fe-granularity)", source="ours (no policy: the paper's views)")
    fe_views: int = option(4, "K: disjoint masked views of every sequence (paper default 4); needs K * fe_mask_prob "
                           "<= 1", range="[1, inf)", source="paper")
    fe_mask_prob: float = option(0.15, "masking ratio of each view, tau / n over the maskable tokens", range="(0, 1]",
                                 source="BERT (15%)")
    fe_granularity: ChoiceEnum(["subword", "span"]) = option("subword", "subword: each view masks tau random tokens; "
                                                             "span: tau tokens in contiguous spans",
                                                             source="paper (subword and span both studied)")
    fe_span_p: float = option(0.2, "span granularity: span lengths ~ Geometric(p) (SpanBERT: 0.2)", range="(0, 1]",
                              source="SpanBERT")
    fe_span_max: int = option(10, "span granularity: longest span (SpanBERT: 10)", range="[1, inf)", source="SpanBERT")


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

    With ``--mask-policy P`` the views are P's (:meth:`~fairseq_maskplug.masking.MaskPolicy.views`)
    and P's options set them; the paper's view options are then refused. A policy that masks
    each token independently with probability ``p_i`` (``l3``) gives views that each have
    exactly its mask distribution (``tests/test_fully_explored.py``); its ``K * max p_i <= 1``
    is checked over the whole split when it loads.
    """

    cfg: FullyExploredMLMConfig

    def __init__(self, cfg, dictionary):
        super().__init__(cfg, dictionary)  # builds the policy (MaskedLMBaseTask)
        if self.policy is None and cfg.fe_views * cfg.fe_mask_prob > 1:
            raise ValueError(f"--fe-views * --fe-mask-prob must be <= 1 (K disjoint masks), got "
                             f"{cfg.fe_views} * {cfg.fe_mask_prob}")
        self.span = GeometricSpans(cfg.fe_span_p, cfg.fe_span_max) if cfg.fe_granularity == "span" else None

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
        if self.policy is not None:
            check_view_capacity(self.policy, split, tokens, side_info, self.special_ids, self.cfg.fe_views)
        views = FullyExploredDataset(tokens, self.cfg.fe_views, self.cfg.fe_mask_prob, self.span,
                                     self.corruption, self.special_ids, pad_idx=self.dictionary.pad(),
                                     seed=self.cfg.seed, policy=self.policy, side_info=side_info)
        pad = self.dictionary.pad()
        nested = NestedDictionaryDataset(
            {
                "id": IdDataset(),
                "net_input": {"src_tokens": FlatViewsDataset(views.source, pad)},
                "target": FlatViewsDataset(views.target, pad),
                "mask_counts": views.mask_counts,
                "nsentences": NumSamplesDataset(),
                "ntokens": NumelDataset(views.source, reduce=True),
            },
            sizes=[tokens.sizes],
        )
        return ViewCountedDataset(nested, tokens.sizes, self.cfg.fe_views)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def policy_views(cfg, rate=None):
    """The policy of ``--mask-policy``, refused unless it defines views; None without one (then
    no policy option may be set: nothing would read it)."""
    if not cfg.mask_policy:
        for owner, options in MASK_POLICY_DATACLASS_REGISTRY.items():
            for f in dataclasses.fields(options) if options is not None else ():
                if getattr(cfg, f.name, f.default) != f.default:
                    raise ValueError(f"--task fe_mlm reads {flag(f.name)} only with --mask-policy {owner}; without "
                                     "a policy the views are the paper's (--fe-mask-prob, --fe-granularity)")
        return None
    policy = build_task_policy(cfg, rate)
    if not policy.defines_views():
        reason = policy.views_refused or ("it defines neither probabilities() (independent per-token choices) "
                                          "nor views(); a policy supports fe_mlm by defining one of them")
        raise ValueError(f"--task fe_mlm cannot draw K disjoint views of --mask-policy {cfg.mask_policy}: {reason}")
    defaults = {f.name: f.default for f in dataclasses.fields(FullyExploredMLMConfig)}
    set_here = [flag(n) for n in PAPER_VIEW_OPTIONS if getattr(cfg, n) != defaults[n]]
    if set_here:
        raise ValueError(f"--mask-policy {cfg.mask_policy} sets the views of --task fe_mlm, so {', '.join(set_here)} "
                         "(the paper's views) would be ignored: leave them out, and set the policy's own options")
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
    if k * largest > 1.0 + 1e-12:
        raise ValueError(f"--fe-views {k} with --mask-policy {policy.registered_name}: block {where} of split "
                         f"{split!r} masks a token with probability {largest:.4g} > 1/{k}, so {k} disjoint views "
                         f"with the policy's distribution do not exist; use --fe-views {int(1 // largest)} or "
                         f"fewer, or cap the policy's probabilities at 1/{k} (l3: --l3-max-prob {1 / k:.4g})")
