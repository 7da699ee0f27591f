"""Learned span policies (Ye, Li et al. 2021, "+Supervised" and "+Meta-learned"): mask the
span a span-scoring model picks, from its per-token start and end scores.

A span-scoring model (``--task span_policy`` or ``--task meta_span_policy``, applied to a
corpus by ``preprocess.score_spans``) writes two tracks per token: a start logit ``s_i``
and an end logit ``e_j``. As in extractive reading comprehension (BERT on SQuAD, Devlin
et al. 2019 §4.2), the score of the span ``[i, j]`` is ``s_i + e_j`` and the span
distribution of a block is

    P(i, j) = softmax over candidates of (s_i + e_j) / T,
    candidates: i <= j, j - i < max_length, every token of i..j maskable

so a span never holds ``<s>``, ``</s>`` or padding: it stays inside one sentence (a line
ends with ``</s>``) and inside the block. ``T = 0`` (the default) takes the arg-max
("top-1", the usual choice at test time, e.g. Neural Mask Generator, Kang et al. 2020);
``T > 0`` samples from the seeded generator. With ``--learned-spans N`` the next span is
chosen among the candidates that do not overlap the spans already chosen (renormalised).
The slides of the paper do not say which of these the authors used; top-1 is ours.
"""

import functools
from dataclasses import dataclass
from typing import List, Tuple

import numpy as np

from ..common.option_ranges import option
from .registry import MaskPolicy, register_mask_policy
from .values import FINITE


def candidate_spans(maskable: np.ndarray, max_length: int) -> np.ndarray:
    """All ``(i, j)`` (inclusive) with ``j - i < max_length`` lying on maskable tokens,
    as an ``(n, 2)`` int64 array ordered by length, then start (read-only: the array of a maskable pattern
    is computed once and shared, rows of one length mostly having one pattern)."""
    maskable = np.asarray(maskable, dtype=bool)
    if maskable.ndim != 1:
        raise ValueError(f"maskable must be 1-D, got shape {maskable.shape}")
    if max_length < 1:
        raise ValueError(f"the longest span must be at least 1 token, got {max_length}")
    return _candidate_spans(maskable.tobytes(), int(max_length))


@functools.lru_cache(maxsize=1024)
def _candidate_spans(pattern: bytes, max_length: int) -> np.ndarray:
    maskable = np.frombuffer(pattern, dtype=bool)
    blocked = np.concatenate([[0], np.cumsum(~maskable)])  # blocked[k] = unmaskable tokens before k
    n = len(maskable)
    widths = np.arange(1, min(max_length, n) + 1)
    starts = np.arange(n)
    ends = np.minimum(starts[None, :] + widths[:, None], n)  # exclusive; clipped where the span would run past
    inside = (starts[None, :] + widths[:, None] <= n) & (blocked[ends] == blocked[starts][None, :])
    width_index, start = np.nonzero(inside)  # row-major: by length, then start
    spans = np.stack([start, start + widths[width_index] - 1], axis=1).astype(np.int64)
    spans.flags.writeable = False
    return spans


def span_scores(start_logits: np.ndarray, end_logits: np.ndarray, maskable: np.ndarray,
                max_length: int, temperature: float = 1.0) -> Tuple[np.ndarray, np.ndarray]:
    """``(spans, scores)``: the candidates (:func:`candidate_spans`) and ``(s_i + e_j) / temperature``
    of each (float64, finite; empty when there is no candidate)."""
    start_logits = np.asarray(start_logits, dtype=np.float64)
    end_logits = np.asarray(end_logits, dtype=np.float64)
    if start_logits.shape != np.shape(maskable) or end_logits.shape != np.shape(maskable):
        raise ValueError(f"start {start_logits.shape} and end {end_logits.shape} scores must match the tokens "
                         f"{np.shape(maskable)}")
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    spans = candidate_spans(maskable, max_length)
    if not len(spans):
        return spans, np.zeros(0)
    with np.errstate(over="ignore"):
        scores = (start_logits[spans[:, 0]] + end_logits[spans[:, 1]]) / temperature
    if not np.isfinite(scores).all():
        raise ValueError("span scores must be finite (a temperature this low overflows them: use 0 for top-1)")
    return spans, scores


def _softmax(scores: np.ndarray) -> np.ndarray:
    probabilities = np.exp(scores - scores.max())
    return probabilities / probabilities.sum()


def span_distribution(start_logits: np.ndarray, end_logits: np.ndarray, maskable: np.ndarray,
                      max_length: int, temperature: float = 1.0) -> Tuple[np.ndarray, np.ndarray]:
    """``(spans, probabilities)``: the candidates (:func:`candidate_spans`) and
    ``softmax((s_i + e_j) / temperature)`` over them (float64, sums to 1; empty when there
    is no candidate)."""
    spans, scores = span_scores(start_logits, end_logits, maskable, max_length, temperature)
    return spans, (_softmax(scores) if len(spans) else scores)


def choose_learned_spans(start_logits: np.ndarray, end_logits: np.ndarray, maskable: np.ndarray,
                         max_length: int, count: int, temperature: float,
                         rng: np.random.Generator) -> List[Tuple[int, int]]:
    """Up to ``count`` non-overlapping spans ``(i, j)`` (inclusive): each the arg-max of the
    span scores (``temperature == 0``; ties: the shortest, then the leftmost) or a draw from
    :func:`span_distribution` at ``temperature`` renormalised over the candidates that do not
    overlap the spans chosen before (computed from the scores, so candidates whose probability
    underflowed to 0 among all still keep their order among the remaining ones)."""
    if count < 1:
        raise ValueError(f"at least one span per block, got {count}")
    if temperature < 0:
        raise ValueError(f"temperature must be 0 (top-1) or positive, got {temperature}")
    spans, scores = span_scores(start_logits, end_logits, maskable, max_length,
                                temperature if temperature > 0 else 1.0)
    chosen = []
    free = np.ones(len(spans), dtype=bool)
    while len(chosen) < count and free.any():
        candidates = np.flatnonzero(free)
        if temperature == 0:
            k = int(candidates[np.argmax(scores[free])])
        else:
            k = int(candidates[rng.choice(len(candidates), p=_softmax(scores[free]))])
        i, j = (int(x) for x in spans[k])
        chosen.append((i, j))
        free &= (spans[:, 1] < i) | (spans[:, 0] > j)
    return chosen


@dataclass
class LearnedSpanOptions:
    learned_start_track: str = option("span_start", "learned_span policy: side-information track of start logits "
                                      "(preprocess.score_spans)")
    learned_end_track: str = option("span_end", "learned_span policy: side-information track of end logits "
                                    "(preprocess.score_spans)")
    learned_max_length: int = option(10, "learned_span policy: longest span in tokens (the end lies fewer than this "
                                     "many tokens after the start)", range="[1, inf)",
                                     source="ours (the paper states none)")
    learned_spans: int = option(1, "learned_span policy: non-overlapping spans masked per block", range="[1, inf)",
                                source="ours (one span, as +SSM)")
    learned_temperature: float = option(0.0, "learned_span policy: 0 masks the top-1 span; a positive value samples "
                                        "from softmax((start + end) / temperature), seeded per (seed, epoch, index)",
                                        range="[0, inf)",
                                        source="ours (top-1; the paper does not say top-1 or sampled)")


@register_mask_policy("learned_span", dataclass=LearnedSpanOptions)
class LearnedSpanPolicy(MaskPolicy):
    """Mask the spans a span-scoring model (supervised or meta-learned) scores highest."""

    producer = "fairseq-maskplug-score-spans --checkpoint SPAN_POLICY_CHECKPOINT --data {data} --splits {split}"
    chooses_spans = True
    #: ``--mask-unit word``: a chosen span grows to the whole words it touches
    words_by_expansion = True

    @property
    def side_info_names(self):
        return (self.options.learned_start_track, self.options.learned_end_track)

    @property
    def side_info_rules(self):
        return {name: FINITE for name in self.side_info_names}

    def choose(self, tokens, maskable, side_info, rng):
        mask = np.zeros(len(tokens), dtype=bool)
        options = self.options
        spans = choose_learned_spans(side_info[options.learned_start_track], side_info[options.learned_end_track],
                                     maskable, options.learned_max_length, options.learned_spans,
                                     options.learned_temperature, rng)
        for i, j in spans:
            mask[i:j + 1] = True
        return mask
