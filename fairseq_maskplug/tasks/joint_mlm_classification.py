"""``--task joint_mlm_classification``: fine-tuning with an auxiliary masked-LM objective.

L3Masking (Kimura et al.) and TARTAN (Dery et al.): while a roberta encoder is
fine-tuned on a classification task, the same task texts also feed a masked-LM loss
whose masks come from any registered policy (``random`` = the paper's RTM, ``l3``, ...).
The two losses are weighted either by fixed weights or the META-TARTAN way
(``--loss-weighting tartan``, see :mod:`fairseq_maskplug.weighting.meta_tartan`).

:class:`ClassificationMLMTask` is what it shares with ``--task tlm`` (the sentence_prediction
layout, the classification head, the policy-masked copy, the objectives ``cls`` and ``mlm`` and
their weighting component, :mod:`fairseq_maskplug.weighting.objectives`); each task adds only
its own options.
"""

import dataclasses
import os
from dataclasses import dataclass

import numpy as np
import torch
from fairseq import utils
from fairseq.data import (FairseqDataset, IdDataset, NestedDictionaryDataset, NumelDataset,
                          NumSamplesDataset, RightPadDataset)
from fairseq.dataclass import ChoiceEnum
from fairseq.optim.amp_optimizer import AMPOptimizer
from omegaconf import MISSING

from ..common.option_ranges import option
from ..data import PolicyMaskedDataset
from ..data.classification import label_names, load_class_indices
from ..data.dictionaries import load_dictionary
from ..data.layout import required_data, sentence_prediction_dir
from ..models import unwrap_model
from ..weighting import FixedWeights, MetaTartanTraining
from .masked_lm_base import MaskedLMBaseTask, MaskingConfig
from .policy_options import register_policy_task
from .sentence_items import build_model_for_items, sentence_blocking

OBJECTIVES = ("cls", "mlm")


@dataclass
class ClassificationMLMConfig(MaskingConfig):
    """What every classification + MLM task reads (``joint_mlm_classification``, ``tlm``)."""
    data: str = option(MISSING, "sentence_prediction data root (input0/ with the texts and their side information, "
                       "label/); its input0/ is accepted too")
    num_classes: int = option(2, "number of classes", range="[2, inf)", source="fairseq (sentence_prediction)")
    mask_policy: str = option("random", "policy of the auxiliary MLM (random = RTM; l3 needs a PLT track from "
                              "preprocess.score_pll)", source="paper (L3Masking's baseline: RTM)")
    classification_head_name: str = option("sentence_classification_head", "name of the classification head (as "
                                           "fairseq sentence_prediction)")


@dataclass
class JointConfig(ClassificationMLMConfig):
    mlm_weight: float = option(1.0, "with --loss-weighting fixed: weight of the auxiliary MLM loss (0: "
                               "classification only, STL); the classification loss has weight 1; each loss is first "
                               "normalised by its own sample size", range="[0, inf)", source="ours (equal weights)")
    loss_weighting: ChoiceEnum(["fixed", "tartan"]) = option("fixed", "fixed: loss = L_cls + mlm_weight * L_mlm; "
                                                             "tartan: META-TARTAN, loss = w_cls L_cls + w_mlm L_mlm "
                                                             "with w = softmax(lambda), lambda_k += tartan_meta_lr * "
                                                             "cos(g_dev, g_k) after every update (g: gradients over "
                                                             "the encoder; g_dev from a dev head fitted on dev data)",
                                                             source="ours (the authors use tartan)")
    tartan_meta_lr: float = option(0.01, "META-TARTAN: learning rate of the weight logits (authors: --meta-lr-weight "
                                   "1e-2)", range="(0, inf)", source="authors' code")
    tartan_dev_subset: str = option("valid", "META-TARTAN: labelled split the dev head and dev gradient are drawn "
                                    "from (the authors use the validation set, which then also selects checkpoints)",
                                    source="authors' code")
    tartan_dev_fit_size: int = option(32, "META-TARTAN: dev sentences the dev head is fitted on, per step (authors: "
                                      "--dev_batch_sz 32)", range="[1, inf)", source="authors' code")
    tartan_dev_batch_size: int = option(64, "META-TARTAN: further dev sentences the dev gradient is computed on "
                                        "(authors: 64)", range="[1, inf)", source="authors' code")
    tartan_dev_head_steps: int = option(10, "META-TARTAN: AdamW steps fitting the fresh dev head (authors: "
                                        "--classf_ft_iters 10)", range="[1, inf)", source="authors' code")
    tartan_dev_head_lr: float = option(1e-3, "META-TARTAN: dev head learning rate (authors: --classf_dev_lr 1e-3)",
                                       range="(0, inf)", source="authors' code")
    tartan_dev_head_weight_decay: float = option(0.1, "META-TARTAN: dev head weight decay (authors: --classf_dev_wd "
                                                 "0.1)", range="[0, inf)", source="authors' code")


class ClassificationMLMTask(MaskedLMBaseTask):
    """Classification + MLM on the same texts, in fairseq's sentence_prediction layout (a base).

    Data: ``DATA/input0/`` (texts, ``dict.txt``, side information such as
    ``train.plt``) and ``DATA/label/`` (labels and their ``dict.txt``), as written by
    ``fairseq-preprocess`` for ``sentence_prediction``. Each line is one item (``<s>`` +
    line, shortened to ``tokens_per_sample``); the classifier sees the clean text, the
    MLM the policy-masked copy. The objectives ``cls`` and ``mlm`` are combined by
    :attr:`weighting` (:meth:`build_weighting`, :mod:`fairseq_maskplug.weighting.objectives`).
    """

    cfg: ClassificationMLMConfig

    def __init__(self, cfg, dictionary, label_dictionary):
        super().__init__(cfg, dictionary)  # options in range
        n_labels = len(label_names(label_dictionary))
        if n_labels != cfg.num_classes:
            raise ValueError(f"{cfg.data}/label/dict.txt has {n_labels} labels but --num-classes is "
                             f"{cfg.num_classes}")
        self.label_dictionary = label_dictionary
        self.weighting = self.build_weighting()
        self.batch_steps.append(self.attach_weighting)

    def build_weighting(self):
        """The weighting component of the objectives ``cls`` and ``mlm``."""
        raise NotImplementedError

    def attach_weighting(self, sample, update_num) -> dict:
        """A batch step: the sample carries :attr:`weighting` (``sample["weighting"]``), from which the
        criterion takes the weights in force and combines the objectives' losses (``combined_loss``)."""
        sample["weighting"] = self.weighting
        return {}

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        cfg.data = sentence_prediction_dir(required_data(cfg))  # its input0/: the root
        dicts = [load_dictionary(os.path.join(cfg.data, sub), "--data with the sentence_prediction layout "
                                 "(input0/, label/): input0/ and label/")
                 for sub in ("input0", "label")]
        return cls(cfg, *dicts)

    sort_by_length = False  # as fairseq sentence_prediction

    def blocking_cfg(self):
        """One sentence per item from ``DATA/input0``, shortened to ``tokens_per_sample``."""
        return sentence_blocking(os.path.join(self.cfg.data, "input0"), self.cfg.tokens_per_sample, self.cfg.seed,
                                 self.cfg.side_info_without_fingerprint,
                                 self.cfg.verify_data)

    def build_inputs(self, split, tokens, side_info):
        classes = load_class_indices(self.cfg.data, split, self.label_dictionary, self.cfg.num_classes, len(tokens))
        pad = self.dictionary.pad()
        return NestedDictionaryDataset(
            {
                "id": IdDataset(),
                "net_input": {"src_tokens": RightPadDataset(tokens, pad_idx=pad),
                              "src_lengths": NumelDataset(tokens, reduce=False)},
                "mlm": self.mlm_inputs(tokens, side_info),
                "target": _Labels(classes),
                "nsentences": NumSamplesDataset(),
                "ntokens": NumelDataset(tokens, reduce=True),
            },
            sizes=[tokens.sizes],
        )

    def mlm_inputs(self, tokens, side_info) -> PolicyMaskedDataset:
        """An item's ``mlm`` entry: its policy-masked copy, collated as a masked-LM batch (``net_input``,
        ``target``, ``mask_counts``)."""
        return PolicyMaskedDataset(tokens, side_info, self.policy, self.corruption, self.special_ids,
                                   pad_idx=self.dictionary.pad(), seed=self.cfg.seed)

    def build_model(self, cfg, from_checkpoint=False):
        model = build_model_for_items(self, cfg, from_checkpoint)
        model.register_classification_head(self.cfg.classification_head_name, num_classes=self.cfg.num_classes)
        return model

    def mlm_sample(self, sample):
        return sample["mlm"]


@register_policy_task("joint_mlm_classification", dataclass=JointConfig)
class JointMLMClassificationTask(ClassificationMLMTask):
    """Classification + auxiliary MLM (L3Masking, TARTAN), weighted by fixed weights or META-TARTAN.
    Use with ``--criterion joint_mlm_classification``."""

    cfg: JointConfig
    criteria = ("joint_mlm_classification",)

    def __init__(self, cfg, dictionary, label_dictionary):
        if cfg.loss_weighting == "tartan" and cfg.mlm_weight != 1.0:
            raise ValueError("--mlm-weight applies to --loss-weighting fixed; with tartan the weights are learned")
        if cfg.loss_weighting == "fixed":
            tartan_set = [f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(JointConfig)
                          if f.name.startswith("tartan_") and getattr(cfg, f.name) != f.default]
            if tartan_set:
                raise ValueError(f"{', '.join(tartan_set)} appl{'ies' if len(tartan_set) == 1 else 'y'} to "
                                 f"--loss-weighting tartan; with fixed weights leave "
                                 f"{'it' if len(tartan_set) == 1 else 'them'} out")
        super().__init__(cfg, dictionary, label_dictionary)

    def build_weighting(self):
        """``{cls: 1, mlm: --mlm-weight}``, or META-TARTAN's softmax weights (``--loss-weighting tartan``)."""
        cfg = self.cfg
        if cfg.loss_weighting == "tartan":
            return MetaTartanTraining(OBJECTIVES, cfg.seed, cfg.tartan_meta_lr, cfg.tartan_dev_head_steps,
                                      cfg.tartan_dev_head_lr, cfg.tartan_dev_head_weight_decay)
        return FixedWeights({"cls": 1.0, "mlm": cfg.mlm_weight})

    @property
    def tartan(self):
        """The META-TARTAN weighting, or None with fixed weights."""
        return self.weighting if isinstance(self.weighting, MetaTartanTraining) else None

    def build_inputs(self, split, tokens, side_info):
        if self.tartan is not None and split == self.cfg.tartan_dev_subset:  # refused when loaded, before training
            self._check_dev_size(split, len(tokens))
        return super().build_inputs(split, tokens, side_info)

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        if self.tartan is not None:
            self.tartan.attach(model)
        return model

    def optimization_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        if self.tartan is None:
            return super().optimization_step(sample, model, criterion, optimizer, update_num, ignore_grad)
        return self._tartan_step(sample, model, criterion, optimizer, update_num, ignore_grad)

    def _tartan_step(self, sample, model, criterion, optimizer, update_num, ignore_grad):
        """One micro-batch of META-TARTAN (:class:`~fairseq_maskplug.weighting.MetaTartanTraining`), prepared as
        every other train step's (:meth:`prepare_batch`: ``--mask-prob-schedule`` thins its masks first)."""
        model.train()
        model.set_num_updates(update_num)
        weights = self.weighting.weights(model)
        with torch.autocast("cuda", enabled=isinstance(optimizer, AMPOptimizer)):
            losses, logging_output = criterion.objective_losses(model, sample, with_mlm=True)
        loss = self.weighting.combined_loss(losses, weights)
        logging_output.update(criterion.weighted_logging(loss, weights))
        if ignore_grad:
            optimizer.backward(loss * 0)
            return loss, 1, logging_output
        inner = unwrap_model(model)
        cosines = self.tartan.backward(model, optimizer, losses, weights, update_num, self._dev_batches,
                                       inner.classification_heads[self.cfg.classification_head_name],
                                       list(inner.encoder.sentence_encoder.parameters()))
        for k, c in zip(OBJECTIVES, cosines):
            logging_output[f"tartan_cos_{k}"] = 0.0 if c is None else c
            logging_output[f"tartan_cos_{k}_n"] = int(c is not None)
        return loss, 1, logging_output

    def _check_dev_size(self, split, items: int) -> None:
        needed = self.cfg.tartan_dev_fit_size + self.cfg.tartan_dev_batch_size
        if items < needed:
            raise ValueError(f"--tartan-dev-subset {split} has {items} items, fewer than "
                             f"--tartan-dev-fit-size + --tartan-dev-batch-size = {needed}")

    def _dev_batches(self, seed, device):
        """Two disjoint random batches of the dev subset, drawn with ``seed``: the dev head's fit
        batch and the probe batch."""
        split = self.cfg.tartan_dev_subset
        if split not in self.datasets:
            self.load_dataset(split)
        dataset = self.datasets[split]
        sizes = (self.cfg.tartan_dev_fit_size, self.cfg.tartan_dev_batch_size)
        self._check_dev_size(split, len(dataset))
        order = np.random.default_rng(seed).choice(len(dataset), size=sum(sizes), replace=False)
        batches = []
        for chosen in (order[:sizes[0]], order[sizes[0]:]):
            batch = dataset.collater([dataset[int(i)] for i in chosen])
            batches.append(utils.apply_to_sample(lambda t: t.to(device), batch))
        return batches

    def optimizer_step(self, optimizer, model, update_num):
        """The parameter update, then (META-TARTAN) the weight update from the update's mean cosines."""
        super().optimizer_step(optimizer, model, update_num)
        if self.tartan is not None:
            self.tartan.update_weights(model)


class _Labels(FairseqDataset):
    """One class index per item (collated into a 1-D tensor)."""

    def __init__(self, classes: np.ndarray):
        self.classes = torch.from_numpy(np.asarray(classes, dtype=np.int64))

    def __getitem__(self, index):
        return self.classes[index]

    def __len__(self):
        return len(self.classes)

    def collater(self, samples):
        return torch.stack(samples)
