"""Items of the meta-learned span policy: a corpus sentence, its candidate spans, and one
text-to-text example per candidate (the span masked as ``<mask>``, the span as target).

Candidates are drawn uniformly without replacement among the sentence's allowed spans
(:func:`~fairseq_maskplug.masking.learned_span.candidate_spans`), from
``numpy.random.default_rng((seed, epoch, index))``: the same batches in every run with one
seed and after a resume. The examples are the ``masked`` target format with the span
collapsed into one ``<mask>`` (:mod:`fairseq_maskplug.masking.seq2seq`), the format of +SSM
and of the ``learned_span`` policy in ``guided_denoising``.
"""

from typing import Sequence

import numpy as np
import torch
from fairseq.data import FairseqDataset, data_utils

from ..masking import maskable_positions
from ..masking.learned_span import candidate_spans
from ..masking.seq2seq import previous_output_tokens, seq2seq_source, seq2seq_target


class MetaSpanDataset(FairseqDataset):
    """Items ``{"id", "source", "candidates"}`` (``candidates``: ``(k, 2)`` inclusive spans, ``k <=
    count``); the collater adds ``pairs``, the seq2seq batch of every (item, candidate) in order.
    A :class:`FairseqDataset`, not a wrapper: fairseq's wrappers hand batching to the inner
    dataset, which here has no ``num_tokens``."""

    def __init__(self, dataset, count: int, max_length: int, mask_idx: int, special_ids: Sequence[int],
                 eos: int, pad: int, seed: int):
        super().__init__()
        self.dataset = dataset
        if count < 1 or max_length < 1:
            raise ValueError(f"need at least one candidate of at least one token, got {count} of {max_length}")
        self.count, self.max_length = count, max_length
        self.mask_idx, self.special_ids, self.eos, self.pad = mask_idx, tuple(special_ids), eos, pad
        self.seed = seed
        self.epoch = 1

    @property
    def sizes(self):
        return np.asarray(self.dataset.sizes) + 1

    def num_tokens(self, index):
        return int(self.dataset.sizes[index]) + 1  # an upper bound: a truncated line gets its </s> back

    def size(self, index):
        return self.num_tokens(index)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False  # candidates change per epoch

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        tokens = self.dataset[index].numpy()
        if tokens[-1] != self.eos:  # a line truncated to --tokens-per-sample (room kept for this </s>)
            tokens = np.append(tokens, self.eos).astype(tokens.dtype)
        spans = candidate_spans(maskable_positions(tokens, self.special_ids), self.max_length)
        rng = np.random.default_rng((self.seed, self.epoch, index))
        if len(spans) > self.count:
            spans = spans[np.sort(rng.choice(len(spans), size=self.count, replace=False))]
        return {"id": index, "source": torch.from_numpy(tokens), "candidates": torch.from_numpy(spans)}

    def example(self, tokens: np.ndarray, span) -> tuple:
        mask = np.zeros(len(tokens), dtype=bool)
        mask[span[0]:span[1] + 1] = True
        return (seq2seq_source(tokens, mask, self.mask_idx, collapse=True),
                seq2seq_target(tokens, mask, "masked", self.mask_idx, self.eos))

    def collater(self, samples):
        if not samples:
            return {}
        width = max(1, max(len(s["candidates"]) for s in samples))
        candidates = torch.full((len(samples), width, 2), -1, dtype=torch.long)
        sources, targets = [], []
        for row, s in enumerate(samples):
            candidates[row, :len(s["candidates"])] = s["candidates"]
            for span in s["candidates"].tolist():
                source, target = self.example(s["source"].numpy(), span)
                sources.append(torch.from_numpy(source))
                targets.append(torch.from_numpy(target))
        if not sources:
            raise ValueError("a batch of meta_span_policy has no candidate span (empty sentences only)")
        pairs = {
            "src_tokens": data_utils.collate_tokens(sources, self.pad, self.eos),
            "src_lengths": torch.LongTensor([len(s) for s in sources]),
            "prev_output_tokens": data_utils.collate_tokens(
                [torch.from_numpy(previous_output_tokens(t.numpy(), self.eos)) for t in targets], self.pad, self.eos),
            "target": data_utils.collate_tokens(targets, self.pad, self.eos),
        }
        return {
            "id": torch.LongTensor([s["id"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": int(sum(len(s["source"]) for s in samples)),
            "net_input": {"src_tokens": data_utils.collate_tokens([s["source"] for s in samples], self.pad, self.eos),
                          "src_lengths": torch.LongTensor([len(s["source"]) for s in samples])},
            "candidates": candidates,
            "pairs": pairs,
        }
