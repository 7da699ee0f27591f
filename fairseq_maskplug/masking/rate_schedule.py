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
(:func:`thin_rows`): every run of consecutive chosen positions (a span, whole words, a PMI unit,
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


def hashed_uniforms(*keys: np.ndarray) -> np.ndarray:
    """One uniform in [0, 1) per element of the broadcast integer ``keys``: SplitMix64 (Steele et al.
    2014) chained over the keys, so the value depends only on the keys (an item's draws do not change
    with the batch it sits in) and whole batches are drawn in a few array operations."""
    state = np.zeros(np.broadcast(*keys).shape, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for key in keys:
            z = state ^ (np.asarray(key).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15))
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            state = z ^ (z >> np.uint64(31))
    return (state >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def thin_rows(chosen: np.ndarray, keep: float, keys: np.ndarray) -> np.ndarray:
    """The positions of a ``rows x len`` batch still chosen after keeping each run of chosen positions
    with probability ``keep``: run ``j`` of row ``r`` is kept when
    ``hashed_uniforms(*keys[r], j) < keep`` (``keys``: one row of integers per row, e.g. seed, update,
    item, view)."""
    if not 0.0 <= keep <= 1.0:
        raise ValueError(f"a keep probability lies in [0, 1], got {keep}")
    chosen = np.asarray(chosen, dtype=bool)
    begins = chosen & ~np.concatenate([np.zeros((len(chosen), 1), dtype=bool), chosen[:, :-1]], axis=1)
    ordinal = np.cumsum(begins, axis=1) - 1  # the run of each position within its row
    keys = np.asarray(keys, dtype=np.int64)
    u = hashed_uniforms(*[keys[:, [k]] for k in range(keys.shape[1])], np.maximum(ordinal, 0))
    return chosen & (u < keep)


def highest_rate(schedule: str, start: float, end: float) -> Optional[float]:
    """``r_max``, the rate the policy draws at; None for ``constant`` (the policy's own rate)."""
    return None if schedule == "constant" else max(start, end)
