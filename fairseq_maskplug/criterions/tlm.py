"""``--criterion tlm``: TLM's losses for task and external batches (Yao et al. 2022, Sec. 3.2)."""

import math

import torch
import torch.nn.functional as F
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.logging import metrics

from ..models import unwrap_model, zero_gradient_term
from .joint_mlm_classification import class_counts, log_f1
from .logged import log_bits, summed


@register_criterion("tlm")
class TLMCriterion(FairseqCriterion):
    """Task batch: ``(ρ2 · CE_mlm/masked + CE_cls/sentences) / (ρ2 + 1)``; external batch:
    ``CE_mlm/masked + 0 · Σ classification logits``. Sample size 1 per batch.

    Logs ``loss``, ``mlm_task`` and ``mlm_external`` (per masked token), ``cls_loss`` (per
    task sentence), ``accuracy``, ``macro_f1``, ``micro_f1`` (in %), and the counts
    ``task_batches`` and ``external_batches``. A batch without a ``source`` entry
    (validation) is a task batch.
    """

    def __init__(self, task):
        super().__init__(task)
        self.head = task.cfg.classification_head_name
        self.num_classes = task.cfg.num_classes
        self.pad = task.source_dictionary.pad()
        self.rho2 = task.cfg.tlm_task_mlm_weight
        self.classify_masked = task.cfg.tlm_classify == "masked"

    def _mlm_loss(self, inner, features, target):
        masked = target.ne(self.pad)
        n_masked = int(masked.sum())
        if n_masked == 0:
            return zero_gradient_term(inner.encoder.lm_head), 0
        logits = inner.encoder.output_layer(features, masked_tokens=masked)
        return F.cross_entropy(logits.float(), target[masked], reduction="sum"), n_masked

    def external_loss(self, model, sample):
        """Plain MLM; the classification head's output times 0 keeps it in the graph."""
        inner = unwrap_model(model)
        features = model(sample["mlm"]["net_input"]["src_tokens"], features_only=True)[0]
        mlm_sum, n_masked = self._mlm_loss(inner, features, sample["mlm"]["target"])
        kept = inner.classification_heads[self.head](features).float().sum() * 0.0
        mlm = mlm_sum / max(n_masked, 1)
        loss = mlm + kept
        return loss, {"mlm_external": float(mlm_sum.detach()), "n_masked_external": n_masked,
                      "external_batches": 1}

    def task_loss(self, model, sample):
        """``(ρ2 · L_mlm + L_cls) / (ρ2 + 1)`` with one forward through ``model``."""
        inner = unwrap_model(model)
        labels = sample["target"].view(-1)
        clean, masked = sample["net_input"]["src_tokens"], sample["mlm"]["net_input"]["src_tokens"]
        if self.rho2 > 0 and self.classify_masked:  # the masked text feeds both heads
            features = model(masked, features_only=True)[0]
            cls_features, mlm_features = features, features
        elif self.rho2 > 0:  # the clean and the masked copy, concatenated
            features = model(torch.cat([clean, masked]), features_only=True)[0]
            cls_features, mlm_features = features[:len(clean)], features[len(clean):]
        else:  # classification only, on the clean text
            cls_features, mlm_features = model(clean, features_only=True)[0], None
        if mlm_features is None:
            mlm_sum, n_masked = zero_gradient_term(inner.encoder.lm_head), 0
        else:
            mlm_sum, n_masked = self._mlm_loss(inner, mlm_features, sample["mlm"]["target"])
        logits = inner.classification_heads[self.head](cls_features)
        cls_sum = F.cross_entropy(logits.float(), labels, reduction="sum")
        predictions = logits.argmax(dim=-1)
        weighting = sample["weighting"]  # the task's (its batch step attach_weighting)
        loss = weighting.combined_loss({"mlm": mlm_sum / max(n_masked, 1), "cls": cls_sum / labels.numel()},
                                       weighting.weights(model))  # (ρ2 L_mlm + L_cls) / (ρ2 + 1)
        return loss, {"cls_loss": float(cls_sum.detach()), "ncorrect": int((predictions == labels).sum()),
                      **class_counts(predictions, labels, self.num_classes), "mlm_task": float(mlm_sum.detach()),
                      "n_masked_task": n_masked, "cls_sentences": labels.numel(), "task_batches": 1}

    def forward(self, model, sample, reduce=True):
        if sample.get("source", "task") == "external":
            loss, log = self.external_loss(model, sample)
        else:
            loss, log = self.task_loss(model, sample)
        log.update({"loss": float(loss.detach()), "sample_size": 1, "nsentences": sample["nsentences"],
                    "ntokens": sample["ntokens"]})
        return loss, 1, log

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        total = summed(logging_outputs)
        batches = total("sample_size")
        metrics.log_scalar("loss", total("loss") / max(batches, 1) / math.log(2), batches, round=3)
        for source in ("task", "external"):
            log_bits(f"mlm_{source}", total(f"mlm_{source}"), total(f"n_masked_{source}"))
            metrics.log_scalar_sum(f"{source}_batches", total(f"{source}_batches"))
        sentences = total("cls_sentences")
        log_bits("cls_loss", total("cls_loss"), sentences)
        if sentences:
            metrics.log_scalar("accuracy", 100.0 * total("ncorrect") / sentences, sentences, round=1)
            log_f1(logging_outputs, micro=True)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
