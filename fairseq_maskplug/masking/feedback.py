"""Policies that learn from training (training feedback): what such a policy declares, pure NumPy.

A policy with :attr:`~.registry.MaskPolicy.feedback` asks for the masked-LM loss of every predicted
position, grouped by the value of one of its side-information tracks (PTW, Yang et al. 2023: the
part-of-speech tag). The task computes the grouped sums of each training batch
(:func:`group_loss_sums`), adds them up over the data-parallel workers, and folds them into the
policy's running statistics (:meth:`Feedback.fold`) once per forward (``--update-freq k``: k folds per
update, in order). Every training batch is then drawn
again in the main process with the current statistics (:meth:`~.registry.MaskPolicy.with_state`;
``tasks/training_feedback.py``'s ``LiveFeedbackDraw``, keyed by seed, update and item); the items the loader
workers draw ahead use the statistics the previous epochs left, and stand only where that redraw cannot
run (``docs/design.md``).
"""

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np


@dataclass(frozen=True)
class Feedback:
    """What a policy wants from training.

    Args:
        track: the side-information track whose value at a position is its group (integers in
            ``[0, groups)``; the task passes it along with each item).
        groups: how many groups.
        initial: ``groups -> state``: the statistics before any training batch.
        fold: ``(state, loss_sums, counts) -> state``: the statistics after one training batch, from
            the batch's summed loss and count of predicted positions per group (every worker's).
        describe: ``state -> str``: what the policy draws with under ``state``, in a few words (training logs
            it at each epoch's start); None: the state is not logged.
    """

    track: str
    groups: int
    initial: Callable[[int], np.ndarray]
    fold: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    describe: Optional[Callable[[np.ndarray], str]] = None


def group_loss_sums(groups: np.ndarray, losses: np.ndarray, n_groups: int):
    """``(loss_sums, counts)``, float64 arrays of ``n_groups``: the summed loss and the number of
    predicted positions of each group (``groups``: the group of each predicted position)."""
    groups = np.asarray(groups, dtype=np.int64)
    losses = np.asarray(losses, dtype=np.float64)
    if groups.shape != losses.shape:
        raise ValueError(f"group_loss_sums: {groups.shape} groups for {losses.shape} losses")
    if groups.size and (groups.min() < 0 or groups.max() >= n_groups):
        raise ValueError(f"group_loss_sums: a group outside [0, {n_groups})")
    return (np.bincount(groups, weights=losses, minlength=n_groups),
            np.bincount(groups, minlength=n_groups).astype(np.float64))
