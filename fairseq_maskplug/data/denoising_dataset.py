"""Text-to-text items from a mask policy: ``(source, target)`` per (seed, epoch, index).

The one policy path (:mod:`.policy_path`) with the :class:`~.policy_path.Seq2SeqFormat`: a
registered policy chooses positions, a target format (:mod:`fairseq_maskplug.masking.seq2seq`)
turns them into a pair. Unlike fairseq's ``DenoisingDataset``, every draw comes from
``numpy.random.default_rng((seed, epoch, index))``: two runs with one seed build identical
batches and a resumed run builds the batches the uninterrupted run would have built.
"""

from functools import partial
from typing import Mapping, Optional, Sequence

import numpy as np
import torch
from fairseq.data import FairseqDataset, data_utils

from ..masking import Corruption, MaskPolicy
from ..masking.seq2seq import previous_output_tokens
from .policy_path import PolicyPath, Seq2SeqFormat, checked_choice


class PolicyDenoisingDataset(FairseqDataset):
    """Items ``{"id", "source", "target", "mask_counts"}``; the collater builds fairseq's seq2seq
    batch (``net_input.src_tokens/src_lengths/prev_output_tokens``, ``target``) and the batch's
    ``mask_counts`` (one row per item).

    Blocks come from the masked-LM blocking with ``<s>`` prepended; a block that does not end
    with ``</s>`` (cut inside a line) gets one appended, as BART frames ``<s> ... </s>``, and
    its side information a 0. ``sizes`` are the blocks' sizes plus that one token: an upper
    bound of both the source and the target length, which is what batching and filtering
    need (a :class:`FairseqDataset`, not a wrapper, so that nothing reaches past these sizes
    to the blocks').

    Args:
        dataset: blocked tokens (``<s>`` prepended), as for the masked-LM tasks.
        side_info: blocked side information by name, aligned with ``dataset``.
        policy: chooses the positions.
        target_format: ``full`` or ``masked``.
        collapse: one ``<mask>`` per run of chosen positions in the source.
        corruption: ``None`` replaces every chosen token by ``<mask>``; a
            :class:`Corruption` applies its 80/10/10 shares.
        mask_idx, special_ids, eos, pad: dictionary ids.
        seed: base seed.
    """

    def __init__(self, dataset, side_info: Mapping[str, object], policy: MaskPolicy, target_format: str,
                 collapse: bool, corruption: Optional[Corruption], mask_idx: int, special_ids: Sequence[int],
                 eos: int, pad: int, seed: int):
        super().__init__()
        self.dataset = dataset
        self.side_info = dict(side_info)
        self.eos, self.pad = eos, pad  # framing and collating; the format keeps the rest
        self.epoch = 1
        self._sizes = np.asarray(dataset.sizes, dtype=np.int64) + 1
        self.path = PolicyPath(partial(checked_choice, policy),
                               Seq2SeqFormat(target_format, collapse, corruption, mask_idx, eos), special_ids, seed)

    def __len__(self):
        return len(self.dataset)

    def set_epoch(self, epoch):
        for side in (self.dataset, *self.side_info.values()):
            if hasattr(side, "set_epoch"):
                side.set_epoch(epoch)
        self.epoch = epoch

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return True  # sizes do not change with the epoch; the items do, through set_epoch

    @property
    def sizes(self):
        return self._sizes

    def size(self, index):
        return int(self._sizes[index])

    def num_tokens(self, index):
        return int(self._sizes[index])

    def framed(self, index):
        """The block and its side information, ``</s>`` appended where the block lacks one."""
        tokens = self.dataset[index].numpy()
        side = {name: ds[index].numpy() for name, ds in self.side_info.items()}
        if tokens[-1] != self.eos:
            tokens = np.append(tokens, self.eos).astype(tokens.dtype)
            side = {name: np.append(values, 0).astype(values.dtype) for name, values in side.items()}
        return tokens, side

    def __getitem__(self, index):
        tokens, side = self.framed(index)
        return {"id": index, **self.path(tokens, side, self.epoch, index)}

    def collater(self, samples):
        if not samples:
            return {}
        source = data_utils.collate_tokens([s["source"] for s in samples], self.pad, self.eos)
        target = data_utils.collate_tokens([s["target"] for s in samples], self.pad, self.eos)
        previous = data_utils.collate_tokens(
            [torch.from_numpy(previous_output_tokens(s["target"].numpy(), self.eos)) for s in samples],
            self.pad, self.eos)
        return {
            "id": torch.LongTensor([s["id"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": int(sum(len(s["target"]) for s in samples)),
            "net_input": {
                "src_tokens": source,
                "src_lengths": torch.LongTensor([len(s["source"]) for s in samples]),
                "prev_output_tokens": previous,
            },
            "target": target,
            "mask_counts": torch.cat([s["mask_counts"] for s in samples]),
        }
