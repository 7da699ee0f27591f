"""``--criterion token_importance``: weighted cross-entropy of the importance tagger (Gu et al. 2020)."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass
from fairseq.logging import metrics

from ..common.metrics import f1_from_counts
from ..common.option_ranges import option
from ..models import unwrap_model, zero_gradient_term
from .logged import log_bits, summed


@dataclass
class TokenImportanceCriterionConfig(FairseqDataclass):
    positive_class_weight: float = option(1.5, "cross-entropy weight of class 1 (important); class 0 has weight 1 "
                                          "(paper 1.5, authors' scripts 3)", range="(0, inf)",
                                          source="paper (authors' scripts: 3)")


@register_criterion("token_importance", dataclass=TokenImportanceCriterionConfig)
class TokenImportanceCriterion(FairseqCriterion):
    """Sum over labelled tokens of ``w_y * CE``, divided by the number of labelled tokens.

    Logs ``loss`` (bits per labelled token) and for class 1 ``precision``, ``recall``
    and ``f1`` (in %, from summed counts over the whole validation set).
    """

    def __init__(self, task, positive_class_weight):
        super().__init__(task)
        self.head = task.cfg.tagger_head_name
        self.weight = torch.tensor([1.0, positive_class_weight])

    def forward(self, model, sample, reduce=True):
        logits, _ = model(**sample["net_input"], features_only=True, classification_head_name=self.head)
        target = sample["target"]
        labelled = target.ge(0)
        logits, target = logits[labelled].float(), target[labelled]
        loss = F.cross_entropy(logits, target, weight=self.weight.to(logits.device), reduction="sum")
        loss = loss + zero_gradient_term(unwrap_model(model).encoder.lm_head)  # unused: see models.data_parallel
        n = int(labelled.sum())
        predicted = logits.argmax(dim=-1)
        logging_output = {
            "loss": float(loss.detach()), "ntokens": sample["ntokens"], "nsentences": sample["nsentences"],
            "sample_size": n, "n_labelled": n,
            "tp": int(((predicted == 1) & (target == 1)).sum()),
            "fp": int(((predicted == 1) & (target == 0)).sum()),
            "fn": int(((predicted == 0) & (target == 1)).sum()),
        }
        return loss, n, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        total = summed(logging_outputs)
        log_bits("loss", total("loss"), total("n_labelled"))
        for kind in ("tp", "fp", "fn"):
            metrics.log_scalar_sum(f"_{kind}", total(kind))
        # float(): summed across workers, the counts are tensors
        tp, fp, fn = (lambda m, k=k: float(m[f"_{k}"].sum) for k in ("tp", "fp", "fn"))
        metrics.log_derived("precision", lambda m: round(100.0 * tp(m) / max(tp(m) + fp(m), 1), 2))
        metrics.log_derived("recall", lambda m: round(100.0 * tp(m) / max(tp(m) + fn(m), 1), 2))
        metrics.log_derived("f1", lambda m: round(100.0 * f1_from_counts(tp(m), fp(m), fn(m)), 2))

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
