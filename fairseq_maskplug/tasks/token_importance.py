"""``--task token_importance``: train the token-importance tagger (Gu et al. 2020, "Train NN").

Input: a binarized text directory (``dict.txt``, ``SPLIT.bin/.idx``) with a 0/1 label
per token in the side-information track ``--label-track`` (written by
``preprocess.score_importance``). One sentence per item (``<s>`` + line, shortened to
``--tokens-per-sample``); ``<s>`` and ``</s>`` carry no label. The model is a roberta
encoder (start from the GenePT checkpoint with ``--finetune-from-model``) with a
:class:`~fairseq_maskplug.models.TokenTaggingHead`; train with
``--criterion token_importance`` and keep the best checkpoint by class-1 F1
(``--best-checkpoint-metric f1 --maximize-best-checkpoint-metric``).
"""

import logging
from dataclasses import dataclass, field

import numpy as np
import torch
from fairseq.data import BaseWrapperDataset, RightPadDataset
from fairseq.dataclass import FairseqDataclass
from fairseq.tasks import FairseqTask, register_task
from omegaconf import II, MISSING

from ..data import load_blocked_split
from ..data.dictionaries import STATE_KEY, dictionary_sha256, load_dictionary
from ..masking.values import BINARY_LABEL
from ..models import register_token_tagging_head
from ..data.layout import required_data, token_data_dir
from .criteria import CriterionChecked
from .sentence_items import build_model_for_items, sentence_blocking, tagged_items

logger = logging.getLogger(__name__)

IGNORE = -1  # target value of positions without a label (<s>, </s>, padding)


@dataclass
class TokenImportanceConfig(FairseqDataclass):
    data: str = field(default=MISSING, metadata={
        "help": "binarized texts with dict.txt and the label track (a sentence_prediction root is read "
                "through its input0/)"})
    label_track: str = field(default="importance", metadata={
        "help": "side-information track with one 0/1 label per token (preprocess.score_importance)"})
    tokens_per_sample: int = field(default=128, metadata={"range": "[2, inf)",
        "help": "longest item including <s> (longer lines are "
                                                                  "truncated)"})
    tagger_head_name: str = field(default="token_importance_head", metadata={"help": "name of the tagging head"})
    side_info_without_fingerprint: bool = field(default=False, metadata={
        "help": "accept a label track that lacks its .json fingerprint (then checked by line lengths only)"})
    seed: int = II("common.seed")


class TaggingTargets(BaseWrapperDataset):
    """Per-position class (0/1) from the label track; ``IGNORE`` at special tokens."""

    def __init__(self, tokens, labels, special_ids):
        super().__init__(labels)
        self.tokens, self.special_ids = tokens, list(special_ids)

    def __getitem__(self, index):
        target = self.dataset[index].numpy().astype(np.int64)  # 0/1, checked over the whole split at load
        target[np.isin(self.tokens[index].numpy(), self.special_ids)] = IGNORE
        return torch.from_numpy(target)


@register_task("token_importance", dataclass=TokenImportanceConfig)
class TokenImportanceTask(CriterionChecked, FairseqTask):
    """Token-level binary tagging of task-important tokens."""

    criteria = ("token_importance",)

    cfg: TokenImportanceConfig

    def __init__(self, cfg, dictionary):
        super().__init__(cfg)
        self.state.merge_state_dict({STATE_KEY: dictionary_sha256(dictionary)})  # saved in checkpoints
        self.dictionary = dictionary
        self.mask_idx = dictionary.add_symbol("<mask>")  # as the masked-LM tasks: same embedding size

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        cfg.data = token_data_dir(required_data(cfg))  # a sentence_prediction root: its input0/
        return cls(cfg, load_dictionary(cfg.data))

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        blocking = sentence_blocking(self.cfg.data, self.cfg.tokens_per_sample, self.cfg.seed,
                                     self.cfg.side_info_without_fingerprint)
        tokens, side = load_blocked_split(blocking, split, self.dictionary, {self.cfg.label_track: BINARY_LABEL},
                                          epoch, combine)
        d = self.dictionary
        targets = TaggingTargets(tokens, side[self.cfg.label_track], (d.bos(), d.eos(), d.pad()))
        self.datasets[split] = tagged_items(tokens, RightPadDataset(targets, pad_idx=IGNORE), d, self.cfg.seed)
        logger.info("%s: %d sentences", split, len(tokens))

    def build_model(self, cfg, from_checkpoint=False):
        model = build_model_for_items(self, cfg, from_checkpoint)
        register_token_tagging_head(model, self.cfg.tagger_head_name)
        return model

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary

    def max_positions(self):
        return self.cfg.tokens_per_sample
