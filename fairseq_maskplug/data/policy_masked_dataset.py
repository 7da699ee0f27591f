"""Masked-LM datasets on the one policy path (:mod:`.policy_path`): one policy mask per item (K
views: :mod:`.fully_explored_dataset`).

Masks change every epoch through ``set_epoch``; batch shapes do not, so fairseq may reuse
its epoch iterator (``can_reuse_epoch_itr_across_epochs``, as for ``MaskTokensDataset``).
"""

from functools import cached_property
from typing import Dict, Mapping, Optional, Sequence

import numpy as np
import torch
from fairseq.data import BaseWrapperDataset

from ..masking import Corruption, MaskPolicy
from .policy_path import MLMFormat, PolicyItems, PolicyPath, checked_choice


class SeededMaskingDataset(BaseWrapperDataset):
    """Base: items become ``{"source": corrupted tokens, "target": originals where chosen, pad
    elsewhere}`` through the one policy path (:class:`~.policy_path.PolicyPath` with the
    :class:`~.policy_path.MLMFormat`), with the item's ``mask_counts``.
    Subclasses choose positions in :meth:`choose`.

    Args:
        dataset: blocked token dataset (with ``<s>`` prepended).
        side_info: blocked side-information datasets by name, aligned with ``dataset``.
        corruption: replacement rule for the chosen positions.
        special_ids: token ids never chosen (``<s>``, ``</s>``, ``<pad>``).
        pad_idx: id written into ``target`` at positions not chosen.
        seed: base seed.
    """

    def __init__(self, dataset, side_info: Mapping[str, object], corruption: Corruption,
                 special_ids: Sequence[int], pad_idx: int, seed: int, policy: Optional[MaskPolicy] = None):
        super().__init__(dataset)
        self.policy = policy
        self.items = PolicyItems(dataset, side_info, PolicyPath(self.choose, MLMFormat(corruption, pad_idx),
                                                                special_ids, seed, policy))
        self._last = None  # (epoch, index, item): the source, target and count views ask in turn

    def set_epoch(self, epoch):
        self.items.set_epoch(epoch)

    def choose(self, tokens, maskable, side, rng, index) -> np.ndarray:
        """Boolean mask (1-D, or ``K x len`` for K views) of the positions to predict."""
        raise NotImplementedError

    def __getitem__(self, index) -> Dict[str, torch.Tensor]:
        epoch = self.items.epoch
        if self._last is None or self._last[:2] != (epoch, index):
            self._last = (epoch, index, self.items[index])
        return self._last[2]

    @cached_property
    def source(self):
        """Dataset view of the corrupted inputs."""
        return _FieldView(self, "source")

    @cached_property
    def target(self):
        """Dataset view of the prediction targets (pad where nothing is predicted)."""
        return _FieldView(self, "target")

    @cached_property
    def mask_counts(self):
        """Dataset view of the items' mask statistics, collated into one ``rows x 4`` tensor
        (:class:`~.policy_path.PolicyPath`; K rows per item for K views, in the batch's row order)."""
        return _CountsView(self, "mask_counts")


class PolicyMaskedDataset(SeededMaskingDataset):
    """One mask per item, chosen by a :class:`~fairseq_maskplug.masking.MaskPolicy`."""

    def __init__(self, dataset, side_info, policy: MaskPolicy, corruption, special_ids, pad_idx, seed):
        super().__init__(dataset, side_info, corruption, special_ids, pad_idx, seed, policy)

    def choose(self, tokens, maskable, side, rng, index):
        return checked_choice(self.policy, tokens, maskable, side, rng, index)


class _FieldView(BaseWrapperDataset):
    def __init__(self, dataset: SeededMaskingDataset, field: str):
        super().__init__(dataset)
        self.field = field

    def __getitem__(self, index):
        return self.dataset[index][self.field]


class _CountsView(_FieldView):
    def collater(self, samples):
        return torch.cat(samples) if samples else torch.zeros((0, 4), dtype=torch.long)
