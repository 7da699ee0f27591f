"""``--criterion joint_mlm_classification``: classification loss + weighted auxiliary MLM loss."""


import numpy as np
import torch
import torch.nn.functional as F
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.logging import metrics

from ..common.metrics import f1_from_counts
from ..models import unwrap_model, zero_gradient_term
from .logged import log_bits, summed


def class_counts(predictions, labels, num_classes: int) -> dict:
    """Per class ``c``: ``tp{c}``, ``fp{c}``, ``fn{c}`` of a batch (summed by :func:`log_f1`)."""
    out = {}
    for c in range(num_classes):
        out[f"tp{c}"] = int(((predictions == c) & (labels == c)).sum())
        out[f"fp{c}"] = int(((predictions == c) & (labels != c)).sum())
        out[f"fn{c}"] = int(((predictions != c) & (labels == c)).sum())
    return out


def log_f1(logging_outputs, micro: bool = False) -> None:
    """``macro_f1`` (and with ``micro`` also ``micro_f1``), in %, from the summed class counts."""
    classes = sorted({int(k[2:]) for log in logging_outputs for k in log if k.startswith("tp")})
    for c in classes:
        for kind in ("tp", "fp", "fn"):
            metrics.log_scalar_sum(f"_{kind}{c}", sum(log.get(f"{kind}{c}", 0) for log in logging_outputs))
    if not classes:
        return

    def counts(meters, c):  # float(): summed across workers, the counts are tensors
        return [float(meters[f"_{kind}{c}"].sum) for kind in ("tp", "fp", "fn")]

    metrics.log_derived("macro_f1", lambda meters: round(
        100.0 * sum(f1_from_counts(*counts(meters, c)) for c in classes) / len(classes), 2))
    if micro:
        metrics.log_derived("micro_f1", lambda meters: round(
            100.0 * f1_from_counts(*np.sum([counts(meters, c) for c in classes], axis=0)), 2))


@register_criterion("joint_mlm_classification")
class JointMLMClassificationCriterion(FairseqCriterion):
    """``w_cls · CE_cls / sentences + w_mlm · CE_mlm / masked tokens``.

    The weights come from the task: ``(1, --mlm-weight)``, or META-TARTAN's softmax
    weights with ``--loss-weighting tartan``. Each term is normalised by its own sample
    size, and the returned sample size is 1: fairseq divides gradients by the summed
    sample size, which then averages over micro-batches (``--update-freq``) and workers.
    Logs ``cls_loss`` (per sentence), ``mlm_loss`` (per masked token), ``accuracy`` and
    ``macro_f1`` (in %), ``w_mlm``, and with META-TARTAN the mean cosines ``cos_cls`` and
    ``cos_mlm`` between each objective's encoder gradient and the dev gradient.
    """

    def __init__(self, task):
        super().__init__(task)
        self.head = task.cfg.classification_head_name
        self.num_classes = task.cfg.num_classes
        self.pad = task.source_dictionary.pad()

    def objective_losses(self, model, sample, with_mlm=True):
        """``({"cls": CE_cls / sentences, "mlm": CE_mlm / masked tokens}, logging output)``.

        One forward through ``model`` (the data-parallel wrapper, if any) encodes the clean
        and the masked copy together; the classification head reads the clean half, the LM
        head the masked positions of the other. Without ``with_mlm`` (or without masked
        tokens) only the clean text is encoded and the MLM loss is 0, with a zero-valued
        gradient for the LM head (:func:`~fairseq_maskplug.models.zero_gradient_term`), so
        that every parameter has a gradient, as ``--ddp-backend pytorch_ddp`` needs.
        """
        inner = unwrap_model(model)
        tokens = sample["net_input"]["src_tokens"]
        mlm_tokens, mlm_target = sample["mlm"]["net_input"]["src_tokens"], sample["mlm"]["target"]
        masked = mlm_target.ne(self.pad)
        n_masked = int(masked.sum())
        labels = sample["target"].view(-1)
        if with_mlm and n_masked > 0:
            features = model(torch.cat([tokens, mlm_tokens]), features_only=True)[0]
            cls_features, mlm_features = features[:len(tokens)], features[len(tokens):]
            mlm_logits = inner.encoder.output_layer(mlm_features, masked_tokens=masked)
            mlm_loss = F.cross_entropy(mlm_logits.float(), mlm_target[masked], reduction="sum")
        else:
            cls_features = model(tokens, features_only=True)[0]
            mlm_loss = zero_gradient_term(inner.encoder.lm_head)
        logits = inner.classification_heads[self.head](cls_features)
        cls_loss = F.cross_entropy(logits.float(), labels, reduction="sum")
        predictions = logits.argmax(dim=-1)
        logging_output = {
            "cls_loss": float(cls_loss.detach()), "mlm_loss": float(mlm_loss.detach()),
            "n_masked": n_masked, "nsentences": labels.numel(), "ntokens": sample["ntokens"],
            "sample_size": 1, "ncorrect": int((predictions == labels).sum()),
        }
        logging_output.update(class_counts(predictions, labels, self.num_classes))
        return {"cls": cls_loss / labels.numel(), "mlm": mlm_loss / max(n_masked, 1)}, logging_output

    @staticmethod
    def weighted_logging(loss, weights):
        """Logging entries of the weighted loss and of the MLM weight in force."""
        return {"loss": float(loss.detach()), "w_mlm": weights["mlm"], "weighted_batches": 1}

    def forward(self, model, sample, reduce=True):
        weighting = sample["weighting"]  # the task's (its batch step attach_weighting)
        weights = weighting.weights(model)
        losses, logging_output = self.objective_losses(model, sample, with_mlm=weights["mlm"] > 0)
        loss = weighting.combined_loss(losses, weights)
        logging_output.update(self.weighted_logging(loss, weights))
        return loss, 1, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        total = summed(logging_outputs)
        sentences = total("nsentences")
        log_bits("loss", total("loss"), total("sample_size"))
        log_bits("cls_loss", total("cls_loss"), sentences)
        log_bits("mlm_loss", total("mlm_loss"), total("n_masked"))
        metrics.log_scalar("accuracy", 100.0 * total("ncorrect") / sentences, sentences, round=1)
        if total("weighted_batches"):
            metrics.log_scalar("w_mlm", total("w_mlm") / total("weighted_batches"), total("weighted_batches"),
                               round=4)
        for objective in ("cls", "mlm"):
            n = total(f"tartan_cos_{objective}_n")
            if n:
                metrics.log_scalar(f"cos_{objective}", total(f"tartan_cos_{objective}") / n, n, round=4)
        log_f1(logging_outputs)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
