"""Items of two datasets behind one index, a batch always from one of them (TLM's task and
external data)."""

import numpy as np
from fairseq.data import FairseqDataset

SOURCES = ("task", "external")


def _item_sizes(dataset) -> np.ndarray:
    """One size per item (a NestedDictionaryDataset keeps a list of size arrays; the first)."""
    sizes = dataset.sizes
    return np.asarray(sizes[0] if isinstance(sizes, (list, tuple)) else sizes).reshape(-1)


class TwoSourceDataset(FairseqDataset):
    """Indices ``[0, len(task))`` are task items, the rest external items. The collated batch
    gets ``sample["source"]`` = ``"task"`` or ``"external"``; a batch mixing them is refused.
    Batching is the task's (:mod:`~fairseq_maskplug.data.tlm_schedule`), so this dataset has
    no ``ordered_indices`` order of its own beyond ``0..n``."""

    def __init__(self, task, external):
        self.parts = (task, external)
        self.offset = len(task)
        self.sizes = np.concatenate([_item_sizes(task), _item_sizes(external)])

    def __len__(self):
        return self.offset + len(self.parts[1])

    def _locate(self, index):
        return (0, index) if index < self.offset else (1, index - self.offset)

    def __getitem__(self, index):
        source, inner = self._locate(int(index))
        return source, self.parts[source][inner]

    def collater(self, samples):
        if not samples:
            return {}
        sources = {source for source, _ in samples}
        if len(sources) != 1:
            raise ValueError("a TLM batch mixes task and external items; batches come from one source")
        (source,) = sources
        batch = self.parts[source].collater([item for _, item in samples])
        batch["source"] = SOURCES[source]
        return batch

    def num_tokens(self, index):
        return int(self.sizes[index])

    def size(self, index):
        return int(self.sizes[index])

    def ordered_indices(self):
        return np.arange(len(self), dtype=np.int64)

    @property
    def supports_prefetch(self):
        return False

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        for part in self.parts:
            if hasattr(part, "set_epoch"):
                part.set_epoch(epoch)

    def part_indices(self, source: int) -> np.ndarray:
        """Global indices of one source's items."""
        start = 0 if source == 0 else self.offset
        return np.arange(start, start + len(self.parts[source]), dtype=np.int64)
