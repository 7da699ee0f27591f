"""``--task fe_mlm``: fully-explored masked-LM training (Zheng et al.), K disjoint views per sequence."""

from dataclasses import dataclass, field

import numpy as np
from fairseq.data import IdDataset, NestedDictionaryDataset, NumelDataset, NumSamplesDataset
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task

from ..data import FlatViewsDataset, FullyExploredDataset, ViewCountedDataset
from ..masking.spans import GeometricSpans
from .masked_lm_base import MaskedLMBaseTask, MaskedLMDataConfig


@dataclass
class FullyExploredMLMConfig(MaskedLMDataConfig):
    fe_views: int = field(default=4, metadata={
        "range": "[1, inf)",
        "help": "K: disjoint masked views of every sequence (paper default 4); needs K * fe_mask_prob <= 1"})
    fe_mask_prob: float = field(default=0.15, metadata={
        "range": "(0, 1]", "help": "masking ratio of each view, tau / n over the maskable tokens"})
    fe_granularity: ChoiceEnum(["subword", "span"]) = field(default="subword", metadata={
        "help": "subword: each view masks tau random tokens; span: tau tokens in contiguous spans"})
    fe_span_p: float = field(default=0.2, metadata={
        "range": "(0, 1]", "help": "span granularity: span lengths ~ Geometric(p) (SpanBERT: 0.2)"})
    fe_span_max: int = field(default=10, metadata={
        "range": "[1, inf)", "help": "span granularity: longest span (SpanBERT: 10)"})


@register_task("fe_mlm", dataclass=FullyExploredMLMConfig)
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
    """

    cfg: FullyExploredMLMConfig

    def __init__(self, cfg, dictionary):
        super().__init__(cfg, dictionary)
        if cfg.fe_views * cfg.fe_mask_prob > 1:
            raise ValueError(f"--fe-views * --fe-mask-prob must be <= 1 (K disjoint masks), got "
                             f"{cfg.fe_views} * {cfg.fe_mask_prob}")
        self.span = GeometricSpans(cfg.fe_span_p, cfg.fe_span_max) if cfg.fe_granularity == "span" else None

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
        views = FullyExploredDataset(tokens, self.cfg.fe_views, self.cfg.fe_mask_prob, self.span,
                                     self.corruption, self.special_ids, pad_idx=self.dictionary.pad(),
                                     seed=self.cfg.seed)
        pad = self.dictionary.pad()
        nested = NestedDictionaryDataset(
            {
                "id": IdDataset(),
                "net_input": {"src_tokens": FlatViewsDataset(views.source, pad)},
                "target": FlatViewsDataset(views.target, pad),
                "nsentences": NumSamplesDataset(),
                "ntokens": NumelDataset(views.source, reduce=True),
            },
            sizes=[tokens.sizes],
        )
        return ViewCountedDataset(nested, tokens.sizes, self.cfg.fe_views)
