"""TLM's alternation of task and external batches (Yao et al. 2022, Sec. 3.2), as a batch list.

One batch per training step: a task batch when ``(step + 1) % (ρ1 + 1) == 0``, an external
(retrieved-document) batch otherwise, so ρ1 (``--tlm-external-ratio``) external batches come per task batch, the
paper's reading (Sec. 3.2: "we interleave one batch of internal data with ρ1 batches of external data"); ρ1 = 0
takes task batches only.
The authors' trainer reads its ``ratio`` otherwise: a task batch when ``(step + 1) % ratio == 0``, so ratio − 1
external batches per task batch, and task batches only for ratio ≤ 1 (their stage 1's 999 is 998 external
batches per task batch; 3 is 2 of every 3 batches external, where the paper's reading of 3 is 3 of every 4).
``--tlm-ratio-rule authors`` reads ``--tlm-external-ratio`` as their code does (:func:`paper_ratio`).
Here a *step* is one batch per
data-parallel worker: the schedule is a list of batches in which step j occupies positions
``j * workers ... (j + 1) * workers - 1``, and fairseq's sharded iterator gives worker w
position ``j * workers + w``. Every worker therefore takes the same kind of batch at the
same step. With ``--update-freq F`` an update holds F consecutive steps.

An epoch is one pass over the external batches (over the task batches when ρ1 = 0); task
batches are drawn as often as the schedule needs them, cycling through the task data in a
new order each cycle. Orders come from ``numpy.random.default_rng((seed, epoch, source,
cycle))``: the same seed gives the same schedule in every run and after a resume.
"""

from typing import Callable, List

import numpy as np

TASK, EXTERNAL = 0, 1
#: how ``--tlm-external-ratio`` is read: ``paper`` ρ1 external batches per task batch, ``authors`` their trainer's
#: ``(step + 1) % ratio == 0`` (ratio − 1 external per task batch)
RATIO_RULES = ("paper", "authors")


def paper_ratio(ratio: int, rule: str) -> int:
    """``ratio`` as external batches per task batch (the paper's ρ1): itself under ``paper``; the authors' trainer's
    ``ratio - 1`` under ``authors`` (0, task batches only, for ratio <= 1)."""
    if rule not in RATIO_RULES:
        raise ValueError(f"--tlm-ratio-rule must be one of {', '.join(RATIO_RULES)}, got {rule!r}")
    return ratio if rule == "paper" else max(ratio - 1, 0)  # (a negative ratio: the option's range refuses it)


def is_task_step(steps, ratio: int) -> np.ndarray:
    """Per step index: True where the authors' rule takes a task batch."""
    if ratio < 0:
        raise ValueError(f"--tlm-external-ratio must be >= 0, got {ratio}")
    steps = np.asarray(steps)
    if ratio == 0:
        return np.ones(steps.shape, dtype=bool)
    return (steps + 1) % (ratio + 1) == 0


def steps_for_external(external_steps: int, ratio: int) -> int:
    """The fewest steps whose schedule holds ``external_steps`` external steps (ratio >= 1)."""
    if ratio < 1 or external_steps < 1:
        raise ValueError("steps_for_external needs ratio >= 1 and at least one external step")
    return external_steps + (external_steps - 1) // ratio


def _cycled(make_order: Callable[[int], List[list]], count: int) -> List[list]:
    """``count`` batches from ``make_order(cycle)``, cycle 0, 1, ... (each a fresh order)."""
    out, cycle = [], 0
    while len(out) < count:
        batches = make_order(cycle)
        if not batches:
            raise ValueError("a TLM data source has no batch")
        out.extend(batches[:count - len(out)])
        cycle += 1
    return out


def schedule(task_batches: Callable[[int], List[list]], external_batches: Callable[[int], List[list]],
             ratio: int, workers: int):
    """``(batches, kinds)``: the epoch's batch list (``workers`` consecutive batches per step)
    and each step's kind (TASK or EXTERNAL).

    ``task_batches(cycle)`` / ``external_batches(cycle)`` return one pass over a source's
    data as batches (lists of dataset indices), in that cycle's order.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if ratio == 0:
        n_steps = -(-len(task_batches(0)) // workers)
        n_external = 0
    else:
        n_external = -(-len(external_batches(0)) // workers)
        n_steps = steps_for_external(n_external, ratio)
    task_step = is_task_step(np.arange(n_steps), ratio)
    n_task = int(task_step.sum())
    if n_task == 0:  # the rule restarts every epoch: no task batch would ever be drawn
        raise ValueError(f"--tlm-external-ratio {ratio}: an epoch holds {n_steps} steps of external batches, fewer "
                         f"than the {ratio + 1} that come before the first task batch, so the task data would never "
                         f"be trained on; lower --tlm-external-ratio below {n_steps}, retrieve more documents, or give a "
                         "smaller --batch-size (smaller batches make more steps)")
    task = iter(_cycled(task_batches, n_task * workers))
    external = iter(_cycled(external_batches, n_external * workers)) if n_external else iter(())
    batches = []
    for take_task in task_step:
        source = task if take_task else external
        batches.extend(next(source) for _ in range(workers))
    kinds = np.where(task_step, TASK, EXTERNAL)
    return batches, kinds
