"""``--task guided_mlm``: masked-LM training where a registered policy chooses what to mask."""

import logging
import os
from dataclasses import dataclass, field

import numpy as np
from fairseq import utils
from fairseq.data import (
    Dictionary,
    IdDataset,
    NestedDictionaryDataset,
    NumelDataset,
    NumSamplesDataset,
    RightPadDataset,
    SortDataset,
    data_utils,
)
from fairseq.dataclass import FairseqDataclass
from fairseq.tasks import FairseqTask
from fairseq.tasks.language_modeling import SAMPLE_BREAK_MODE_CHOICES, SHORTEN_METHOD_CHOICES
from omegaconf import II, MISSING

from ..data import PolicyMaskedDataset, load_blocked_split
from ..masking import Corruption, build_mask_policy
from .mask_stats import log_mask_statistics, mask_statistics
from .policy_options import register_policy_task

logger = logging.getLogger(__name__)


@dataclass
class GuidedMLMConfig(FairseqDataclass):
    data: str = field(default=MISSING, metadata={
        "help": "colon-separated binarized data directories (iterated round-robin over epochs); "
                "the first holds dict.txt"})
    mask_policy: str = field(default="random", metadata={
        "help": "registered mask policy that chooses the positions to predict "
                "(built in: random, matched_random; plugins add more)"})
    sample_break_mode: SAMPLE_BREAK_MODE_CHOICES = field(default="none", metadata={
        "help": "none: fill each block with tokens_per_sample tokens across sentences; complete: "
                "whole sentences up to tokens_per_sample; complete_doc: never cross a document "
                "boundary (empty line); eos: one sentence per block"})
    tokens_per_sample: int = field(default=512, metadata={"help": "block length including <s>"})
    leave_unmasked_prob: float = field(default=0.1, metadata={
        "help": "share of chosen positions left unchanged (80/10/10 rule)"})
    random_token_prob: float = field(default=0.1, metadata={
        "help": "share of chosen positions replaced by a random token (80/10/10 rule)"})
    freq_weighted_replacement: bool = field(default=False, metadata={
        "help": "draw random replacements by corpus frequency instead of uniformly"})
    shorten_method: SHORTEN_METHOD_CHOICES = field(default="none", metadata={
        "help": "shorten lines longer than tokens_per_sample: truncate or random_crop "
                "(side information is shortened identically)"})
    shorten_data_split_list: str = field(default="", metadata={
        "help": "comma-separated splits to shorten (default: all)"})
    seed: int = II("common.seed")


def replacement_vocabulary(dictionary: Dictionary, mask_idx: int, freq_weighted: bool):
    """Ids a random replacement may draw (no special token, no ``<mask>``) and their probabilities."""
    ids = np.array([i for i in range(dictionary.nspecial, len(dictionary)) if i != mask_idx])
    if not freq_weighted:
        return ids, None
    counts = np.array([dictionary.count[i] for i in ids], dtype=np.float64)
    if counts.sum() <= 0:
        raise ValueError("--freq-weighted-replacement needs token counts in dict.txt, but all are 0")
    return ids, counts / counts.sum()


@register_policy_task("guided_mlm", dataclass=GuidedMLMConfig)
class GuidedMLMTask(FairseqTask):
    """Masked-LM training with a pluggable mask policy (``--mask-policy``).

    Data layout and blocking are those of fairseq ``masked_lm``; the chosen policy
    picks positions per (seed, epoch, index), the shared 80/10/10 rule corrupts them.
    Per-token side information that the policy needs is read from
    ``<data>/<split>.<name>.bin/idx`` and blocked exactly like the tokens.
    Logs ``mask_rate``, ``masks_per_seq`` and ``seq_unmasked`` for train and valid.
    """

    cfg: GuidedMLMConfig

    def __init__(self, cfg, dictionary):
        super().__init__(cfg)
        self.dictionary = dictionary
        self.mask_idx = dictionary.add_symbol("<mask>")
        self.policy = build_mask_policy(cfg.mask_policy, cfg)
        ids, probs = replacement_vocabulary(dictionary, self.mask_idx, cfg.freq_weighted_replacement)
        self.corruption = Corruption(self.mask_idx, ids, probs, cfg.leave_unmasked_prob,
                                     cfg.random_token_prob)

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        paths = utils.split_paths(cfg.data)
        if not paths:
            raise ValueError("--data (the binarized data directory) is required")
        dict_path = os.path.join(paths[0], "dict.txt")
        if not os.path.exists(dict_path):
            raise FileNotFoundError(f"dictionary not found: {dict_path}")
        dictionary = Dictionary.load(dict_path)
        logger.info("dictionary: %d types", len(dictionary))
        return cls(cfg, dictionary)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        tokens, side_info = load_blocked_split(self.cfg, split, self.dictionary,
                                               self.policy.side_info_names, epoch, combine)
        masked = PolicyMaskedDataset(
            tokens, side_info, self.policy, self.corruption,
            special_ids=(self.dictionary.bos(), self.dictionary.eos(), self.dictionary.pad()),
            pad_idx=self.dictionary.pad(), seed=self.cfg.seed)
        pad = self.dictionary.pad()
        dataset = NestedDictionaryDataset(
            {
                "id": IdDataset(),
                "net_input": {
                    "src_tokens": RightPadDataset(masked.source, pad_idx=pad),
                    "src_lengths": NumelDataset(masked.source, reduce=False),
                },
                "target": RightPadDataset(masked.target, pad_idx=pad),
                "nsentences": NumSamplesDataset(),
                "ntokens": NumelDataset(masked.source, reduce=True),
            },
            sizes=[tokens.sizes],
        )
        with data_utils.numpy_seed(self.cfg.seed):
            shuffle = np.random.permutation(len(tokens))
        self.datasets[split] = SortDataset(dataset, sort_order=[shuffle, tokens.sizes])
        logger.info("%s: %d blocks, mask policy %s", split, len(tokens), self.cfg.mask_policy)

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        loss, sample_size, logging_output = super().train_step(
            sample, model, criterion, optimizer, update_num, ignore_grad)
        logging_output.update(mask_statistics(sample, self.dictionary))
        return loss, sample_size, logging_output

    def valid_step(self, sample, model, criterion):
        loss, sample_size, logging_output = super().valid_step(sample, model, criterion)
        logging_output.update(mask_statistics(sample, self.dictionary))
        return loss, sample_size, logging_output

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        log_mask_statistics(logging_outputs)

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary

    def max_positions(self):
        return self.cfg.tokens_per_sample
