"""Masking datasets seeded by (seed, epoch, index): one policy mask per item (K views: :mod:`.fully_explored_dataset`).

Masks change every epoch through ``set_epoch``; batch shapes do not, so fairseq may reuse
its epoch iterator (``can_reuse_epoch_itr_across_epochs``, as for ``MaskTokensDataset``).
"""

from functools import cached_property
from typing import Dict, Mapping, Sequence

import numpy as np
import torch
from fairseq.data import BaseWrapperDataset

from ..masking import Corruption, MaskPolicy, corrupt, maskable_positions


class SeededMaskingDataset(BaseWrapperDataset):
    """Base: items become ``{"source": corrupted tokens, "target": originals where chosen, pad elsewhere}``.

    Each item draws from ``numpy.random.default_rng((seed, epoch, index))``: the same
    seed gives the same masks in every run and after a resume, and masks change
    from epoch to epoch. Subclasses choose positions in :meth:`choose`; the shared
    80/10/10 :func:`~fairseq_maskplug.masking.corrupt` replaces them.

    Args:
        dataset: blocked token dataset (with ``<s>`` prepended).
        side_info: blocked side-information datasets by name, aligned with ``dataset``.
        corruption: replacement rule for the chosen positions.
        special_ids: token ids never chosen (``<s>``, ``</s>``, ``<pad>``).
        pad_idx: id written into ``target`` at positions not chosen.
        seed: base seed.
    """

    def __init__(self, dataset, side_info: Mapping[str, object], corruption: Corruption,
                 special_ids: Sequence[int], pad_idx: int, seed: int):
        super().__init__(dataset)
        self.side_info = dict(side_info)
        self.corruption = corruption
        self.special_ids = tuple(special_ids)
        self.pad_idx = pad_idx
        self.seed = seed
        self.epoch = 1
        self._last = None  # (epoch, index, item): source and target views ask in turn

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        for side in self.side_info.values():
            if hasattr(side, "set_epoch"):
                side.set_epoch(epoch)
        self.epoch = epoch

    def choose(self, tokens, maskable, side, rng, index) -> np.ndarray:
        """Boolean mask (1-D, or ``K x len`` for K views) of the positions to predict."""
        raise NotImplementedError

    def __getitem__(self, index) -> Dict[str, torch.Tensor]:
        if self._last is not None and self._last[:2] == (self.epoch, index):
            return self._last[2]
        tokens = self.dataset[index].numpy()
        side = {name: ds[index].numpy() for name, ds in self.side_info.items()}
        rng = np.random.default_rng((self.seed, self.epoch, index))
        maskable = maskable_positions(tokens, self.special_ids)
        masks = self.choose(tokens, maskable, side, rng, index)
        sources, targets = [], []
        for mask in np.atleast_2d(masks):
            target = np.full_like(tokens, self.pad_idx)
            target[mask] = tokens[mask]
            sources.append(corrupt(tokens, mask, rng, self.corruption))
            targets.append(target)
        if masks.ndim == 1:
            item = {"source": torch.from_numpy(sources[0]), "target": torch.from_numpy(targets[0])}
        else:
            item = {"source": torch.from_numpy(np.stack(sources)), "target": torch.from_numpy(np.stack(targets))}
        self._last = (self.epoch, index, item)
        return item

    @cached_property
    def source(self):
        """Dataset view of the corrupted inputs."""
        return _FieldView(self, "source")

    @cached_property
    def target(self):
        """Dataset view of the prediction targets (pad where nothing is predicted)."""
        return _FieldView(self, "target")


class PolicyMaskedDataset(SeededMaskingDataset):
    """One mask per item, chosen by a :class:`~fairseq_maskplug.masking.MaskPolicy`."""

    def __init__(self, dataset, side_info, policy: MaskPolicy, corruption, special_ids, pad_idx, seed):
        super().__init__(dataset, side_info, corruption, special_ids, pad_idx, seed)
        self.policy = policy

    def choose(self, tokens, maskable, side, rng, index):
        return checked_choice(self.policy, tokens, maskable, side, rng, index)


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


class _FieldView(BaseWrapperDataset):
    def __init__(self, dataset: SeededMaskingDataset, field: str):
        super().__init__(dataset)
        self.field = field

    def __getitem__(self, index):
        return self.dataset[index][self.field]
