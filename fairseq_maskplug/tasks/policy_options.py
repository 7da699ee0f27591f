"""Tasks that take ``--mask-policy``: what they share (:class:`PolicyTask`) and every registered mask
policy's options exposed on each of them.

fairseq reads a task's options from its dataclass in three places: the class
attribute ``__dataclass`` (argparse flags), ``TASK_DATACLASS_REGISTRY`` (flags ->
config) and hydra's ConfigStore (``fairseq-hydra-train``). A task registered with
:func:`register_policy_task` gets a dataclass that extends its own with the options of
every policy registered so far, and all three places are updated whenever another
policy registers (for instance from a user's ``--user-dir`` module).
"""

import dataclasses
from dataclasses import dataclass
from typing import Dict, Tuple

import numpy as np
import torch
from fairseq.dataclass import ChoiceEnum
from fairseq.logging import metrics
from fairseq.tasks import TASK_DATACLASS_REGISTRY, register_task
from hydra.core.config_store import ConfigStore

from ..common.option_ranges import option
from ..data.word_boundaries import BOUNDARIES, word_start_symbols
from ..masking import (MASK_POLICY_DATACLASS_REGISTRY, MASK_POLICY_REGISTRY, build_mask_policy, ignored_policy_options, on_policy_registered,
                       policy_option_dataclasses)
from ..masking.rate_schedule import SCHEDULES, highest_rate, scheduled_rate, thin_rows
from ..masking.words import WordUnitPolicy

_POLICY_TASKS: Dict[str, Tuple[type, type]] = {}


@dataclass
class MaskUnitOptions:
    """What any policy chooses: tokens, or whole words (:mod:`fairseq_maskplug.masking.words`)."""

    mask_unit: ChoiceEnum(["token", "word"]) = option(
        "token", "token: the policy chooses subword tokens; word: it chooses whole words (its rate is then per word; "
        "entity and learned spans grow to whole words); both rates are logged (mask_rate, unit_mask_rate)",
        source="paper (every method masks subwords; word: ours, for any policy)")
    word_boundaries: ChoiceEnum(list(BOUNDARIES)) = option(
        "auto", "with --mask-unit word: where words start: sentencepiece (a piece with the word-start mark), gpt2 (a "
        "token with GPT-2's space byte; needs --gpt2-encoder-json), whitespace (every token is a word); auto reads "
        "dict.txt", source="fairseq (get_whole_word_mask's rule)")
    gpt2_encoder_json: str = option("", "with --mask-unit word on GPT-2 BPE data: the BPE's encoder.json")


@dataclass
class RateScheduleOptions:
    """The mask rate as a function of the update number (:mod:`fairseq_maskplug.masking.rate_schedule`)."""

    mask_prob_schedule: ChoiceEnum(list(SCHEDULES)) = option(
        "constant", "constant: the policy's own rate; linear or cosine: from --mask-prob-schedule-start to "
        "--mask-prob-schedule-end over --mask-prob-schedule-updates updates (the policy draws at the larger of the "
        "two and each training batch is thinned to the update's rate; validation uses the end rate)",
        source="paper (Ankner et al. 2023: linear; constant: no schedule)")
    mask_prob_schedule_start: float = option(0.3, "the scheduled rate at update 0", range="(0, 1]",
                                             source="paper (Ankner et al. 2023: 0.3)")
    mask_prob_schedule_end: float = option(0.15, "the scheduled rate from --mask-prob-schedule-updates on",
                                           range="(0, 1]", source="paper (Ankner et al. 2023: 0.15)")
    mask_prob_schedule_updates: int = option(0, "updates over which the rate moves from start to end (needed by "
                                             "linear and cosine; e.g. your --max-update)", range="[0, inf)",
                                             source="ours (no default length)")


def with_policy_options(base: type) -> type:
    """``base`` extended with the option fields of all registered policies, :class:`MaskUnitOptions` and
    :class:`RateScheduleOptions`."""
    own = {f.name for f in dataclasses.fields(base)}
    options = [*policy_option_dataclasses(), MaskUnitOptions, RateScheduleOptions]
    for dc in options:
        clash = own & {f.name for f in dataclasses.fields(dc)}
        if clash:
            raise ValueError(f"mask policy options {sorted(clash)} ({dc.__name__}) clash with "
                             f"options of {base.__name__}")
    merged = dataclasses.make_dataclass(base.__name__, [], bases=(base, *options))
    merged.__module__, merged.__qualname__, merged.__doc__ = base.__module__, base.__qualname__, base.__doc__
    return merged


def _install(name: str, task_cls: type, dataclass: type) -> None:
    setattr(task_cls, "__dataclass", dataclass)  # what FairseqTask.add_args reads
    TASK_DATACLASS_REGISTRY[name] = dataclass
    node = dataclass()
    node._name = name
    ConfigStore.instance().store(name=name, group="task", node=node, provider="fairseq")


class PolicyTask:
    """What every task with ``--mask-policy`` shares, as a base listed before its fairseq task base:
    :attr:`policy`, built from the task's options when the task is made (:meth:`build_policy`), and
    the side-information tracks that policy reads (:attr:`side_info_rules`, loaded and checked with
    the tokens). Register such a task with :func:`register_policy_task`."""

    policy = None
    #: why this task cannot thin its batches to a scheduled rate (one line); None: it can
    rate_schedule_refused = None

    def __init__(self, cfg, *args, **kwargs):
        super().__init__(cfg, *args, **kwargs)
        self.rate_schedule = prepare_rate_schedule(cfg, self.rate_schedule_refused)
        self.policy = with_mask_unit(self.build_policy(cfg), cfg, self.dictionary)

    def build_policy(self, cfg):
        """The policy ``--mask-policy`` names (:func:`build_task_policy`); a task may return None
        where no policy was asked for (``fe_mlm``'s paper views)."""
        return build_task_policy(cfg)

    @property
    def side_info_rules(self):
        """The side-information tracks the policy reads, each mapped to the rule its values follow."""
        return self.policy.side_info_rules if self.policy is not None else {}

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        scheduled = self.thin_to_schedule(sample, update_num)
        loss, sample_size, logging_output = super().train_step(sample, model, criterion, optimizer, update_num,
                                                               ignore_grad)
        if scheduled is not None:
            logging_output.update(mask_prob_scheduled=scheduled, mask_schedule_batches=1)
        return loss, sample_size, logging_output

    def valid_step(self, sample, model, criterion):
        self.thin_to_schedule(sample, None)
        return super().valid_step(sample, model, criterion)

    def thin_to_schedule(self, sample, update_num):
        """With ``--mask-prob-schedule``: thin the batch's masks to the rate of ``update_num`` (None:
        validation, the end rate) and return that rate (:func:`thin_batch`); else None."""
        if self.rate_schedule is None or not sample:
            return None
        schedule, start, end, updates = self.rate_schedule
        rate = scheduled_rate(updates if update_num is None else update_num, schedule, start, end, updates)
        part = self.mlm_sample(sample)
        inputs = part["net_input"] if "net_input" in part else part
        thin_batch(inputs["src_tokens"], part["target"], part["mask_counts"], sample["id"],
                   rate / highest_rate(schedule, start, end), self.dictionary.pad(),
                   (self.cfg.seed, 1, 0) if update_num is None else (self.cfg.seed, 0, int(update_num)))
        return rate

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        batches = sum(log.get("mask_schedule_batches", 0) for log in logging_outputs)
        if batches:
            metrics.log_scalar("mask_prob_scheduled",
                               sum(log.get("mask_prob_scheduled", 0) for log in logging_outputs) / batches,
                               batches, round=4)


def register_policy_task(name: str, dataclass: type):
    """``register_task(name, dataclass)`` whose options also include all policies' options; the task
    must derive from :class:`PolicyTask`."""

    def register(cls):
        if not issubclass(cls, PolicyTask):
            raise TypeError(f"register_policy_task({name!r}): {cls.__name__} must derive from "
                            f"fairseq_maskplug.tasks.PolicyTask (listed before its fairseq task base), which "
                            f"builds the policy its options name")
        register_task(name, dataclass=with_policy_options(dataclass))(cls)
        _POLICY_TASKS[name] = (cls, dataclass)
        return cls

    return register


def build_task_policy(cfg):
    """The policy ``cfg.mask_policy`` names; options of policies it does not read, set to
    anything but their default, are refused (they would be ignored silently)."""
    policy = build_mask_policy(cfg.mask_policy, cfg)
    ignored = ignored_policy_options(policy, cfg)
    if ignored:
        listed = ", ".join(f"{flag} (an option of mask policy {owner!r})" for flag, owner in ignored)
        owners = " or ".join(sorted({f"--mask-policy {owner}" for _, owner in ignored}))
        task = getattr(cfg, "_name", None)
        raise ValueError(f"{f'--task {task} ' if task else ''}--mask-policy {cfg.mask_policy} does not read "
                         f"{listed}: leave {'it' if len(ignored) == 1 else 'them'} out, or use {owners}")
    return policy


def thin_batch(src_tokens, target, mask_counts, ids, keep: float, pad: int, seed) -> None:
    """Keep each run of predicted positions of every row with probability ``keep``, in place: a run left
    out gets its original tokens back in ``src_tokens`` and pad in ``target`` (:func:`thin_rows`, keyed
    by ``seed`` (seed, 0, update; validation: seed, 1, 0), the item and its row: K rows for K views);
    ``mask_counts`` gets the new counts (units: tokens, as runs are not units)."""
    chosen = (target != pad).cpu().numpy()
    ids = ids.cpu().numpy().astype(np.int64)
    rows_per_item = len(chosen) // max(len(ids), 1)
    rows = np.arange(len(chosen))
    keys = np.stack([*(np.full(len(rows), s, dtype=np.int64) for s in seed), ids[rows // rows_per_item],
                     rows % rows_per_item], axis=1)
    kept = thin_rows(chosen, keep, keys)
    dropped = torch.from_numpy(chosen & ~kept).to(target.device)
    src_tokens[dropped] = target[dropped]
    target[dropped] = pad
    counts = torch.from_numpy(kept.sum(axis=1)).to(mask_counts.device)
    mask_counts[:, 0] = counts
    mask_counts[:, 2] = counts
    mask_counts[:, 3] = mask_counts[:, 1]


def prepare_rate_schedule(cfg, refused=None):
    """The ``(schedule, start, end, updates)`` of ``--mask-prob-schedule``, None for ``constant``; a
    schedule sets the policy's rate option (its ``rate_option``) to the schedule's highest rate, so
    that option may not be set too, and a policy without one is refused."""
    own = (cfg.mask_prob_schedule_start, cfg.mask_prob_schedule_end, cfg.mask_prob_schedule_updates)
    if cfg.mask_prob_schedule == "constant":
        if own != (0.3, 0.15, 0):
            raise ValueError("--mask-prob-schedule-start/-end/-updates are read only with --mask-prob-schedule "
                             "linear or cosine")
        return None
    flag = f"--mask-prob-schedule {cfg.mask_prob_schedule}"
    if refused:
        raise ValueError(f"{flag}: {refused}")
    if cfg.mask_prob_schedule_updates < 1:
        raise ValueError(f"{flag} needs --mask-prob-schedule-updates N (the updates from start to end rate)")
    policy_cls = MASK_POLICY_REGISTRY.get(getattr(cfg, "mask_policy", "") or "")
    rate_option = getattr(policy_cls, "rate_option", None)
    if rate_option is None:
        raise ValueError(f"{flag} needs a --mask-policy with a rate (random, span, l3, pmi), got "
                         f"{getattr(cfg, 'mask_policy', '') or 'none'!r}")
    options = MASK_POLICY_DATACLASS_REGISTRY[policy_cls.registered_name]
    default = next(f.default for f in dataclasses.fields(options) if f.name == rate_option)
    if getattr(cfg, rate_option) != default:
        raise ValueError(f"{flag} sets the rate of --mask-policy {cfg.mask_policy}: leave "
                         f"--{rate_option.replace('_', '-')} out")
    setattr(cfg, rate_option, highest_rate(cfg.mask_prob_schedule, cfg.mask_prob_schedule_start,
                                           cfg.mask_prob_schedule_end))
    return cfg.mask_prob_schedule, *own


def with_mask_unit(policy, cfg, dictionary):
    """``policy`` as ``--mask-unit`` asks: itself for tokens, a :class:`WordUnitPolicy` for words; the
    word options without ``--mask-unit word`` are refused (nothing would read them)."""
    if cfg.mask_unit == "token":
        given = [flag for flag, value, default in (("--word-boundaries", cfg.word_boundaries, "auto"),
                                                   ("--gpt2-encoder-json", cfg.gpt2_encoder_json, ""))
                 if value != default]
        if given:
            raise ValueError(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} read only with "
                             "--mask-unit word")
        return policy
    if policy is None:
        raise ValueError("--mask-unit word needs a --mask-policy to choose whole words (e.g. --mask-policy random)")
    starts, _ = word_start_symbols(dictionary, cfg.word_boundaries, cfg.gpt2_encoder_json or None)
    return WordUnitPolicy(policy, starts)


def policy_task_options(name: str):
    """``(task class, its own options dataclass)`` of a task registered with
    :func:`register_policy_task`, else None."""
    return _POLICY_TASKS.get(name)


def _refresh_policy_tasks() -> None:
    for name, (task_cls, base) in _POLICY_TASKS.items():
        _install(name, task_cls, with_policy_options(base))


on_policy_registered(_refresh_policy_tasks)
