"""The span policy (SpanBERT geometric spans): exact budget, unbiased rate, spans inside sentences."""

from types import SimpleNamespace

import numpy as np
import pytest

from fairseq_maskplug.masking import GeometricSpans, build_mask_policy, span_mask
from fairseq_maskplug.masking.spans import segment_ends
from stats_helpers import assert_mean


def runs(mask_row):
    edges = np.diff(np.concatenate([[0], mask_row.astype(int), [0]]))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def block(sentences):
    """``<s> w.. </s> w.. </s>`` as a maskable array: False at the specials."""
    maskable = [False]
    for n in sentences:
        maskable += [True] * n + [False]
    return np.array(maskable)


def test_count_is_the_random_policys_and_the_rate_is_unbiased():
    maskable = block([7, 12, 3])  # 22 maskable tokens
    counts = []
    for s in range(4000):
        mask = span_mask(maskable, 0.15, GeometricSpans(), np.random.default_rng(s))
        assert not (mask & ~maskable).any()
        counts.append(int(mask.sum()))
    assert set(counts) <= {3, 4}  # floor(0.15 * 22 + U) = floor(3.3 + U)
    assert_mean(counts, 0.15 * 22, "masked tokens per block")


def test_spans_never_cross_a_sentence_boundary_and_are_geometric_runs():
    maskable = block([40, 40, 40])
    lengths = []
    for s in range(600):
        mask = span_mask(maskable, 0.1, GeometricSpans(), np.random.default_rng(s))
        starts, ends = runs(mask)
        for a, b in zip(starts, ends):
            assert maskable[a:b].all()  # a run of masks never contains <s> or </s>
        lengths += list(ends - starts)
    # Geometric(0.2) clipped at 10 has mean 4.46; adjacent spans merge into longer runs and
    # spans cut at a sentence end or at the budget are shorter: both effects are small here
    assert 3.5 < np.mean(lengths) < 5.5
    assert np.mean(lengths) > 2.5 * np.mean([1 / 0.9])  # far above random single tokens (about 1.1)


def test_segment_ends():
    assert segment_ends(np.array([False, True, True, False, True])).tolist() == [0, 3, 3, 3, 5]


def test_policy_options_and_a_rate_that_masks_nothing_is_refused():
    cfg = SimpleNamespace(span_mask_prob=0.3, span_geometric_p=0.5, span_max_length=3)
    policy = build_mask_policy("span", cfg)
    mask = policy.choose(np.arange(30), np.ones(30, bool), {}, np.random.default_rng(0))
    assert mask.sum() == 9 and max(e - s for s, e in zip(*runs(mask))) <= 3 * 3  # merged runs at most
    with pytest.raises(ValueError, match="--span-mask-prob must lie in"):
        build_mask_policy("span", SimpleNamespace(span_mask_prob=0.0, span_geometric_p=0.2, span_max_length=10))
