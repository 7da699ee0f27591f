"""``--criterion self_evolution``: the masked-LM loss with Self-Evolution learning's token-specific label
smoothing (Zhong et al., Findings of ACL 2023, Sec. 3.2; the authors' ``SE4PLMs`` ``cross_entropy.py``).

The target of each predicted position is ``(1 - a) * one-hot(y) + a * q``, where ``q`` is the model's own
distribution at that position when it reads the sentence **unmasked** (the original tokens put back at
the predicted positions), and ``a`` is ``--se-smoothing`` (0.1, the authors' constant). The loss is the
cross entropy against that target, summed over the predicted positions, as fairseq's ``masked_lm``
sums its own; ``--se-smoothing 0`` is fairseq's ``masked_lm`` loss.

The unmasked reading is a second forward pass, done without gradients through the model inside
fairseq's data-parallel wrapper (:func:`~fairseq_maskplug.models.unwrap_model`): the wrapper sees one
forward per step, so the default ``pytorch_ddp`` backend trains as with ``masked_lm``. It runs in **eval
mode** (no dropout), as the authors' criterion switches the model to ``eval()`` for it and back to ``train()``
after; the model's mode is restored whatever it was.

Normalisation: the loss is summed over the predicted positions and fairseq divides the gradient by their
number (``sample_size``), as its ``masked_lm`` does; the authors' criterion divides by ``ntokens`` (every
token of the batch), which scales the gradient by the mask rate (about 0.15) and is otherwise the same
direction. Where the update size matters, a learning rate about 0.15 times ours reproduces theirs.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass
from fairseq.logging import metrics

from ..common.option_ranges import option
from ..models import unwrap_model
from .logged import summed


@dataclass
class SelfEvolutionCriterionConfig(FairseqDataclass):
    se_smoothing: float = option(0.1, "self_evolution criterion: weight of the model's own prediction on the "
                                 "unmasked input in each predicted position's target (0: masked_lm's loss)",
                                 range="[0, 1)", source="authors' code (cross_entropy.py)")


def smoothed_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, clean_probs: torch.Tensor,
                           smoothing: float) -> tuple:
    """``(loss, nll)``, both summed over rows: the cross entropy of ``logits`` (rows x vocabulary) against
    ``(1 - smoothing) * one-hot(targets) + smoothing * clean_probs``, and the plain one against ``targets``."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must lie in [0, 1), got {smoothing}")
    if clean_probs.shape != logits.shape:
        raise ValueError(f"clean_probs has shape {tuple(clean_probs.shape)}, the logits {tuple(logits.shape)}")
    lprobs = F.log_softmax(logits.float(), dim=-1)
    nll = -lprobs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    soft = -(clean_probs.float() * lprobs).sum(dim=-1)
    return ((1.0 - smoothing) * nll + smoothing * soft).sum(), nll.sum()


@register_criterion("self_evolution", dataclass=SelfEvolutionCriterionConfig)
class SelfEvolutionCriterion(FairseqCriterion):
    """Masked-LM cross entropy against Self-Evolution's smoothed targets (the module docstring). Logs
    ``loss`` (smoothed) and ``nll_loss`` (masked_lm's), both in bits per predicted position."""

    def __init__(self, task, se_smoothing: float):
        super().__init__(task)
        self.smoothing = se_smoothing

    def forward(self, model, sample, reduce=True):
        target = sample["target"]
        masked = target.ne(self.padding_idx)
        sample_size = masked.int().sum()
        # as fairseq's masked_lm: a batch with nothing masked projects every position (pads then ignored)
        if masked.device == torch.device("cpu"):
            asked = masked if masked.any() else None
        else:
            asked = torch.where(masked.any(), masked, masked.new([True]))
        logits = model(**sample["net_input"], masked_tokens=asked)[0]
        targets = target if asked is None else target[asked]
        logits, targets = logits.view(-1, logits.size(-1)), targets.view(-1)
        keep = targets.ne(self.padding_idx)
        if self.smoothing > 0:
            clean = torch.where(masked, target, sample["net_input"]["src_tokens"])
            inner = unwrap_model(model)
            training = inner.training
            inner.eval()  # the target's pass without dropout, as the authors' criterion
            try:
                with torch.no_grad():
                    clean_logits = inner(**dict(sample["net_input"], src_tokens=clean), masked_tokens=asked)[0]
            finally:
                inner.train(training)
            clean_probs = F.softmax(clean_logits.view(-1, clean_logits.size(-1)).float(), dim=-1)
        else:
            clean_probs = torch.zeros_like(logits, dtype=torch.float32)
        loss, nll = smoothed_cross_entropy(logits[keep], targets[keep], clean_probs[keep], self.smoothing)
        logging_output = {"loss": loss.data, "nll_loss": nll.data, "ntokens": sample["ntokens"],
                          "nsentences": sample["nsentences"], "sample_size": sample_size}
        return loss, sample_size, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        total = summed(logging_outputs)
        size = total("sample_size")
        if size:  # (a batch that masked nothing: the task stops the epoch that trains on nothing)
            metrics.log_scalar("loss", total("loss") / size / math.log(2), size, round=3)
            metrics.log_scalar("nll_loss", total("nll_loss") / size / math.log(2), size, round=3)
            metrics.log_derived("ppl", lambda meters: utils.get_perplexity(meters["nll_loss"].avg))

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
