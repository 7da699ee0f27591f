"""A frozen fairseq roberta model and one of its heads, fed ``<s> tokens </s>`` inputs."""

from typing import List

import numpy as np
import torch


class FramedHeadModel:
    """``model`` in eval mode with the head ``head_name`` (checked); :meth:`logits` frames each
    input as ``<s> x </s>``, right-pads the batch with ``pad`` and returns the head's output."""

    head_kind = "head"

    def __init__(self, model, head_name: str, bos: int, eos: int, pad: int):
        heads = getattr(model, "classification_heads", {})
        if head_name not in heads:
            raise ValueError(f"the checkpoint has no {self.head_kind} {head_name!r} (heads: {sorted(heads)})")
        self.model = model.eval()
        self.head_name = head_name
        self.bos, self.eos, self.pad = bos, eos, pad
        self.device = next(model.parameters()).device

    @torch.no_grad()
    def logits(self, inputs: List[np.ndarray]) -> torch.Tensor:
        width = max(len(x) for x in inputs) + 2
        batch = np.full((len(inputs), width), self.pad, dtype=np.int64)  # numpy: row writes cost less than in torch
        batch[:, 0] = self.bos
        for row, x in enumerate(inputs):
            batch[row, 1:len(x) + 1] = x
            batch[row, len(x) + 1] = self.eos
        return self.model(torch.from_numpy(batch).to(self.device), features_only=True,
                          classification_head_name=self.head_name)[0]
