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

from dataclasses import dataclass

import numpy as np
import torch
from fairseq.data import BaseWrapperDataset, RightPadDataset
from fairseq.dataclass import FairseqDataclass
from fairseq.tasks import register_task
from omegaconf import II, MISSING

from ..common.option_ranges import option
from ..masking.values import BINARY_LABEL
from ..models import register_token_tagging_head
from .token_heads import TokenHeadTask

IGNORE = -1  # target value of positions without a label (<s>, </s>, padding)


@dataclass
class TokenImportanceConfig(FairseqDataclass):
    data: str = option(MISSING, "binarized texts with dict.txt and the label track (a sentence_prediction root is "
                       "read through its input0/)")
    label_track: str = option("importance", "side-information track with one 0/1 label per token "
                              "(preprocess.score_importance)")
    tokens_per_sample: int = option(128, "longest item including <s> (longer lines are truncated)", range="[2, inf)",
                                    source="authors' code")
    tagger_head_name: str = option("token_importance_head", "name of the tagging head")
    side_info_without_fingerprint: bool = option(False, "accept a label track that lacks its .json fingerprint (then "
                                                 "checked by line lengths only)")
    verify_data: bool = option(False, "also compare every side-information track with the SHA-256 its manifest "
                               "records (one pass over each track at load; lengths are always compared)")
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
class TokenImportanceTask(TokenHeadTask):
    """Token-level binary tagging of task-important tokens."""

    criteria = ("token_importance",)
    label_rule = BINARY_LABEL

    cfg: TokenImportanceConfig

    def targets(self, split, tokens, labels):
        d = self.dictionary
        return RightPadDataset(TaggingTargets(tokens, labels, (d.bos(), d.eos(), d.pad())), pad_idx=IGNORE)

    def register_head(self, model) -> None:
        register_token_tagging_head(model, self.cfg.tagger_head_name)
