"""Salient-span masking (Guu et al. 2020, REALM §3.4; Ye, Li et al. 2021, "+SSM") and its policy.

A span track holds one integer per token: 0 outside spans, and inside a span the same
**span id** on each of its tokens. A span id encodes the span's length in tokens::

    id = ordinal * SPAN_LENGTH_BASE + length      (ordinal >= 1: the span's number in its line)

so a block can tell a complete span from one cut by blocking or truncation without
knowing where the block lies in its line: a run of one id is complete exactly when it
holds ``length`` tokens. Adjacent spans differ in ordinal, so they stay apart.

REALM masks one salient span per example, chosen uniformly among the example's spans;
a block without a complete span gets no mask (``seq_unmasked`` in the logs) unless
``--salient-fallback random`` asks for random masking at ``--mask-prob`` instead. ``--salient-scope`` says what an
example is: the block (the default; a block of ``--sample-break-mode complete`` holds several lines, so one span
per block is fewer masks than one per line) or each line of the block (``sentence``: the runs between ``</s>``,
REALM's and Ye, Li et al.'s one span per example).
"""

from dataclasses import dataclass, replace
from typing import List, Sequence, Tuple

import numpy as np

from ..common.option_ranges import option
from .random_masks import maskable_runs, random_mask
from .registry import MaskPolicy, register_mask_policy
from .values import ValueRule

#: span ids are ``ordinal * SPAN_LENGTH_BASE + length``: spans hold at most BASE - 1 tokens
SPAN_LENGTH_BASE = 1024
SPAN_IDS = ValueRule(f"a span id: 0, or ordinal * {SPAN_LENGTH_BASE} + length (int32)",
                     0, np.iinfo(np.int32).max, integral=True)
FALLBACKS = ("none", "random")
#: --salient-scope: where the spans are drawn (module docstring)
SCOPES = ("block", "sentence")


def span_ids(length: int, spans: Sequence[Tuple[int, int]]) -> np.ndarray:
    """The track of a line of ``length`` tokens holding ``spans`` ((start, end) token
    positions, end exclusive, not overlapping): 0 outside, each span's id inside."""
    ids = np.zeros(length, dtype=np.int64)
    for ordinal, (start, end) in enumerate(sorted(spans), start=1):
        if not 0 <= start < end <= length:
            raise ValueError(f"span ({start}, {end}) does not fit a line of {length} tokens")
        if not end - start < SPAN_LENGTH_BASE:
            raise ValueError(f"span ({start}, {end}) is longer than {SPAN_LENGTH_BASE - 1} tokens")
        if ids[start:end].any():
            raise ValueError(f"span ({start}, {end}) overlaps another span")
        ids[start:end] = ordinal * SPAN_LENGTH_BASE + (end - start)
    return ids


def complete_spans(ids: np.ndarray, maskable: np.ndarray) -> List[Tuple[int, int]]:
    """``(start, end)`` of the spans of ``ids`` that lie wholly in this block and on maskable
    tokens; spans cut at the block's edges (fewer tokens than their id says) are left out."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.shape != np.shape(maskable):
        raise ValueError(f"span track shape {ids.shape} does not match the tokens {np.shape(maskable)}")
    changes = np.flatnonzero(np.diff(ids)) + 1
    starts = np.concatenate([[0], changes])
    ends = np.concatenate([changes, [len(ids)]])
    spans = []
    for start, end in zip(starts.tolist(), ends.tolist()):
        value = int(ids[start])
        if value == 0:
            continue
        length = value % SPAN_LENGTH_BASE
        if length == 0 or value < SPAN_LENGTH_BASE or end - start > length:
            raise ValueError(f"span id {value} on {end - start} consecutive tokens: not a span id of this "
                             f"format (ordinal * {SPAN_LENGTH_BASE} + length); write span tracks with "
                             "preprocess.salient_spans or masking.salient.span_ids")
        if end - start == length and maskable[start:end].all():
            spans.append((start, end))
    return spans


def choose_spans(spans: Sequence[Tuple[int, int]], count: int, length: int,
                 rng: np.random.Generator) -> np.ndarray:
    """Boolean mask of ``min(count, len(spans))`` spans drawn uniformly without replacement."""
    mask = np.zeros(length, dtype=bool)
    if spans and count > 0:
        for k in rng.choice(len(spans), size=min(count, len(spans)), replace=False):
            start, end = spans[int(k)]
            mask[start:end] = True
    return mask


@dataclass
class SalientSpanOptions:
    salient_track: str = option("salient_spans", "salient_span policy: side-information track of span ids "
                                "(preprocess.salient_spans writes <split>.salient_spans)")
    salient_spans_per_block: int = option(1, "salient_span policy: spans masked per block, drawn uniformly among its "
                                          "complete spans (REALM: 1)", range="[1, inf)",
                                          source="REALM (one salient span)")
    salient_scope: str = option("block", "salient_span policy: where --salient-spans-per-block spans are drawn: in "
                                "the block (block) or in each of its lines, the runs between </s> (sentence: one "
                                "span per example, REALM's and Ye, Li et al.'s reading)",
                                source="ours (what the stored BART comparison ran; sentence is the paper's)",
                                choices=SCOPES)
    salient_fallback: str = option("none", "salient_span policy: a block without a complete span gets no mask (none) "
                                   "or random masking at --salient-fallback-prob (random)", source="ours",
                                   choices=FALLBACKS)
    salient_fallback_prob: float = option(0.15, "salient_span policy with --salient-fallback random: the rate of "
                                          "random masking in a block without a complete span (formerly "
                                          "--mask-prob)", range="(0, 1]", source="BERT (the random policy's rate)")


@register_mask_policy("salient_span", dataclass=SalientSpanOptions)
class SalientSpanPolicy(MaskPolicy):
    """Mask whole salient spans (named entities, dates), uniformly among a block's complete spans."""

    producer = "fairseq-maskplug-salient-spans --data {data} --split {split} --text RAW_TEXT_OF_{split}"
    chooses_spans = True
    #: ``--mask-unit word``: a chosen span grows to the whole words it touches
    words_by_expansion = True

    @property
    def side_info_names(self):
        return (self.options.salient_track,)

    @property
    def side_info_rules(self):
        if self.options.salient_fallback == "random":
            return {self.options.salient_track: SPAN_IDS}
        return {self.options.salient_track: replace(SPAN_IDS, nonzero_somewhere=(
            "no line has a salient span, so the salient_span policy would mask nothing (did the NER find no "
            "entity? see the producer's summary; --salient-fallback random masks such lines at random)"))}

    def choose(self, tokens, maskable, side_info, rng):
        spans = complete_spans(side_info[self.options.salient_track], maskable)
        if not spans and self.options.salient_fallback == "random":
            return random_mask(maskable, self.options.salient_fallback_prob, rng)
        count = self.options.salient_spans_per_block
        if self.options.salient_scope == "block":
            return choose_spans(spans, count, len(tokens), rng)
        mask = np.zeros(len(tokens), dtype=bool)  # each line (run of maskable tokens) its own draw, in order
        for start, end in zip(*maskable_runs(maskable)):
            mask |= choose_spans([s for s in spans if start <= s[0] and s[1] <= end], count, len(tokens), rng)
        return mask
