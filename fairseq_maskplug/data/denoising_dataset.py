"""Text-to-text items from a mask policy: ``(source, target)`` per (seed, epoch, index).

The one policy path (:mod:`.policy_path`) with the :class:`~.policy_path.Seq2SeqFormat`: a
registered policy chooses positions, a target format (:mod:`fairseq_maskplug.masking.seq2seq`)
turns them into a pair. Unlike fairseq's ``DenoisingDataset``, every draw comes from
``numpy.random.default_rng((seed, epoch, index))``: two runs with one seed build identical
batches and a resumed run builds the batches the uninterrupted run would have built.
"""

from typing import Mapping, Optional, Sequence

import numpy as np
import torch
from fairseq.data import data_utils

from ..masking import Corruption, MaskPolicy
from ..masking.seq2seq import previous_output_tokens
from .policy_path import PolicyChooser, PolicyItems, PolicyItemsDataset, PolicyPath, Seq2SeqFormat


class PolicyDenoisingDataset(PolicyItemsDataset):
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
        target_format: ``full``, ``masked`` or ``t5``.
        collapse: one ``<mask>`` per run of chosen positions in the source.
        corruption: ``None`` replaces every chosen token by ``<mask>``; a
            :class:`Corruption` applies its 80/10/10 shares.
        mask_idx, special_ids, eos, pad: dictionary ids.
        seed: base seed.
        sentinels: the ``t5`` format's sentinel ids, ``<extra_id_0>`` first.
    """

    def __init__(self, dataset, side_info: Mapping[str, object], policy: MaskPolicy, target_format: str,
                 collapse: bool, corruption: Optional[Corruption], mask_idx: int, special_ids: Sequence[int],
                 eos: int, pad: int, seed: int, sentinels: Sequence[int] = ()):
        super().__init__()
        self.eos, self.pad = eos, pad  # framing and collating; the format keeps the rest
        self._sizes = np.asarray(dataset.sizes, dtype=np.int64) + 1
        path = PolicyPath(PolicyChooser(policy), Seq2SeqFormat(target_format, collapse, corruption, mask_idx, eos,
                                                                sentinels), special_ids, seed)
        self.items = PolicyItems(dataset, side_info, path, frame=self.with_eos)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return True  # sizes do not change with the epoch; the items do, through set_epoch

    @property
    def sizes(self):
        return self._sizes

    def num_tokens(self, index):
        return int(self._sizes[index])

    def with_eos(self, tokens, side):
        """The block and its side information, ``</s>`` appended where the block lacks one (a 0 in
        every track)."""
        if tokens[-1] != self.eos:
            tokens = np.append(tokens, self.eos).astype(tokens.dtype)
            side = {name: np.append(values, 0).astype(values.dtype) for name, values in side.items()}
        return tokens, side

    def framed(self, index):
        """The block ``index`` and its side information as the policy sees them (:meth:`with_eos`)."""
        return self.items.framed(index)

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
