"""Apply a span-scoring policy (``span_policy`` or ``meta_span_policy`` checkpoint) to a corpus:
per-token start and end logits, the tracks the ``learned_span`` policy reads (Ye, Li et al.
2021, "+Supervised" / "+Meta-learned" applied to the intermediate corpus).

Logits, not probabilities: the span distribution ``softmax(s_i + e_j)`` is formed per
block by the policy (:mod:`fairseq_maskplug.masking.learned_span`), over the spans that
lie in that block. Lines longer than the model's positions are scored in windows, each
framed ``<s> ... </s>`` (:class:`.tagger.TokenTagger`); ``</s>`` gets 0.
"""

from typing import List, Sequence, Tuple

import numpy as np

from .tagger import TokenTagger


class SpanScorer(TokenTagger):
    """A roberta model with a two-output start/end head named ``head_name``."""

    head_kind = "start/end head"

    def __init__(self, model, head_name: str, bos: int, eos: int, pad: int):
        super().__init__(model, head_name, bos, eos, pad)
        classes = model.classification_heads[head_name].out_proj.out_features
        if classes != 2:
            raise ValueError(f"head {head_name!r} has {classes} outputs per token; a span policy has 2 (start, end)")

    def start_end(self, lines: Sequence[np.ndarray], max_tokens: int = 4096,
                  progress: bool = True) -> Tuple[List[np.ndarray], List[np.ndarray]]:
        """``(start logits, end logits)``: one float64 array per line for each."""
        columns = self.score_columns(lines, lambda logits: logits[..., :2], 2, max_tokens, progress,
                                     desc="scoring spans")
        return [c[:, 0] for c in columns], [c[:, 1] for c in columns]
