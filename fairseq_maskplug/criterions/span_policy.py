"""``--criterion span_policy``: start/end cross-entropy of an extractive span scorer
(BERT for SQuAD, Devlin et al. 2019 §4.2), the loss of the supervised masking policy."""


import torch
import torch.nn.functional as F
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.logging import metrics

from ..models import unwrap_model, zero_gradient_term
from .logged import log_bits, summed


def position_mask(tokens: torch.Tensor, special_ids) -> torch.Tensor:
    """True where a span may start or end: not ``<s>``, ``</s>`` or padding."""
    allowed = torch.ones_like(tokens, dtype=torch.bool)
    for special in special_ids:
        allowed &= tokens.ne(special)
    return allowed


def top_spans(start: torch.Tensor, end: torch.Tensor, allowed: torch.Tensor, max_length: int) -> torch.Tensor:
    """``(B, 2)``: the arg-max of ``start_i + end_j`` over ``i <= j < i + max_length``, both
    allowed (one sentence per item, so this is the ``learned_span`` policy's top-1)."""
    T = start.size(1)
    i = torch.arange(T, device=start.device)
    width = i[None, :] - i[:, None]  # width[i, j] = j - i
    ok = (width >= 0) & (width < max_length)
    ok = ok[None] & allowed[:, :, None] & allowed[:, None, :]
    scores = (start[:, :, None] + end[:, None, :]).masked_fill(~ok, float("-inf"))
    flat = scores.view(scores.size(0), -1).argmax(dim=1)
    return torch.stack([flat // T, flat % T], dim=1)


@register_criterion("span_policy")
class SpanPolicyCriterion(FairseqCriterion):
    """``(CE(start) + CE(end)) / 2`` per context, softmax over its allowed positions.

    Logs ``loss`` (bits per context), ``start_acc`` and ``end_acc`` (arg-max position
    right, in %) and ``span_em`` (the top-1 span within ``--answer-max-length`` is the
    answer, in %).
    """

    def __init__(self, task):
        super().__init__(task)
        d = task.source_dictionary
        self.special_ids = (d.bos(), d.eos(), d.pad())

    def forward(self, model, sample, reduce=True):
        head = self.task.cfg.span_head_name
        logits, _ = model(**sample["net_input"], features_only=True, classification_head_name=head)
        tokens = sample["net_input"]["src_tokens"]
        allowed = position_mask(tokens, self.special_ids)
        logits = logits.float().masked_fill(~allowed[:, :, None], float("-inf"))
        start, end = logits[..., 0], logits[..., 1]
        gold = sample["target"]
        loss = (F.cross_entropy(start, gold[:, 0], reduction="sum")
                + F.cross_entropy(end, gold[:, 1], reduction="sum")) / 2
        loss = loss + zero_gradient_term(unwrap_model(model).encoder.lm_head)  # unused: see models.data_parallel
        n = gold.size(0)
        with torch.no_grad():
            top = top_spans(start, end, allowed, self.task.cfg.answer_max_length)
            logging_output = {
                "loss": float(loss.detach()), "ntokens": sample["ntokens"], "nsentences": n, "sample_size": n,
                "start_right": int((start.argmax(1) == gold[:, 0]).sum()),
                "end_right": int((end.argmax(1) == gold[:, 1]).sum()),
                "span_right": int((top == gold).all(dim=1).sum()),
            }
        return loss, n, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        total = summed(logging_outputs)
        n = total("nsentences")
        log_bits("loss", total("loss"), n)
        if n:
            for key, name in (("start_right", "start_acc"), ("end_right", "end_acc"), ("span_right", "span_em")):
                metrics.log_scalar(name, 100.0 * total(key) / n, n, round=2)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
