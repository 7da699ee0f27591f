"""The one shared corruption step: BERT/RoBERTa 80/10/10 replacement.

Devlin et al. (2019, §3.1) and Liu et al. (2019, §2.1): of the positions chosen for
prediction, 80% are replaced by ``<mask>``, 10% by a random token and 10% are left
unchanged; the model predicts the original token at every chosen position. Every
policy in this package only *chooses* positions; this module alone replaces them.
"""

from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class Corruption:
    """How chosen positions are replaced.

    Attributes:
        mask_idx: id of the ``<mask>`` token.
        replacement_ids: ids a random replacement may draw (never special tokens).
        replacement_probs: probabilities over ``replacement_ids`` (e.g. unigram
            frequencies); ``None`` draws uniformly.
        leave_unmasked_prob: share of chosen positions left unchanged (paper: 0.1).
        random_token_prob: share of chosen positions replaced by a random token
            (paper: 0.1). The rest, ``1 - leave - random``, become ``<mask>``.
    """

    mask_idx: int
    replacement_ids: np.ndarray
    replacement_probs: Optional[np.ndarray] = None
    leave_unmasked_prob: float = 0.1
    random_token_prob: float = 0.1

    def __post_init__(self):
        if not 0.0 <= self.leave_unmasked_prob <= 1.0 or not 0.0 <= self.random_token_prob <= 1.0:
            raise ValueError("leave_unmasked_prob and random_token_prob must lie in [0, 1]")
        if self.leave_unmasked_prob + self.random_token_prob > 1.0:
            raise ValueError(
                "leave_unmasked_prob + random_token_prob must be <= 1, got "
                f"{self.leave_unmasked_prob} + {self.random_token_prob}"
            )
        if len(self.replacement_ids) == 0 and self.random_token_prob > 0:
            raise ValueError("random_token_prob > 0 needs at least one replacement id")


def _unit_order(units: np.ndarray) -> np.ndarray:
    """Each position's rank among the distinct ``units`` (``np.unique(units, return_inverse=True)[1]``; by
    one comparison where they are non-decreasing, as unit ids numbered left to right are)."""
    if units.size and (units[1:] >= units[:-1]).all():
        return np.cumsum(np.concatenate([[True], units[1:] != units[:-1]])) - 1
    return np.unique(units, return_inverse=True)[1]


def corrupt(tokens: np.ndarray, mask: np.ndarray, rng: np.random.Generator,
            corruption: Corruption, units: Optional[np.ndarray] = None) -> np.ndarray:
    """Return a copy of ``tokens`` with the ``mask`` positions corrupted 80/10/10.

    One uniform draw per chosen position decides its fate independently (as in
    fairseq's ``MaskTokensDataset``): ``u < leave`` keeps the token, ``u < leave +
    random`` draws a replacement from ``corruption.replacement_ids``, otherwise the
    position becomes ``<mask>``. With ``units`` (one integer per position, equal within a
    unit) one draw per chosen unit decides the fate of all its positions: a unit is kept,
    replaced token by token at random, or masked whole (PMI-Masking's units).
    """
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != tokens.shape:
        raise ValueError(f"mask shape {mask.shape} does not match tokens {tokens.shape}")
    source = np.array(tokens, copy=True)
    positions = np.flatnonzero(mask)
    if positions.size == 0:
        return source
    if units is None:
        fate = rng.random(positions.size)
    else:
        unit_of_position = _unit_order(np.asarray(units)[positions])
        fate = rng.random(int(unit_of_position.max()) + 1)[unit_of_position]
    keep = fate < corruption.leave_unmasked_prob
    randomise = ~keep & (fate < corruption.leave_unmasked_prob + corruption.random_token_prob)
    source[positions[~keep & ~randomise]] = corruption.mask_idx
    n_random = int(randomise.sum())
    if n_random:
        source[positions[randomise]] = rng.choice(
            corruption.replacement_ids, size=n_random, p=corruption.replacement_probs
        )
    return source
