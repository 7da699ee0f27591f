"""Downstream Mask: task-important tokens by the buffer algorithm (Gu et al. 2020, §2.2, Eq. 1).

For a sentence ``s = w_1 .. w_n`` with gold label ``y`` and a classifier fine-tuned on
the task, a buffer ``s'`` starts empty; token ``w_i`` is scored on the buffer with
``w_i`` appended::

    S(w_i) = P(y | s) - P(y | s'_{i-1} w_i)                                  (Eq. 1)

``w_i`` is important when ``S(w_i) < delta`` (the buffer plus ``w_i`` is almost as
convincing as the whole sentence); important tokens are *not* kept in the buffer, so
later scores are not driven by earlier important tokens; the others stay. Sentences
the classifier gets wrong are not scored (all labels 0). Scoring is at the subword
level, on exactly the token ids the classifier was trained on.

The batched scorer advances a pool of ``batch_size`` sentences together (sentences
sorted by length so a pool ends together): at each buffer position the pending inputs
of the whole pool are sorted by length and classified in forwards of at most
``max_tokens`` padded tokens (buffers shrink where tokens were important, so sorting
keeps padding low). ``batch_size=1`` is the one-sentence-at-a-time reference.
"""

from typing import Callable, List, Sequence, Tuple

import numpy as np
import torch

from ..common.progress import progress_bar
from .batching import budget_runs
from .heads import FramedHeadModel

#: ``class_probs(inputs) -> (len(inputs), num_classes)`` class probabilities of token sequences
ClassProbs = Callable[[List[np.ndarray]], np.ndarray]


def buffer_importance(sentences: Sequence[np.ndarray], labels: Sequence[int], class_probs: ClassProbs,
                      delta: float = 0.05, batch_size: int = 256, max_tokens: int = 2048,
                      progress: bool = True) -> Tuple[List[np.ndarray], np.ndarray]:
    """Importance labels of every token of every sentence.

    Args:
        sentences: token ids of each sentence, without ``<s>``/``</s>`` (``class_probs`` adds them).
        labels: gold class index of each sentence.
        class_probs: the fine-tuned classifier.
        delta: importance threshold on ``S(w_i)`` (paper 0.05; the authors' scripts 0.01).
        batch_size: sentences advanced together (1: one sentence at a time).
        max_tokens: padded tokens per classifier call (``<s>``/``</s>`` included).

    Returns:
        ``(importance, scored)``: one uint8 array per sentence (1 = important) and a bool
        array, False for sentences the classifier misclassifies (their labels are all 0).
    """
    n = len(sentences)
    labels = np.asarray(labels, dtype=np.int64)
    if len(labels) != n:
        raise ValueError(f"{n} sentences but {len(labels)} labels")
    order = sorted(range(n), key=lambda i: -len(sentences[i]))
    importance = [np.zeros(len(s), dtype=np.uint8) for s in sentences]
    confidence = np.zeros(n)
    scored = np.zeros(n, dtype=bool)
    bar = progress_bar(total=n, desc="buffer scoring", unit="sent", disable=None if progress else True)
    for start in range(0, n, batch_size):
        pool = order[start:start + batch_size]
        for chunk in _chunks(pool, lambda i: len(sentences[i]), max_tokens):
            probs = class_probs([np.asarray(sentences[i]) for i in chunk])
            confidence[chunk] = probs[np.arange(len(chunk)), labels[chunk]]
            scored[chunk] = probs.argmax(axis=1) == labels[chunk]
        _score_pool([i for i in pool if scored[i]], sentences, labels, confidence, importance,
                    class_probs, delta, max_tokens)
        bar.update(len(pool))
    bar.close()
    return importance, scored


def _chunks(items, length, max_tokens):
    """Split ``items`` (sorted by ``length``) into runs of at most ``max_tokens`` padded tokens (+2 each)."""
    for start, end in budget_runs([length(i) for i in items], max_tokens, extra=2):
        yield items[start:end]


def _score_pool(pool, sentences, labels, confidence, importance, class_probs, delta, max_tokens):
    """Run the buffer loop for the correctly classified sentences ``pool`` in lock step."""
    buffers = {i: [] for i in pool}
    longest = max((len(sentences[i]) for i in pool), default=0)
    for position in range(longest):
        active = sorted((i for i in pool if len(sentences[i]) > position), key=lambda i: len(buffers[i]))
        for chunk in list(_chunks(active, lambda i: len(buffers[i]) + 1, max_tokens)):  # before updates
            probs = class_probs([np.asarray(buffers[i] + [int(sentences[i][position])]) for i in chunk])
            for row, i in enumerate(chunk):
                score = confidence[i] - probs[row, labels[i]]  # S(w_i), Eq. 1
                if score < delta:
                    importance[i][position] = 1  # important: left out of the buffer
                else:
                    buffers[i].append(int(sentences[i][position]))


class SentenceClassifier(FramedHeadModel):
    """``class_probs`` of a fairseq roberta model with a sentence classification head:
    a float32 softmax of the head's logits for ``<s> tokens </s>`` inputs; counts its calls."""

    head_kind = "classification head"

    def __init__(self, model, head_name: str, bos: int, eos: int, pad: int):
        super().__init__(model, head_name, bos, eos, pad)
        self.calls = 0

    def __call__(self, inputs: List[np.ndarray]) -> np.ndarray:
        self.calls += 1
        return torch.softmax(self.logits(inputs).float(), dim=-1).double().cpu().numpy()
