"""In-domain Mask (Gu et al. 2020, §2.3): per-token importance scores from the trained tagger.

Every token of every line gets the tagger's probability of class 1 ("important");
``<s>``/``</s>`` get 0. Lines longer than the model's positions are scored in
consecutive windows, each framed by ``<s> ... </s>`` as the tagger saw sentences in
training. Windows of many lines share a forward under a token budget, sorted by length.
:meth:`TokenTagger.score_columns` does the same for any per-token output of a head (the
span policies' start and end logits, :mod:`.span_scorer`).
"""

from typing import Callable, List, Sequence

import numpy as np
import torch

from ..common.progress import progress_bar
from .batching import budget_runs
from .heads import FramedHeadModel


class TokenTagger(FramedHeadModel):
    """Scores token lines with a roberta model carrying a ``TokenTaggingHead`` named ``head_name``."""

    head_kind = "tagging head"

    def __init__(self, model, head_name: str, bos: int, eos: int, pad: int):
        super().__init__(model, head_name, bos, eos, pad)
        self.window = model.max_positions() - 2

    def score(self, lines: Sequence[np.ndarray], max_tokens: int = 4096, progress: bool = True) -> List[np.ndarray]:
        """One float64 array per line (same length, ``</s>`` included): P(important) per token."""
        probabilities = lambda logits: torch.softmax(logits, dim=-1)[..., 1:2]  # noqa: E731
        return [scores[:, 0] for scores in self.score_columns(lines, probabilities, 1, max_tokens, progress)]

    @torch.no_grad()
    def score_columns(self, lines: Sequence[np.ndarray], transform: Callable[[torch.Tensor], torch.Tensor],
                      width: int, max_tokens: int = 4096, progress: bool = True,
                      desc: str = "tagging") -> List[np.ndarray]:
        """One ``(len(line), width)`` float64 array per line: ``transform`` of the head's float
        logits ``(B, T, classes) -> (B, T, width)`` at each token; ``</s>`` rows are 0."""
        if max_tokens < self.window + 2:
            raise ValueError(f"max_tokens {max_tokens} is below one window ({self.window + 2} tokens)")
        out = [np.zeros((len(line), width)) for line in lines]
        jobs = []  # (window length, line, start)
        for i, line in enumerate(lines):
            words = len(line) - 1 if len(line) and line[-1] == self.eos else len(line)
            jobs.extend((min(self.window, words - s), i, s) for s in range(0, words, self.window))
        jobs.sort(key=lambda job: job[0])
        bar = progress_bar(total=len(lines), desc=desc, unit="line", disable=None if progress else True)
        done = np.array([len(line) <= 1 for line in lines])  # lines with no word need no window
        remaining = np.bincount([i for _, i, _ in jobs], minlength=len(lines))
        bar.update(int(done.sum()))
        for k, end in budget_runs([n for n, _, _ in jobs], max_tokens, extra=2):
            chunk = jobs[k:end]
            logits = self.logits([lines[i][s:s + n] for n, i, s in chunk])
            columns = transform(logits.float()).double().cpu().numpy()
            for r, (n, i, s) in enumerate(chunk):
                out[i][s:s + n] = columns[r, 1:n + 1]
                remaining[i] -= 1
                if remaining[i] == 0:
                    bar.update(1)
        bar.close()
        return out
