"""PMI-Masking (Levine et al., ICLR 2021, §3): mask whole collocations and whole words, and its ``pmi`` policy.

The producer (``fairseq-maskplug-pmi-units``, :mod:`fairseq_maskplug.scoring.pmi_lexicon`) cuts every
line into *units*: an n-gram of the PMI lexicon (2 <= n <= 5 words), else one whole word. It writes
them as a track of unit starts: 1 on the first token of a unit, 0 on the others (and on ``</s>``).

The policy masks whole units to the budget of the random policy, ``floor(p n + U)`` of the ``n``
maskable tokens (p = 0.15, the paper's rate): the units of the block in a uniformly random order,
each taken when it still fits the budget and skipped when it does not (Google BERT's whole-word
masking rule, which the paper builds on: the realised count never exceeds the budget and units are
never split). The 80/10/10 replacement is decided once per unit (:attr:`corrupts_units`), as the
authors' README says ("done at the unit level"): a unit is masked, kept or replaced whole.

A block cut inside a unit (blocking, truncation) begins with the rest of that unit as a unit.
"""

from dataclasses import dataclass

import numpy as np

from ..common.option_ranges import option
from .fully_explored import views_fit
from .random_masks import probabilistic_count, unit_starts
from .registry import TrackPolicy, register_mask_policy
from .values import ValueRule

UNIT_STARTS = ValueRule("a unit start flag: 1 on a unit's first token, else 0", 0, 1, integral=True)


def unit_ids(starts: np.ndarray, maskable: np.ndarray) -> np.ndarray:
    """The unit of each position: a new unit at every flagged start, at every non-maskable token, after
    one and at position 0 (so special tokens are units of their own and never join a unit)."""
    return np.cumsum(unit_starts(np.asarray(starts) != 0, maskable)) - 1


def _units(starts, maskable):
    """``(unit of each position, maskable unit ids, their lengths)``."""
    ids = unit_ids(starts, maskable)
    lengths = np.bincount(ids, minlength=int(ids[-1]) + 1 if len(ids) else 0)
    maskable_ids = ids[np.asarray(maskable, dtype=bool)]  # non-decreasing: their unique values by one comparison
    candidates = maskable_ids[np.concatenate([[True], maskable_ids[1:] != maskable_ids[:-1]])[:len(maskable_ids)]]
    return ids, candidates, lengths


def _covering(ids: np.ndarray, chosen: np.ndarray, units: int) -> np.ndarray:
    """True at the positions of the ``chosen`` units (``np.isin(ids, chosen)`` by a lookup table)."""
    selected = np.zeros(units, dtype=bool)
    selected[chosen] = True
    return selected[ids]


def fill_budget(order: np.ndarray, lengths: np.ndarray, budget: int, taken: np.ndarray) -> np.ndarray:
    """The units of ``order`` that fit: each taken (True in ``taken``, which this updates) while the
    tokens taken so far plus its length stay within ``budget``; returns the units chosen."""
    chosen, count = [], 0
    for unit in order:
        if taken[unit] or count + lengths[unit] > budget:
            continue
        chosen.append(unit)
        taken[unit] = True
        count += lengths[unit]
        if count == budget:
            break
    return np.asarray(chosen, dtype=np.int64)


def pmi_mask(starts: np.ndarray, maskable: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask of whole units, at most ``floor(rate * n + U)`` tokens (module docstring)."""
    ids, candidates, lengths = _units(starts, maskable)
    budget = probabilistic_count(rate, int(np.sum(maskable)), rng)
    if budget == 0:
        return np.zeros(len(ids), dtype=bool)
    chosen = fill_budget(rng.permutation(candidates), lengths, budget, np.zeros(len(lengths), dtype=bool))
    return _covering(ids, chosen, len(lengths))


def pmi_views(starts: np.ndarray, maskable: np.ndarray, rate: float, rng: np.random.Generator, k: int) -> np.ndarray:
    """``k`` disjoint masks of whole units for FE-MLM (ours): one random order of the units, then view
    1 filled from it as :func:`pmi_mask` fills its mask, view 2 from the units left, and so on, each
    with the budget ``floor(rate * n + U)`` drawn once. View 1 has exactly the policy's distribution;
    later views choose among fewer units, so no claim is made for them."""
    if not views_fit(k, rate):
        raise ValueError(f"{k} disjoint views at rate {rate} need k * rate <= 1")
    ids, candidates, lengths = _units(starts, maskable)
    budget = probabilistic_count(rate, int(np.sum(maskable)), rng)
    order, taken = rng.permutation(candidates), np.zeros(len(lengths), dtype=bool)
    return np.stack([_covering(ids, fill_budget(order, lengths, budget, taken), len(lengths)) for _ in range(k)])


@dataclass
class PMIPolicyOptions:
    pmi_track: str = option("pmi_units", "pmi policy: side-information track of unit starts "
                            "(fairseq-maskplug-pmi-units)")
    pmi_mask_prob: float = option(0.15, "pmi policy: token budget per block, floor(p*n + U) of the n maskable tokens, "
                                  "filled with whole units", range="(0, 1]", source="paper (15%)")


@register_mask_policy("pmi", dataclass=PMIPolicyOptions)
class PMIPolicy(TrackPolicy):
    """Whole PMI units (collocations, else words) in random order up to the budget (Levine et al. 2021)."""

    rate_option = "pmi_mask_prob"

    chooses_spans = True
    corrupts_units = True

    #: ``--mask-unit word``: a word starts a unit when its first token does (units are whole words)
    producer = "fairseq-maskplug-pmi-units --data {data} --splits {split}"
    track_option, track_rule, track_reduction = "pmi_track", UNIT_STARTS, "first"

    def choose(self, tokens, maskable, side_info, rng):
        return pmi_mask(side_info[self.track], maskable, self.options.pmi_mask_prob, rng)

    def views(self, tokens, maskable, side_info, rng, k):
        return pmi_views(side_info[self.track], maskable, self.options.pmi_mask_prob, rng, k)

    def units(self, tokens, maskable, side_info):
        return unit_ids(side_info[self.track], maskable)
