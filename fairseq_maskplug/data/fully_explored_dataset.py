"""FE-MLM datasets (Zheng et al.): K fully-explored views per item, collated K rows per sequence."""

import numpy as np
from fairseq.data import BaseWrapperDataset, FairseqDataset, data_utils

from ..masking import MaskPolicy
from .policy_masked_dataset import SeededMaskingDataset
from .policy_path import checked_views


class FullyExploredDataset(SeededMaskingDataset):
    """K views per item (Zheng et al., Eq. 10): items are ``K x len`` sources and targets, the
    policy's :meth:`~fairseq_maskplug.masking.MaskPolicy.views` (``random``: the paper's subword views,
    ``span``: its span views), checked by :func:`checked_views`. ``side_info`` holds the tracks the
    policy reads."""

    def __init__(self, dataset, views: int, policy: MaskPolicy, corruption, special_ids, pad_idx, seed,
                 side_info=None):
        super().__init__(dataset, side_info or {}, corruption, special_ids, pad_idx, seed, policy)
        self.views = views

    def choose(self, tokens, maskable, side, rng, index):
        return checked_views(self.policy, tokens, maskable, side, rng, index, self.views)


class FlatViewsDataset(BaseWrapperDataset):
    """Collates ``K x len`` items into ``B*K`` right-padded rows, the K views of a sequence adjacent."""

    def __init__(self, dataset, pad_idx: int):
        super().__init__(dataset)
        self.pad_idx = pad_idx

    def collater(self, samples):
        return data_utils.collate_tokens([row for views in samples for row in views], self.pad_idx)


class ViewCountedDataset(BaseWrapperDataset):
    """Counts ``views * size`` tokens per item for ``--max-tokens`` batching (the compute
    an item costs), while ``size`` stays the per-view length for the positions limit."""

    def __init__(self, dataset, sizes: np.ndarray, views: int):
        super().__init__(dataset)
        self._sizes, self.views = np.asarray(sizes), views

    def num_tokens(self, index):
        return self.views * int(self._sizes[index])

    def num_tokens_vec(self, indices):
        return self.views * self._sizes[indices].astype(np.int64)  # sizes may be uint16: no wrap-around

    def batch_by_size(self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        # FairseqDataset's implementation, on this dataset's token counts (the wrapped
        # dataset would count one view per item)
        return FairseqDataset.batch_by_size(self, indices, max_tokens, max_sentences,
                                            required_batch_size_multiple)
