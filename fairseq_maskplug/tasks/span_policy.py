"""``--task span_policy``: train the supervised span-scoring policy (Ye, Li et al. 2021,
"+Supervised": "similar to an extractive reading comprehension model", trained on
(context, answer) pairs of the downstream task **without the question**).

Input: binarized contexts of the downstream task's training split (one per line) with the
answer-span label track ``--label-track`` (``preprocess.span_labels``: 1 on the answer's
first token, 2 on its last). One context per item (``<s>`` + line, shortened to
``--tokens-per-sample``); every item must keep exactly one start and one end, checked over
the whole split when it loads.

The model is a roberta encoder (``--arch roberta_tiny``, or a general checkpoint with
``--finetune-from-model``) with a :class:`~fairseq_maskplug.models.TokenTaggingHead` of two
outputs per token: the start logit and the end logit. We chose a small roberta over the
frozen BART encoder of the seq2seq model: the policy then has its own, cheap forward,
needs no seq2seq checkpoint to score a corpus, and a roberta trained by this package
(same dictionary) can start it. ``preprocess.score_spans`` writes its logits as the
tracks the ``learned_span`` policy reads.
"""

from dataclasses import dataclass

import numpy as np
import torch
from fairseq.data import BaseWrapperDataset
from fairseq.dataclass import FairseqDataclass
from fairseq.tasks import register_task
from omegaconf import II, MISSING

from ..common.option_ranges import option
from ..data.answer_labels import ANSWER_LABELS, answer_positions
from ..models import register_token_tagging_head
from .token_heads import TokenHeadTask

#: the policy head's outputs per token
START_LOGIT, END_LOGIT = 0, 1


@dataclass
class SpanScorerConfig(FairseqDataclass):
    """What the tasks training the span scorer share (``span_policy``, ``meta_span_policy``): one
    sentence or context per item and the start/end head."""

    tokens_per_sample: int = option(128, "longest item including <s> (longer lines are truncated; span_policy "
                                    "refuses a context whose answer is cut off)", range="[2, inf)", source="ours")
    span_head_name: str = option("span_policy_head", "name of the start/end head (preprocess.score_spans reads it)")
    seed: int = II("common.seed")


@dataclass
class SpanPolicyConfig(SpanScorerConfig):
    data: str = option(MISSING, "binarized contexts with dict.txt and the answer-span track (preprocess.span_labels)")
    label_track: str = option("answer_span", "side-information track of answer labels: 1 first token, 2 last token, "
                              "3 both")
    answer_max_length: int = option(10, "longest span in tokens when the logged span_em decodes the top-1 span (as "
                                    "the learned_span policy's --learned-max-length)", range="[1, inf)",
                                    source="ours")
    side_info_without_fingerprint: bool = option(False, "accept a label track that lacks its .json fingerprint (then "
                                                 "checked by line lengths only)")
    verify_data: bool = option(False, "also compare every side-information track with the SHA-256 its manifest "
                               "records (one pass over each track at load; lengths are always compared)")


class AnswerTargets(BaseWrapperDataset):
    """``[start, end]`` positions (in the item, ``<s>`` = 0) of each item's answer."""

    def __init__(self, labels, positions):
        super().__init__(labels)
        self.positions = positions

    def __getitem__(self, index):
        return torch.from_numpy(self.positions[index])


def answer_targets(labels, split: str) -> np.ndarray:
    """``(n, 2)`` answer positions of every item; a ValueError naming the first bad line."""
    positions = np.zeros((len(labels), 2), dtype=np.int64)
    for index in range(len(labels)):
        try:
            positions[index] = answer_positions(labels[index].numpy())
        except ValueError as error:
            raise ValueError(f"split {split!r} line {index + 1}: {error}; a context longer than --tokens-per-sample "
                             "loses its answer (raise --tokens-per-sample), or the track was not written by "
                             "preprocess.span_labels") from None
    return positions


@register_task("span_policy", dataclass=SpanPolicyConfig)
class SpanPolicyTask(TokenHeadTask):
    """Extractive start/end tagging of answer spans, the supervised masking policy."""

    criteria = ("span_policy",)
    label_rule = ANSWER_LABELS
    item_name = "contexts"

    cfg: SpanPolicyConfig

    def targets(self, split, tokens, labels):
        return AnswerTargets(labels, answer_targets(labels, split))

    def register_head(self, model) -> None:
        register_token_tagging_head(model, self.cfg.span_head_name, num_classes=2)
