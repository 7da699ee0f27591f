"""The one policy path (``docs/design.md``): any policy's choice, per (seed, epoch, index), handed to an
output format.

:class:`PolicyPath` draws from ``numpy.random.default_rng((seed, epoch, index))``: the positions
first (:class:`PolicyChooser`: a policy's checked ``choose``, or its K fully-explored views),
then the output format's draws on the same generator. The same seed gives the same items in every
run and after a resume, and items change from epoch to epoch. Every item carries its own mask
statistics (``mask_counts``: chosen and maskable positions per row). The formats:

- :class:`MLMFormat`: the chosen positions corrupted 80/10/10 (Devlin et al.; fairseq
  ``masked_lm``), the target the originals there and pad elsewhere; K views give K rows;
- :class:`Seq2SeqFormat`: a BART-style source and a ``full`` or ``masked`` target (Ye, Li et al.;
  :mod:`fairseq_maskplug.masking.seq2seq`).

(T5's ``preprocessors.py`` composes noise_mask_fn x inputs_fn x targets_fn the same way.)

:class:`PolicyItems` is the dataset core both dataset kinds hold (``PolicyMaskedDataset``, with or without
fully-explored views, and ``PolicyDenoisingDataset``): blocks and side information read at an index,
framed, and passed through the path at the current epoch.
"""

import dataclasses
from typing import Callable, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch
from fairseq.data import FairseqDataset

from ..masking import Corruption, MaskPolicy, corrupt, maskable_positions
from ..masking.seq2seq import seq2seq_source, seq2seq_target, t5_pair



def replaced(corruption: Optional[Corruption], replacement: Optional[Tuple[float, float]]) -> Optional[Corruption]:
    """``corruption`` with a policy's :meth:`~fairseq_maskplug.masking.MaskPolicy.replacement` for one sequence
    (``(leave_unmasked_prob, random_token_prob)``), or unchanged where it gives none."""
    if corruption is None or replacement is None:
        return corruption
    leave, random = replacement
    return dataclasses.replace(corruption, leave_unmasked_prob=leave, random_token_prob=random)


class MLMFormat:
    """``{"source": corrupted tokens, "target": originals where chosen, pad elsewhere}`` (K rows for K views)."""

    def __init__(self, corruption: Corruption, pad_idx: int):
        self.corruption, self.pad_idx = corruption, pad_idx

    def __call__(self, tokens: np.ndarray, masks: np.ndarray, rng: np.random.Generator,
                 units: Optional[np.ndarray] = None, replacement: Optional[Tuple[float, float]] = None) -> dict:
        """(``replacement``: the policy's for this sequence, :func:`replaced`.)"""
        corruption = replaced(self.corruption, replacement)
        if masks.ndim == 1:  # one view: no stacking (every masked-LM item, every Hugging Face collator row)
            target = np.full_like(tokens, self.pad_idx)
            target[masks] = tokens[masks]
            return {"source": torch.from_numpy(corrupt(tokens, masks, rng, corruption, units)),
                    "target": torch.from_numpy(target)}
        sources, targets = [], []
        for mask in np.atleast_2d(masks):
            target = np.full_like(tokens, self.pad_idx)
            target[mask] = tokens[mask]
            sources.append(corrupt(tokens, mask, rng, corruption, units))
            targets.append(target)
        return {"source": torch.from_numpy(np.stack(sources)), "target": torch.from_numpy(np.stack(targets))}


class Seq2SeqFormat:
    """``{"source", "target"}`` of a text-to-text pair (:func:`seq2seq_source`, :func:`seq2seq_target`;
    :func:`t5_pair` for the ``t5`` format, with its ``sentinels``)."""

    def __init__(self, target_format: str, collapse: bool, corruption: Optional[Corruption], mask_idx: int, eos: int,
                 sentinels: Sequence[int] = ()):
        self.target_format, self.collapse, self.corruption = target_format, collapse, corruption
        self.mask_idx, self.eos, self.sentinels = mask_idx, eos, tuple(sentinels)
        if target_format == "t5" and not self.sentinels:
            raise ValueError("the t5 target format needs sentinel ids")

    def __call__(self, tokens: np.ndarray, mask: np.ndarray, rng: np.random.Generator,
                 units: Optional[np.ndarray] = None, replacement: Optional[Tuple[float, float]] = None) -> dict:
        """(``units`` are not read: a text-to-text source masks every chosen token; ``replacement``: the policy's
        for this sequence, where the source corrupts by 80/10/10, :func:`replaced`.)"""
        if self.target_format == "t5":
            source, target = t5_pair(tokens, mask, self.sentinels, self.eos)
        else:
            source = seq2seq_source(tokens, mask, self.mask_idx, self.collapse, rng,
                                    replaced(self.corruption, replacement))
            target = seq2seq_target(tokens, mask, self.target_format, self.mask_idx, self.eos)
        return {"source": torch.from_numpy(source), "target": torch.from_numpy(target)}


class PolicyChooser:
    """All the item path asks of a policy, in one object: :meth:`__call__` the positions to predict (the
    policy's ``choose``, or with ``views=K`` its ``K`` fully-explored views, checked: :func:`checked_choice`,
    :func:`checked_views`) and :meth:`units` the units they are counted in (and, for a policy that
    :attr:`~fairseq_maskplug.masking.MaskPolicy.corrupts_units`, corrupted in)."""

    def __init__(self, policy: MaskPolicy, views: Optional[int] = None):
        self.policy, self.views = policy, views
        #: what the policy learns from training (read once here, not per item), or None
        self.feedback = getattr(policy, "feedback", None)  # (None: a dataset built without a policy, for its sizes)

    def with_state(self, state) -> "PolicyChooser":
        """The chooser of the policy drawing with training's statistics ``state`` (:mod:`...masking.feedback`)."""
        return PolicyChooser(self.policy.with_state(state), self.views)

    def __call__(self, tokens, maskable, side_info, rng, index) -> np.ndarray:
        """A boolean mask, or ``K x len`` for K views."""
        if self.views is None:
            return checked_choice(self.policy, tokens, maskable, side_info, rng, index)
        return checked_views(self.policy, tokens, maskable, side_info, rng, index, self.views)

    def units(self, tokens, maskable, side_info) -> Optional[np.ndarray]:
        """:meth:`~fairseq_maskplug.masking.MaskPolicy.units` (words under ``--mask-unit word``, PMI units);
        None: each token is one."""
        return self.policy.units(tokens, maskable, side_info)

    @property
    def corrupts_units(self) -> bool:
        return self.policy.corrupts_units

    def replacement(self, tokens, maskable, side_info) -> Optional[Tuple[float, float]]:
        """:meth:`~fairseq_maskplug.masking.MaskPolicy.replacement` (None: the run's 80/10/10)."""
        return self.policy.replacement(tokens, maskable, side_info)


class PolicyPath:
    """``path(tokens, side_info, epoch, index)``: the item of one block, with its mask statistics
    ``mask_counts``, an int64 ``rows x 4`` tensor per row of the item (one row; K rows for K views):
    positions chosen, maskable positions, units chosen, maskable units. The tasks log them
    (``tasks/mask_stats.py``). The :class:`PolicyChooser` gives the positions and their units.
    """

    def __init__(self, chooser: PolicyChooser, output_format: Callable, special_ids: Sequence[int], seed: int):
        self.chooser, self.output_format = chooser, output_format
        self.special_ids, self.seed = tuple(special_ids), seed

    def __call__(self, tokens: np.ndarray, side_info: Mapping[str, np.ndarray], epoch: int, index: int) -> dict:
        return self.draw(tokens, side_info, np.random.default_rng((self.seed, epoch, index)), index)

    def draw(self, tokens: np.ndarray, side_info: Mapping[str, np.ndarray], rng: np.random.Generator, index: int,
             chooser: Optional[PolicyChooser] = None, counts: bool = True) -> dict:
        """The item of one block drawn with ``rng`` by ``chooser`` (default: the path's; a training batch's
        live draw passes one holding the current statistics, ``tasks/training_feedback.py``); without
        ``counts`` no ``mask_counts`` (a caller that logs none: the draw itself is the same)."""
        chooser = chooser or self.chooser
        maskable = maskable_positions(tokens, self.special_ids)
        masks = chooser(tokens, maskable, side_info, rng, index)
        units = chooser.units(tokens, maskable, side_info)
        replacement = chooser.replacement(tokens, maskable, side_info)
        extra = {} if replacement is None else {"replacement": replacement}  # (a format of one's own may not take it)
        item = self.output_format(tokens, masks, rng, units if units is not None and chooser.corrupts_units
                                  else None, **extra)
        if counts:
            item["mask_counts"] = torch.from_numpy(mask_counts(np.atleast_2d(masks), maskable, units))
        if chooser.feedback is not None:  # the group of each position, for the losses the policy learns from
            item["feedback_groups"] = torch.from_numpy(np.asarray(side_info[chooser.feedback.track],
                                                                  dtype=np.int64))
        return item


def mask_counts(masks: np.ndarray, maskable: np.ndarray, units: Optional[np.ndarray]) -> np.ndarray:
    """``rows x 4`` int64: per mask row, positions chosen, maskable positions, units with a chosen
    position, maskable units (each token a unit when ``units`` is None)."""
    chosen = masks.sum(axis=1)
    if units is None:
        unit_chosen, unit_total = chosen, int(maskable.sum())
    else:
        units = np.asarray(units)
        unit_chosen = np.array([np.unique(units[row]).size for row in masks])
        unit_total = np.unique(units[maskable]).size
    return np.stack([chosen, np.full_like(chosen, maskable.sum()), unit_chosen,
                     np.full_like(chosen, unit_total)], axis=1).astype(np.int64)


def unframed(tokens: np.ndarray, side_info: Mapping[str, np.ndarray]):
    """The block as it was blocked (:class:`PolicyItems`' default framing)."""
    return tokens, side_info


class PolicyItems:
    """The one dataset core that the masked-LM and text-to-text datasets hold: blocked tokens and their
    side information (aligned, blocked alike), read at an index, framed (``frame(tokens, side)``:
    as blocked, or with ``</s>`` appended for BART) and made into the item of the current epoch by a
    :class:`PolicyPath`. ``set_epoch`` reaches the blocks and every side-information track; with ``states``
    (``epoch -> state``, a policy that learns from training) the policy draws with the epoch's state."""

    def __init__(self, blocks, side_info: Mapping[str, object], path: PolicyPath, frame: Callable = unframed,
                 states: Optional[Callable[[int], np.ndarray]] = None):
        self.blocks, self.side_info, self.path, self.frame = blocks, dict(side_info), path, frame
        self.states, self.chooser = states, path.chooser
        self.epoch = 1

    def set_epoch(self, epoch: int) -> None:
        for part in (self.blocks, *self.side_info.values()):
            if hasattr(part, "set_epoch"):
                part.set_epoch(epoch)
        if self.states is not None:
            self.path.chooser = self.chooser.with_state(self.states(epoch))
        self.epoch = epoch

    def framed(self, index: int):
        """``(tokens, side information)`` of block ``index``, framed."""
        return self.frame(self.blocks[index].numpy(), {name: ds[index].numpy() for name, ds in self.side_info.items()})

    def __getitem__(self, index: int) -> dict:
        return self.path(*self.framed(index), self.epoch, index)


class PolicyItemsDataset(FairseqDataset):
    """Base of the datasets on the policy path (``PolicyMaskedDataset``, ``PolicyDenoisingDataset``): items
    ``{"id", **path item}`` from their :class:`PolicyItems` (``self.items``, set by the subclass), one per
    block, redrawn through ``set_epoch``; ``size`` reads the subclass's ``sizes``."""

    items: PolicyItems

    def __len__(self):
        return len(self.items.blocks)

    def set_epoch(self, epoch):
        self.items.set_epoch(epoch)

    def size(self, index):
        return int(self.sizes[index])

    def __getitem__(self, index):
        return {"id": index, **self.items[index]}


def checked_choice(policy: MaskPolicy, tokens, maskable, side, rng, index) -> np.ndarray:
    """``policy.choose(...)``, refused unless it is a boolean array of the tokens' shape that
    chooses no special token (a plugin's mistake named at the item, not a silent misalignment)."""
    mask = np.asarray(policy.choose(tokens, maskable, side, rng))
    if mask.shape != tokens.shape or mask.dtype != bool:
        raise ValueError(f"{type(policy).__name__}.choose returned {mask.dtype} {mask.shape}, "
                         f"expected a boolean array of shape {tokens.shape}")
    if (mask & ~maskable).any():
        raise ValueError(f"{type(policy).__name__} chose a special token at item {index}")
    return mask


def checked_views(policy: MaskPolicy, tokens, maskable, side, rng, index, k: int) -> np.ndarray:
    """``policy.views(...)``, refused unless it is a ``k x len`` boolean array of pairwise-disjoint
    masks that choose no special token (a plugin's mistake named at the item)."""
    masks = np.asarray(policy.views(tokens, maskable, side, rng, k))
    name = type(policy).__name__
    if masks.shape != (k, len(tokens)) or masks.dtype != bool:
        raise ValueError(f"{name}.views returned {masks.dtype} {masks.shape}, expected a boolean array of shape "
                         f"{(k, len(tokens))}")
    if (masks.sum(axis=0) > 1).any():
        raise ValueError(f"{name}.views returned overlapping views at item {index}")
    if (masks & ~maskable).any():
        raise ValueError(f"{name}.views chose a special token at item {index}")
    return masks
