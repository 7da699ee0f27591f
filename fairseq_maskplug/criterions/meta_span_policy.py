"""``--criterion meta_span_policy``: the downstream loss after one virtual step of the seq2seq
model on the policy's spans (:mod:`fairseq_maskplug.tasks.meta_span_policy`)."""

import contextlib

import torch
import torch.nn.functional as F
from fairseq.criterions import FairseqCriterion, register_criterion
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..models import unwrap_model, zero_gradient_term
from .logged import log_bits, summed
from .lookahead import lookahead, substituted


def candidate_weights(logits: torch.Tensor, candidates: torch.Tensor):
    """``(π, entropy)``: ``softmax(start_i + end_j)`` over each row's candidates (``-1`` pads),
    flattened in row-major order of the real candidates and divided by the number of rows
    with a candidate; the entropy of each such row's π in nats."""
    valid = candidates[..., 0].ge(0)
    start = logits[..., 0].gather(1, candidates[..., 0].clamp(min=0))
    end = logits[..., 1].gather(1, candidates[..., 1].clamp(min=0))
    scores = (start + end).masked_fill(~valid, float("-inf"))
    rows = valid.any(dim=1)
    log_pi = torch.log_softmax(scores[rows], dim=1)
    pi = log_pi.exp()
    entropy = -(pi * log_pi.masked_fill(~valid[rows], 0.0)).sum(dim=1)
    return pi[valid[rows]] / rows.sum(), entropy


def mean_token_nll(model, params, net_input: dict, target: torch.Tensor, pad: int) -> torch.Tensor:
    """Per example: the mean negative log-likelihood of its target tokens under ``model`` run with ``params``."""
    with substituted(model, params):
        logits = model(**net_input)[0]
    lprobs = F.log_softmax(logits.float(), dim=-1)
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    keep = target.ne(pad)
    return (nll * keep).sum(dim=1) / keep.sum(dim=1)


@register_criterion("meta_span_policy")
class MetaSpanPolicyCriterion(FairseqCriterion):
    """Loss ``L_task(θ')`` per batch (one value, ``sample_size`` 1); the policy's gradient is
    the meta-gradient of ``--meta-gradient``."""

    def forward(self, model, sample, reduce=True):
        cfg = self.task.cfg
        logits, _ = model(**sample["net_input"], features_only=True, classification_head_name=cfg.span_head_name)
        weights, entropy = candidate_weights(logits.float(), sample["candidates"])
        seq2seq = self.task.seq2seq(logits.device)
        pad = self.task.dictionary.pad()
        pairs = sample["pairs"]
        pair_input = {k: pairs[k] for k in ("src_tokens", "src_lengths", "prev_output_tokens")}
        if model.training:
            downstream = self.task.downstream_batch("train", (sample.get("update_num") or 0,))  # prepare_batch
        else:
            downstream = self.task.downstream_batch("valid", sample["id"].tolist()[:1])
        downstream = {"net_input": {k: v.to(logits.device) for k, v in downstream["net_input"].items()},
                      "target": downstream["target"].to(logits.device)}
        # second order needs attention's math kernel: the fused ones have no double backward
        second_order = sdpa_kernel([SDPBackend.MATH]) if cfg.meta_gradient == "exact" else contextlib.nullcontext()
        with second_order:
            result = lookahead(
                dict(seq2seq.named_parameters()), weights,
                lambda params: mean_token_nll(seq2seq, params, pair_input, pairs["target"], pad),
                lambda params: mean_token_nll(seq2seq, params, downstream["net_input"], downstream["target"], pad).mean(),
                cfg.meta_inner_lr, cfg.meta_gradient, cfg.meta_fd_epsilon)
        loss = result.loss + zero_gradient_term(unwrap_model(model).encoder.lm_head)  # unused: see models.data_parallel
        logging_output = {
            "loss": float(result.loss.detach()), "task_before": float(result.task_before),
            "inner": float(result.inner),
            "entropy_sum": float(entropy.detach().sum()), "rows": int(entropy.numel()), "batches": 1,
            "ntokens": sample["ntokens"], "nsentences": sample["nsentences"], "sample_size": 1,
        }
        return loss, 1, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        total = summed(logging_outputs)
        batches = total("batches")
        log_bits("loss", total("loss"), batches, round=4)
        log_bits("task_before", total("task_before"), batches, round=4)
        log_bits("gain", total("task_before") - total("loss"), batches, round=5)
        log_bits("inner", total("inner"), batches)
        log_bits("entropy", total("entropy_sum"), total("rows"))

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
