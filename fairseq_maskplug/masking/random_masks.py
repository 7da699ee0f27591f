"""Uniform random position choices: the baselines every guided policy is compared to."""

import numpy as np


def maskable_positions(tokens: np.ndarray, special_ids) -> np.ndarray:
    """Boolean array: True where a token may be masked (anything but ``special_ids``).

    Special tokens (``<s>``, ``</s>``, ``<pad>``) are never chosen by any policy of
    this package, so rates are always measured over the maskable tokens. (One comparison per special id:
    for the few a dictionary has, several times faster than ``np.isin`` on a row, which every item and
    every live redraw pays.)
    """
    tokens = np.asarray(tokens)
    maskable = np.ones(tokens.shape, dtype=bool)
    for special in special_ids:
        maskable &= tokens != special
    return maskable


def maskable_runs(maskable: np.ndarray):
    """``(starts, ends)`` of the runs of consecutive maskable positions: the sentences of a
    block, which special tokens (``<s>``, ``</s>``, padding) separate."""
    edges = np.diff(np.concatenate([[0], np.asarray(maskable, dtype=np.int8), [0]]))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def unit_starts(flags: np.ndarray, maskable: np.ndarray) -> np.ndarray:
    """Boolean array, True where a unit (a word, a PMI unit) starts: where ``flags`` is set, at every
    non-maskable token, after one, and at position 0. Special tokens are units of their own, a unit
    never spans one, and a block cut inside a unit begins with the rest of it as a unit."""
    maskable = np.asarray(maskable, dtype=bool)
    starts = np.asarray(flags, dtype=bool) | ~maskable
    starts[1:] |= ~maskable[:-1]
    if len(starts):
        starts[0] = True
    return starts


def probabilistic_count(rate: float, n: int, rng: np.random.Generator) -> int:
    """``floor(rate * n + u)``, ``u ~ U[0, 1)``: an integer whose mean is exactly ``rate * n``.

    This is fairseq's rounding in ``MaskTokensDataset`` (``int(p * sz + rand())``);
    it keeps the realised rate unbiased for short sequences.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"mask rate must lie in [0, 1], got {rate}")
    return min(n, int(rate * n + rng.random()))


def matched_random_mask(maskable: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Mask exactly ``count`` maskable positions chosen uniformly without replacement.

    The fair baseline for a guided policy: same number of masks per sequence,
    positions chosen at random (Gu et al. 2020, §3.3).
    """
    candidates = np.flatnonzero(maskable)
    if not 0 <= count <= candidates.size:
        raise ValueError(
            f"cannot mask {count} positions of a sequence with {candidates.size} maskable tokens"
        )
    mask = np.zeros(maskable.shape, dtype=bool)
    mask[rng.choice(candidates, size=count, replace=False)] = True
    return mask


def random_mask(maskable: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Uniform random masking (RoBERTa, fairseq ``masked_lm``).

    ``probabilistic_count(rate, n)`` positions out of the ``n`` maskable ones, chosen
    uniformly without replacement: every maskable position is masked with marginal
    probability exactly ``rate``.
    """
    count = probabilistic_count(rate, int(maskable.sum()), rng)
    return matched_random_mask(maskable, count, rng)
