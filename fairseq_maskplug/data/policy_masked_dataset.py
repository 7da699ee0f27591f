"""The one masked-LM dataset on the policy path (:mod:`.policy_path`): a policy's mask per item, or ``K``
fully-explored views of it as ``K`` rows (Zheng et al.), with the collater that builds the masked-LM batch.

Masks change every epoch through ``set_epoch``.
"""

from functools import cached_property
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import torch
from fairseq.data import data_utils

from ..masking import Corruption, MaskPolicy
from .policy_path import MLMFormat, PolicyChooser, PolicyItems, PolicyItemsDataset, PolicyPath


class PolicyMaskedDataset(PolicyItemsDataset):
    """Items ``{"id", "source", "target", "mask_counts"}`` per (seed, epoch, index): ``source`` the tokens with
    the chosen positions corrupted 80/10/10, ``target`` the originals there and pad elsewhere; with ``views=K``
    both are ``K x len`` (the policy's K disjoint views, :meth:`~fairseq_maskplug.masking.MaskPolicy.views`).

    The collater builds fairseq's masked-LM batch: ``net_input.src_tokens`` and ``src_lengths`` (one row per
    item; K adjacent rows per item with views), ``target``, ``mask_counts`` (``rows x 4``,
    :class:`~.policy_path.PolicyPath`), ``ntokens`` (the tokens of all rows), ``nsentences`` (items) and ``id``.
    ``sizes`` are the blocks' (one view's) sizes, for the positions limit; ``num_tokens`` counts the tokens of
    every view, the compute an item costs, for ``--max-tokens`` batching.

    Args:
        dataset: blocked tokens (``<s>`` prepended).
        side_info: blocked side-information datasets by name, aligned with ``dataset``.
        policy: chooses the positions.
        corruption: replacement rule for the chosen positions.
        special_ids: token ids never chosen (``<s>``, ``</s>``, ``<pad>``).
        pad_idx: id written into ``target`` at positions not chosen, and padding.
        seed: base seed.
        views: ``K`` fully-explored views per item; None: one mask.
        states: ``epoch -> state`` for a policy that learns from training (:class:`~.policy_path.PolicyItems`);
            its items then carry ``feedback_groups`` (batched with -1 as padding).
    """

    def __init__(self, dataset, side_info: Mapping[str, object], policy: MaskPolicy, corruption: Corruption,
                 special_ids: Sequence[int], pad_idx: int, seed: int, views: Optional[int] = None,
                 states: Optional[Callable[[int], np.ndarray]] = None):
        super().__init__()
        self.pad, self.views = pad_idx, views
        path = PolicyPath(PolicyChooser(policy, views), MLMFormat(corruption, pad_idx), special_ids, seed)
        self.items = PolicyItems(dataset, side_info, path, states=states)

    @property
    def policy(self) -> MaskPolicy:
        return self.items.path.chooser.policy

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        """The blocks' answer (the masks change through ``set_epoch`` whatever it is; a random crop of the
        blocks may change their sizes)."""
        return getattr(self.items.blocks, "can_reuse_epoch_itr_across_epochs", True)

    @cached_property
    def sizes(self):
        return np.asarray(self.items.blocks.sizes)

    def num_tokens(self, index):
        return (self.views or 1) * int(self.sizes[index])

    def num_tokens_vec(self, indices):
        return (self.views or 1) * self.sizes[indices].astype(np.int64)  # sizes may be uint16: no wrap-around

    def collater(self, samples):
        if not samples:
            return {}
        sources = [row for s in samples for row in (s["source"] if self.views else [s["source"]])]
        targets = [row for s in samples for row in (s["target"] if self.views else [s["target"]])]
        batch = {
            "id": torch.LongTensor([s["id"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": int(sum(len(row) for row in sources)),
            "net_input": {
                "src_tokens": data_utils.collate_tokens(sources, self.pad),
                "src_lengths": torch.LongTensor([len(row) for row in sources]),
            },
            "target": data_utils.collate_tokens(targets, self.pad),
            "mask_counts": torch.cat([s["mask_counts"] for s in samples]),
        }
        if "feedback_groups" in samples[0]:
            batch["feedback_groups"] = data_utils.collate_tokens([s["feedback_groups"] for s in samples], -1)
        return batch
