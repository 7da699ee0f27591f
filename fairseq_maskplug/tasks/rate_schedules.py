"""``--mask-prob-schedule``: the mask rate as a function of the update number
(:mod:`fairseq_maskplug.masking.rate_schedule`), options every task with ``--mask-policy`` takes, and
the thinning of each batch to its update's rate."""

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from fairseq.dataclass import ChoiceEnum
from fairseq.logging import metrics

from ..common.option_ranges import option
from ..masking import MASK_POLICY_DATACLASS_REGISTRY, MASK_POLICY_REGISTRY
from ..masking.rate_schedule import SCHEDULES, highest_rate, scheduled_rate, thin_rows


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


class ScheduledThinning:
    """``--mask-prob-schedule`` as a step of :meth:`~.task_base.PackageTask.prepare_batch`: the policy draws at
    the schedule's highest rate (:func:`schedule_highest_rate`), and this step thins every training batch to the
    rate of its update and every validation batch to the end rate (:func:`thin_batch`); a training batch logs
    ``mask_prob_scheduled`` (:func:`log_scheduled_rate`).

    Args:
        rate_schedule: ``(schedule, start, end, updates)`` from :func:`prepare_rate_schedule`.
        masked_part: the part of a batch that holds the masked items and their ``mask_counts``.
        pad: the dictionary's padding index.
        seed: the run's seed (with the update, the item and its row, the key of what is kept).
    """

    def __init__(self, rate_schedule, masked_part: Callable[[dict], dict], pad: int, seed: int):
        self.rate_schedule, self.masked_part, self.pad, self.seed = rate_schedule, masked_part, pad, seed
        self.highest = schedule_highest_rate(rate_schedule)  # the rate the policy draws at

    def rate(self, update_num) -> float:
        """The scheduled rate at ``update_num`` (None: validation, the end rate)."""
        schedule, start, end, updates = self.rate_schedule
        return scheduled_rate(updates if update_num is None else update_num, schedule, start, end, updates)

    def __call__(self, sample, update_num) -> dict:
        rate = self.rate(update_num)
        part = self.masked_part(sample)
        inputs = part["net_input"] if "net_input" in part else part
        thin_batch(inputs["src_tokens"], part["target"], part["mask_counts"], sample["id"], rate / self.highest,
                   self.pad, (self.seed, 1, 0) if update_num is None else (self.seed, 0, int(update_num)))
        return {} if update_num is None else {"mask_prob_scheduled": rate, "mask_schedule_batches": 1}


def log_scheduled_rate(logging_outputs) -> None:
    """Log ``mask_prob_scheduled``, the mean scheduled rate of the training batches (:class:`ScheduledThinning`)."""
    batches = sum(log.get("mask_schedule_batches", 0) for log in logging_outputs)
    if batches:
        metrics.log_scalar("mask_prob_scheduled",
                           sum(log.get("mask_prob_scheduled", 0) for log in logging_outputs) / batches,
                           batches, round=4)


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
    """The ``(schedule, start, end, updates)`` of ``--mask-prob-schedule``, None for ``constant``. A
    schedule sets the rate of the policy (its ``rate_option``, :func:`schedule_highest_rate`), so
    that option may not be set too, and a policy without one is refused."""
    own = (cfg.mask_prob_schedule_start, cfg.mask_prob_schedule_end, cfg.mask_prob_schedule_updates)
    if cfg.mask_prob_schedule == "constant":
        defaults = RateScheduleOptions()
        if own != (defaults.mask_prob_schedule_start, defaults.mask_prob_schedule_end,
                   defaults.mask_prob_schedule_updates):
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
    return cfg.mask_prob_schedule, *own


def schedule_highest_rate(rate_schedule):
    """The rate the policy draws at under ``rate_schedule`` (each batch is then thinned to its update's rate);
    None without a schedule (the policy's own rate)."""
    if rate_schedule is None:
        return None
    schedule, start, end, _ = rate_schedule
    return highest_rate(schedule, start, end)
