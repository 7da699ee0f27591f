"""Mask-rate schedules (``--mask-prob-schedule``): the rate as a function of the update number.

Ankner et al. (2023, "Dynamic masking rate schedules for MLM pre-training") decay BERT's rate
linearly from 30% to 15% over training; Yang et al. (2023) decay it too. :func:`scheduled_rate`
gives the rate of update ``u`` (0-based, fairseq's ``num_updates`` before the update)::

    constant: end
    linear:   start + (end - start) * min(u / T, 1)
    cosine:   end + (start - end) * (1 + cos(pi * min(u / T, 1))) / 2

How it is applied (ours). fairseq tells a dataset only its epoch, and masks are drawn in loader
workers ahead of the update, so the policy draws its masks at the schedule's highest rate
``r_max`` and the task thins each training batch when fairseq hands it the update number
(:func:`thin_runs`): every run of consecutive chosen positions (a span, whole words, a PMI unit,
or several side by side) is kept with probability ``r(u) / r_max``, else its tokens go back to
the originals and leave the loss. Each token's probability of being predicted is then exactly
its probability under the policy at ``r_max`` times ``r(u) / r_max`` (for ``random``, ``span``
and ``pmi`` at rate ``r_max``: exactly ``r(u)``; for ``l3``: ``p_i r(u) / r_max``, mean ``r(u)``),
runs are never split, and the draw depends only on (seed, update, item): a resumed run thins as
the uninterrupted run did. What is *not* claimed: the number masked per sequence is a thinning of
the policy's count at ``r_max``, not the policy's own count at ``r(u)``.
"""

import math
from typing import Optional

import numpy as np

SCHEDULES = ("constant", "linear", "cosine")


def scheduled_rate(update: int, schedule: str, start: float, end: float, updates: int) -> float:
    """The mask rate at (0-based) ``update`` (module docstring)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown mask-rate schedule {schedule!r}: one of {SCHEDULES}")
    if schedule == "constant":
        return end
    if updates < 1:
        raise ValueError(f"a {schedule} schedule needs its length in updates (>= 1), got {updates}")
    progress = min(max(update, 0) / updates, 1.0)
    if schedule == "linear":
        return start + (end - start) * progress
    return end + (start - end) * (1.0 + math.cos(math.pi * progress)) / 2.0


def runs(chosen: np.ndarray) -> np.ndarray:
    """Per position of a 1-D boolean row: the number of its run of chosen positions (0, 1, ...), -1
    where not chosen."""
    chosen = np.asarray(chosen, dtype=bool)
    begins = chosen & ~np.concatenate([[False], chosen[:-1]])
    ids = np.cumsum(begins) - 1
    return np.where(chosen, ids, -1)


def thin_runs(chosen: np.ndarray, keep: float, rng: np.random.Generator) -> np.ndarray:
    """The positions of ``chosen`` (1-D) still chosen after keeping each run with probability ``keep``."""
    if not 0.0 <= keep <= 1.0:
        raise ValueError(f"a keep probability lies in [0, 1], got {keep}")
    ids = runs(chosen)
    count = int(ids.max()) + 1 if ids.size else 0
    kept = rng.random(count) < keep
    return (ids >= 0) & kept[np.maximum(ids, 0)] if count else np.zeros(len(ids), dtype=bool)


def highest_rate(schedule: str, start: float, end: float) -> Optional[float]:
    """``r_max``, the rate the policy draws at; None for ``constant`` (the policy's own rate)."""
    return None if schedule == "constant" else max(start, end)
