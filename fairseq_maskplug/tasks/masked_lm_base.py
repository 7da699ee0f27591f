"""What every masked-LM task of this package (and the text-to-text ``guided_denoising``) shares:
data, blocking, the mask policy and its rate schedule, corruption, statistics."""

import dataclasses
import logging
import os
from dataclasses import dataclass

import numpy as np
import torch
from fairseq import utils
from fairseq.data import Dictionary, SortDataset, data_utils
from fairseq.dataclass import FairseqDataclass
from fairseq.tasks.language_modeling import SAMPLE_BREAK_MODE_CHOICES, SHORTEN_METHOD_CHOICES
from omegaconf import II, MISSING

from ..common.option_ranges import option
from ..data import load_blocked_split
from ..data.blocking import check_block_sizes
from ..data.dictionaries import STATE_KEY, dictionary_sha256, load_dictionary
from ..data.layout import required_data, token_data_dir
from ..data.policy_path import MLMFormat, PolicyChooser, PolicyPath
from ..masking import Corruption
from .mask_stats import log_mask_statistics, mask_statistics
from .mask_units import with_mask_unit
from .model_checks import check_model
from .policy_options import build_task_policy
from .rate_schedules import ScheduledThinning, log_scheduled_rate, prepare_rate_schedule, schedule_highest_rate
from .task_base import PackageTask
from .training_feedback import (STATE_KEY as FEEDBACK_KEY, LiveFeedbackDraw, TokenLosses, TrainingFeedback,
                                log_live_feedback)

logger = logging.getLogger(__name__)


@dataclass
class MaskingConfig(FairseqDataclass):
    """Options every masked-LM task of the package has: data, length, corruption, seed."""

    data: str = option(MISSING, "fairseq-preprocess output directories, colon-separated (iterated round-robin over "
                       "epochs); the first holds dict.txt; a sentence_prediction root is read through its input0/")
    tokens_per_sample: int = option(512, "longest item including <s>", range="[2, inf)", source="fairseq")
    leave_unmasked_prob: float = option(0.1, "share of chosen positions left unchanged (80/10/10 rule)",
                                        range="[0, 1]", source="BERT (80/10/10)")
    random_token_prob: float = option(0.1, "share of chosen positions replaced by a random token (80/10/10 rule)",
                                      range="[0, 1]", source="BERT (80/10/10)")
    freq_weighted_replacement: bool = option(False, "draw random replacements by corpus frequency instead of "
                                             "uniformly", source="fairseq")
    side_info_without_fingerprint: bool = option(False, "accept side-information tracks that lack their .json "
                                                 "fingerprint (then checked against the token data by line lengths "
                                                 "only)")
    verify_data: bool = option(False, "also compare every side-information track with the SHA-256 its manifest "
                               "records (one pass over each track at load; lengths are always compared)")
    seed: int = II("common.seed")


@dataclass
class MaskedLMDataConfig(MaskingConfig):
    """Plus fairseq masked_lm's blocking options."""

    sample_break_mode: SAMPLE_BREAK_MODE_CHOICES = option("none", "none: fill each block with tokens_per_sample "
                                                          "tokens across sentences; complete: whole sentences up to "
                                                          "tokens_per_sample; complete_doc: never cross a document "
                                                          "boundary (empty line); eos: one sentence per block",
                                                          source="fairseq")
    shorten_method: SHORTEN_METHOD_CHOICES = option("none", "shorten lines longer than tokens_per_sample - 1: "
                                                    "truncate or random_crop (side information is shortened "
                                                    "identically)", source="fairseq")
    shorten_data_split_list: str = option("", "comma-separated splits to shorten (default: all)")


def replacement_vocabulary(dictionary: Dictionary, mask_idx: int, freq_weighted: bool):
    """Ids a random replacement may draw (no special token, no ``<mask>``) and their probabilities."""
    ids = np.array([i for i in range(dictionary.nspecial, len(dictionary)) if i != mask_idx])
    if not freq_weighted:
        return ids, None
    counts = np.array([dictionary.count[i] for i in ids], dtype=np.float64)
    if counts.sum() <= 0:
        raise ValueError("--freq-weighted-replacement needs token counts in dict.txt, but all are 0")
    return ids, counts / counts.sum()


def check_shorten_splits(cfg) -> None:
    """``--shorten-data-split-list`` names splits of ``--data`` and is read only with a
    ``--shorten-method``: fairseq ignores an unknown name silently."""
    listed = [name for name in getattr(cfg, "shorten_data_split_list", "").split(",") if name]
    if not listed:
        return
    if cfg.shorten_method == "none":
        raise ValueError("--shorten-data-split-list applies to --shorten-method truncate or random_crop")
    first = utils.split_paths(cfg.data)[0]
    unknown = [name for name in listed if not os.path.exists(os.path.join(first, f"{name}.idx"))]
    if unknown:
        raise ValueError(f"--shorten-data-split-list names {', '.join(unknown)}: no such split in {first} "
                         f"(a split is the SPLIT.bin/.idx pair fairseq-preprocess wrote)")


def fresh_workers(iterator):
    """``iterator`` with persistent loader workers turned off. fairseq keeps its ``--num-workers``
    processes (default 1) from one epoch to the next, each with the copy of the dataset it was started
    with; ``set_epoch`` then reaches only the main process's copy, and every epoch would repeat the masks
    of the first (measured: ``tests/test_guided_mlm_dataset.py``). Workers started anew each epoch copy
    the dataset at its current epoch."""
    if getattr(iterator, "persistent_workers", False):
        iterator.persistent_workers = False
    return iterator


class MaskedLMBaseTask(PackageTask):
    """Base of the package's masked-LM tasks, which take ``--mask-policy``.

    The task builds :attr:`policy` from its options (:meth:`build_policy`, :func:`.build_task_policy`;
    ``--mask-unit word`` wraps it) and loads the side-information tracks it reads (:attr:`side_info_rules`)
    with the tokens; ``--mask-prob-schedule`` adds :class:`~.rate_schedules.ScheduledThinning` to the batch
    steps. Subclasses implement :meth:`build_inputs` (split, blocked tokens and side information -> a
    dataset whose batches hold ``net_input.src_tokens`` and ``target``, such as
    :class:`~fairseq_maskplug.data.PolicyMaskedDataset`) and may change :meth:`blocking_cfg` and
    :attr:`sort_by_length`. Register one with :func:`~.policy_options.register_policy_task`. Train and valid
    logs get ``mask_rate``, ``masks_per_seq`` and ``seq_unmasked`` (rows of the batch).
    """

    criteria = ("masked_lm", "self_evolution")  # the second: masked_lm's loss with Self-Evolution's smoothing
    #: the model the task trains: an encoder (RoBERTa) or an encoder-decoder (BART)
    encoder_decoder = False
    #: why this task cannot thin its batches to a scheduled rate (one line); None: it can
    rate_schedule_refused = None
    #: why this task cannot train a policy that learns from training (``ptw``); None: it can
    feedback_refused = ("only --task guided_mlm and selective_mlm read the loss of each predicted position (from "
                        "fairseq's masked_lm criterion) that such a policy learns from")
    policy = None
    training_feedback = None

    def __init__(self, cfg, dictionary):
        super().__init__(cfg)  # options in range, batch_steps
        if cfg.tokens_per_sample <= self.framing_tokens:
            raise ValueError(f"--tokens-per-sample {cfg.tokens_per_sample} leaves no text beside the "
                             f"{self.framing_tokens} framing token(s) of each item: give at least "
                             f"{self.framing_tokens + 1}")
        check_shorten_splits(cfg)
        self.state.merge_state_dict({STATE_KEY: dictionary_sha256(dictionary)})  # saved in checkpoints
        self.dictionary = dictionary
        self._epoch_masks = [0, 0]  # positions chosen and sequences seen in this training epoch
        self.mask_idx = dictionary.add_symbol("<mask>")
        ids, probs = replacement_vocabulary(dictionary, self.mask_idx, cfg.freq_weighted_replacement)
        self.corruption = Corruption(self.mask_idx, ids, probs, cfg.leave_unmasked_prob,
                                     cfg.random_token_prob)
        self.rate_schedule = prepare_rate_schedule(cfg, self.rate_schedule_refused)
        self.policy = with_mask_unit(self.build_policy(cfg, schedule_highest_rate(self.rate_schedule)), cfg,
                                     dictionary)
        if self.rate_schedule is not None:
            self.batch_steps.append(ScheduledThinning(self.rate_schedule, self.mlm_sample, dictionary.pad(),
                                                      cfg.seed))
        if self.policy.feedback is not None:
            if self.feedback_refused:
                raise ValueError(f"--mask-policy {cfg.mask_policy} learns from training, which --task "
                                 f"{cfg._name} does not support: {self.feedback_refused}")
            self.training_feedback = TrainingFeedback(self.policy.feedback, cfg.mask_policy)
            if LiveFeedbackDraw.applies(self.policy):  # first: a rate schedule then thins the live draw
                path = PolicyPath(PolicyChooser(self.policy), MLMFormat(self.corruption, dictionary.pad()),
                                  self.special_ids, cfg.seed)
                self.batch_steps.insert(0, LiveFeedbackDraw(path, self.training_feedback, dictionary.pad()))

    @property
    def feedback_states(self):
        """``epoch -> state`` for the dataset of a policy that learns from training (:mod:`.training_feedback`);
        None for any other policy."""
        return None if self.training_feedback is None else self.training_feedback.state_for_epoch

    def optimization_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        """fairseq's step; for a policy that learns from training, the loss of each predicted position is read
        from the same forward pass and summed per group into the logging output (:class:`.TrainingFeedback`;
        :meth:`reduce_metrics` folds the update's sums in)."""
        if self.training_feedback is None:
            return super().optimization_step(sample, model, criterion, optimizer, update_num, ignore_grad)
        slot, slots = self.training_feedback.take_slot()  # before the forward: a forward lost to OOM keeps its row
        part = self.mlm_sample(sample)
        with TokenLosses(model, part["target"], self.dictionary.pad()) as captured:
            loss, sample_size, logging_output = super().optimization_step(sample, model, criterion, optimizer,
                                                                          update_num, ignore_grad)
        if captured.losses is None:
            raise ValueError("mask policy feedback: the criterion did not run the model")
        groups = part["feedback_groups"][part["target"].ne(self.dictionary.pad())]
        logging_output.update(self.training_feedback.batch_statistics(groups, captured.losses, ignore_grad, slot,
                                                                      slots))
        return loss, sample_size, logging_output

    def begin_update(self, micro_batches: int) -> None:
        """fairseq's ``Trainer.train_step`` begins an update of ``micro_batches`` forwards (``integration/compat.py``):
        a policy that learns from training folds each forward's statistics in turn (:class:`.TrainingFeedback`)."""
        if self.training_feedback is not None:
            self.training_feedback.begin_update(micro_batches)

    @property
    def restores_task_state(self) -> bool:
        """Whether resuming restores :meth:`load_state_dict` (``integration/compat.py``): with training feedback."""
        return self.training_feedback is not None

    def state_dict(self):
        """The task state saved in checkpoints, with the policy's training statistics when it learns from them."""
        if self.training_feedback is not None:
            self.state.merge_state_dict({FEEDBACK_KEY: self.training_feedback.state_dict()})
        return super().state_dict()

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        if self.training_feedback is not None and FEEDBACK_KEY in state_dict:
            self.training_feedback.load_state_dict(state_dict[FEEDBACK_KEY])

    def restart_epochs(self):
        """A checkpoint loaded with the data loader reset (``--reset-dataloader``, ``--finetune-from-model``):
        training starts again at epoch 1, drawing with the statistics the checkpoint learnt."""
        if self.training_feedback is not None:
            self.training_feedback.restart_epochs()

    def build_policy(self, cfg, rate=None):
        """The policy ``--mask-policy`` names (:func:`.build_task_policy`), drawing at ``rate`` when a schedule
        sets it (``fe_mlm`` also refuses a policy without views)."""
        return build_task_policy(cfg, rate)

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        paths = utils.split_paths(required_data(cfg))  # refused when missing
        paths = [token_data_dir(path) for path in paths]  # a sentence_prediction root: its input0/
        cfg.data = ":".join(paths)
        dictionary = load_dictionary(paths[0])
        logger.info("dictionary: %d types", len(dictionary))
        return cls(cfg, dictionary)

    @property
    def side_info_rules(self):
        """The side-information tracks the policy reads, each mapped to the ValueRule its values must follow and
        the command that writes it (named when the track is missing)."""
        return {name: dataclasses.replace(rule, producer=self.policy.producer_command(name))
                for name, rule in self.policy.side_info_rules.items()}

    @property
    def special_ids(self):
        return self.dictionary.bos(), self.dictionary.eos(), self.dictionary.pad()

    def build_inputs(self, split, tokens, side_info):
        raise NotImplementedError

    def mlm_sample(self, sample):
        """The part of a batch that holds the masked items and their ``mask_counts``."""
        return sample

    def mask_counts(self, sample):
        """Per row of a batch: ``(chosen positions, maskable positions, chosen units, maskable units)``,
        as its items carried them (:class:`~fairseq_maskplug.data.policy_path.PolicyPath`)."""
        counts = self.mlm_sample(sample)["mask_counts"]
        return counts[:, 0], counts[:, 1], counts[:, 2], counts[:, 3]

    #: batches group items of similar length (fairseq masked_lm); False: shuffle only
    sort_by_length = True

    def blocking_cfg(self):
        """Options :func:`load_blocked_split` blocks the text with (the task config by default)."""
        return self.cfg

    #: positions of --tokens-per-sample kept for framing tokens: <s> (masked LM), <s> and </s> (BART)
    framing_tokens = 1

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        tokens, side_info = load_blocked_split(self.blocking_cfg(), split, self.dictionary, self.side_info_rules,
                                               epoch, combine, framing=self.framing_tokens)
        # before fairseq's first batch finds them; an appended </s> counts
        check_block_sizes(np.asarray(tokens.sizes) + self.framing_tokens - 1, split, self.blocking_cfg())
        dataset = self.build_inputs(split, tokens, side_info)
        with data_utils.numpy_seed(self.cfg.seed):
            shuffle = np.random.permutation(len(tokens))
        sort_order = [shuffle, tokens.sizes] if self.sort_by_length else [shuffle]
        self.datasets[split] = SortDataset(dataset, sort_order=sort_order)
        logger.info("%s: %d items", split, len(tokens))

    def get_batch_iterator(self, dataset, *args, **kwargs):
        """fairseq's iterator, with loader workers started anew every epoch (:func:`fresh_workers`)."""
        return fresh_workers(super().get_batch_iterator(dataset, *args, **kwargs))

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        loss, sample_size, logging_output = super().train_step(
            sample, model, criterion, optimizer, update_num, ignore_grad)
        logging_output.update(self.count_masks(sample, ignore_grad))
        return loss, sample_size, logging_output

    def count_masks(self, sample, ignore_grad=False) -> dict:
        """:func:`mask_statistics` of a training batch, also added to the epoch's count."""
        stats = mask_statistics(*self.mask_counts(sample))
        if not ignore_grad:  # fairseq's dummy batches (ignore_grad) are not training data
            self._epoch_masks[0] += stats["mask_chosen"]
            self._epoch_masks[1] += stats["mask_seqs"]
        return stats

    def begin_epoch(self, epoch, model):
        super().begin_epoch(epoch, model)
        self._epoch_masks = [0, 0]  # chosen positions, sequences

    def begin_valid_epoch(self, epoch, model):
        """Stop when the training epoch just ended masked nothing (summed over all workers):
        every MLM loss was nan and nothing was learnt from the MLM objective."""
        super().begin_valid_epoch(epoch, model)
        counts = torch.tensor(self._epoch_masks, dtype=torch.float64)
        if torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
            from fairseq.distributed import utils as distributed_utils
            counts = distributed_utils.all_reduce(counts.to(next(model.parameters()).device),
                                                  group=distributed_utils.get_data_parallel_group()).cpu()
        chosen, sequences = counts.tolist()
        if sequences > 0 and chosen == 0:
            raise ValueError(f"epoch {epoch}: the mask policy chose no position in {int(sequences)} training "
                             f"sequences, so the masked-LM loss is nan; check the policy's options "
                             f"(e.g. its rate or threshold) and its side information")

    def valid_step(self, sample, model, criterion):
        loss, sample_size, logging_output = super().valid_step(sample, model, criterion)
        logging_output.update(mask_statistics(*self.mask_counts(sample)))
        return loss, sample_size, logging_output

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        if self.training_feedback is not None:  # an update's training batches, summed over workers by fairseq
            self.training_feedback.fold_update(logging_outputs)
        log_mask_statistics(logging_outputs)
        log_scheduled_rate(logging_outputs)
        log_live_feedback(logging_outputs)

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        check_model(self, model, getattr(cfg, "_name", None) or getattr(cfg, "arch", "?"), self.encoder_decoder)
        return model
