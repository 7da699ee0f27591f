"""``--task joint_mlm_classification``: fine-tuning with an auxiliary masked-LM objective.

L3Masking (Kimura et al.) and TARTAN (Dery et al.): while a roberta encoder is
fine-tuned on a classification task, the same task texts also feed a masked-LM loss
whose masks come from any registered policy (``random`` = the paper's RTM, ``l3``, ...).
"""

import contextlib
import os
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch
from fairseq.data import (BaseWrapperDataset, Dictionary, IdDataset, NestedDictionaryDataset, NumelDataset,
                          NumSamplesDataset, OffsetTokensDataset, RightPadDataset, StripTokenDataset, data_utils)
from omegaconf import OmegaConf, open_dict

from ..data import PolicyMaskedDataset
from ..masking import build_mask_policy
from .masked_lm_base import MaskedLMBaseTask, MaskingConfig
from .policy_options import register_policy_task


@dataclass
class JointConfig(MaskingConfig):
    num_classes: int = field(default=2, metadata={"help": "number of classes"})
    mask_policy: str = field(default="random", metadata={
        "help": "policy of the auxiliary MLM (random = RTM; l3 needs a PLT track from preprocess.score_pll)"})
    mlm_weight: float = field(default=1.0, metadata={
        "help": "weight of the auxiliary MLM loss (0: classification only, STL); the classification "
                "loss has weight 1; each loss is first normalised by its own sample size"})
    classification_head_name: str = field(default="sentence_classification_head", metadata={
        "help": "name of the classification head (as fairseq sentence_prediction)"})


@register_policy_task("joint_mlm_classification", dataclass=JointConfig)
class JointMLMClassificationTask(MaskedLMBaseTask):
    """Classification + auxiliary MLM on the same texts, in fairseq's sentence_prediction layout.

    Data: ``DATA/input0/`` (texts, ``dict.txt``, side information such as
    ``train.plt``) and ``DATA/label/`` (labels and their ``dict.txt``), as written by
    ``fairseq-preprocess`` for ``sentence_prediction``. Each line is one item (``<s>`` +
    line, shortened to ``tokens_per_sample``); the classifier sees the clean text, the
    MLM the policy-masked copy. Use with ``--criterion joint_mlm_classification``.
    """

    cfg: JointConfig

    def __init__(self, cfg, dictionary, label_dictionary):
        super().__init__(cfg, dictionary)
        self.label_dictionary = label_dictionary
        self.policy = build_mask_policy(cfg.mask_policy, cfg)

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        dicts = []
        for sub in ("input0", "label"):
            path = os.path.join(cfg.data, sub, "dict.txt")
            if not os.path.exists(path):
                raise FileNotFoundError(f"{path} not found: --data needs the sentence_prediction layout "
                                        "(input0/ and label/)")
            dicts.append(Dictionary.load(path))
        # fairseq-preprocess pads dictionaries to a multiple of 8 with "madeupword" symbols
        n_labels = sum(not s.startswith("madeupword") for s in dicts[1].symbols[dicts[1].nspecial:])
        if n_labels != cfg.num_classes:
            raise ValueError(f"{cfg.data}/label/dict.txt has {n_labels} labels but --num-classes is "
                             f"{cfg.num_classes}")
        return cls(cfg, *dicts)

    @property
    def side_info_names(self):
        return self.policy.side_info_names

    sort_by_length = False  # as fairseq sentence_prediction

    def blocking_cfg(self):
        """One sentence per item from ``DATA/input0``, shortened to ``tokens_per_sample``."""
        return SimpleNamespace(data=os.path.join(self.cfg.data, "input0"), sample_break_mode="eos",
                               tokens_per_sample=self.cfg.tokens_per_sample, shorten_method="truncate",
                               shorten_data_split_list="", seed=self.cfg.seed)

    def build_inputs(self, split, tokens, side_info):
        labels = data_utils.load_indexed_dataset(os.path.join(self.cfg.data, "label", split),
                                                 self.label_dictionary)
        if labels is None or len(labels) != len(tokens):
            raise ValueError(f"labels of split {split!r} missing or not one per line "
                             f"({0 if labels is None else len(labels)} labels, {len(tokens)} lines)")
        labels = OffsetTokensDataset(StripTokenDataset(labels, self.label_dictionary.eos()),
                                     offset=-self.label_dictionary.nspecial)
        masked = PolicyMaskedDataset(tokens, side_info, self.policy, self.corruption, self.special_ids,
                                     pad_idx=self.dictionary.pad(), seed=self.cfg.seed)
        pad = self.dictionary.pad()
        return NestedDictionaryDataset(
            {
                "id": IdDataset(),
                "net_input": {"src_tokens": RightPadDataset(tokens, pad_idx=pad),
                              "src_lengths": NumelDataset(tokens, reduce=False)},
                "mlm": {"src_tokens": RightPadDataset(masked.source, pad_idx=pad),
                        "target": RightPadDataset(masked.target, pad_idx=pad)},
                "target": _Labels(labels),
                "nsentences": NumSamplesDataset(),
                "ntokens": NumelDataset(tokens, reduce=True),
            },
            sizes=[tokens.sizes],
        )

    def build_model(self, cfg, from_checkpoint=False):
        from fairseq import models

        with open_dict(cfg) if OmegaConf.is_config(cfg) else contextlib.ExitStack():
            cfg.max_positions = self.cfg.tokens_per_sample
        model = models.build_model(cfg, self, from_checkpoint)
        model.register_classification_head(self.cfg.classification_head_name, num_classes=self.cfg.num_classes)
        return model

    def mlm_batch(self, sample):
        return sample["mlm"]["src_tokens"], sample["mlm"]["target"]


class _Labels(BaseWrapperDataset):
    """One class index per item (collated into a 1-D tensor)."""

    def __getitem__(self, index):
        return self.dataset[index][0]

    def collater(self, samples):
        return torch.stack(samples)
