"""Property-based tests (hypothesis) of the built-in policies: with random tokens, maskable
positions, side-information tracks that follow each policy's value rules and options drawn in
and out of their declared ranges, every policy either returns a valid mask (boolean, the tokens'
shape, nothing outside ``maskable``, the same for the same generator) or raises one ValueError
with a message; options out of range are refused when the policy is built, naming the flag."""

import argparse
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairseq_maskplug.masking import build_mask_policy
from fairseq_maskplug.masking.registry import MASK_POLICY_DATACLASS_REGISTRY
from fairseq_maskplug.masking.salient import SPAN_IDS, SPAN_LENGTH_BASE, span_ids
from fairseq_maskplug.common.option_ranges import declared_range

BUILT_IN = ("random", "matched_random", "span", "l3", "selective", "salient_span", "learned_span")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def option_value(f: dataclasses.Field, in_range: bool):
    """A strategy for option ``f``: a value inside its declared range, or (``in_range`` False) any
    number, inside or not (nan and inf included for floats)."""
    interval = declared_range(f)
    if f.type is int:
        low = int(interval.low) if math.isfinite(interval.low) else -5
        low += 0 if interval.low_closed or not math.isfinite(interval.low) else 1
        high = int(interval.high) if math.isfinite(interval.high) else low + 12
        return st.integers(low, high) if in_range else st.integers(-3, high + 3)
    if not in_range:
        return st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([interval.low, interval.high]))
    low = interval.low if math.isfinite(interval.low) else -1e3
    high = interval.high if math.isfinite(interval.high) else 1e3
    return st.floats(low, high, exclude_min=not interval.low_closed, exclude_max=not interval.high_closed)


def options_strategy(in_range: bool):
    """A namespace holding every built-in policy's options (each drawn as :func:`option_value`, or
    its default for strings)."""
    fields = {}
    for name in BUILT_IN:
        dc = MASK_POLICY_DATACLASS_REGISTRY[name]
        for f in dataclasses.fields(dc) if dc else ():
            if f.type in (int, float):
                fields[f.name] = option_value(f, in_range)
            else:
                fields[f.name] = st.just(f.default)
    fields["matched_policy"] = st.sampled_from([p for p in BUILT_IN if p != "matched_random"])
    return st.fixed_dictionaries(fields).map(lambda values: argparse.Namespace(**values))


@st.composite
def sequences(draw):
    """``(tokens, maskable)``: 1..80 tokens; special tokens (not maskable) at both ends and at random."""
    length = draw(st.integers(1, 80))
    tokens = np.array(draw(st.lists(st.integers(4, 60), min_size=length, max_size=length)), dtype=np.int64)
    maskable = np.array(draw(st.lists(st.booleans(), min_size=length, max_size=length)), dtype=bool)
    maskable[0] = False  # <s>
    if draw(st.booleans()):
        maskable[-1] = False  # </s>
    return tokens, maskable


@st.composite
def track(draw, rule, length: int):
    """Values of one track that follow ``rule``; span tracks are drawn as whole, valid spans."""
    if rule is SPAN_IDS:
        cuts = sorted(set(draw(st.lists(st.integers(0, length), max_size=8))))
        spans = [(a, b) for a, b in zip(cuts[::2], cuts[1::2]) if a < b and b - a < SPAN_LENGTH_BASE]
        return span_ids(length, spans)
    low = rule.low if math.isfinite(rule.low) else -50.0
    high = rule.high if math.isfinite(rule.high) else 50.0
    if rule.integral:
        values = draw(st.lists(st.integers(int(low), int(high)), min_size=length, max_size=length))
    else:
        values = draw(st.lists(st.floats(low, high), min_size=length, max_size=length))
    return np.array(values, dtype=np.float64)


def choose_twice(policy, tokens, maskable, side, seed):
    first = policy.choose(tokens, maskable, side, np.random.default_rng(seed))
    second = policy.choose(tokens, maskable, side, np.random.default_rng(seed))
    return np.asarray(first), np.asarray(second)


@pytest.mark.parametrize("name", BUILT_IN)
@SETTINGS
@given(data=st.data(), cfg=options_strategy(in_range=True), seed=st.integers(0, 2**32 - 1))
def test_a_policy_returns_a_valid_mask_or_one_clear_error(name, data, cfg, seed):
    tokens, maskable = data.draw(sequences())
    try:
        policy = build_mask_policy(name, cfg)  # options in range: built, unless two contradict each other
    except ValueError as error:
        assert contradiction(name, cfg) and str(error).startswith("--l3-max-prob "), str(error)
        return
    side = {track_name: data.draw(track(rule, len(tokens)))
            for track_name, rule in policy.side_info_rules.items()}
    try:
        mask, again = choose_twice(policy, tokens, maskable, side, seed)
    except ValueError as error:
        assert str(error).strip(), f"{name}: a ValueError without a message"
        return
    assert mask.dtype == bool and mask.shape == tokens.shape, (name, mask.dtype, mask.shape)
    assert not (mask & ~maskable).any(), f"{name} chose a position that is not maskable"
    assert np.array_equal(mask, again), f"{name}: two draws from one generator seed differ"


@pytest.mark.parametrize("name", BUILT_IN)
@SETTINGS
@given(cfg=options_strategy(in_range=False))
def test_a_policy_is_built_only_with_options_in_their_ranges(name, cfg):
    read = [f for policy in build_reads(name, cfg) for f in dataclasses.fields(MASK_POLICY_DATACLASS_REGISTRY[policy])]
    outside = [f for f in read if f.type in (int, float) and getattr(cfg, f.name) not in declared_range(f)]
    try:
        build_mask_policy(name, cfg)
    except ValueError as error:
        if not outside and contradiction(name, cfg):
            assert str(error).startswith("--l3-max-prob "), str(error)
            return
        assert outside, f"{name} refused options in range: {error}"
        flags = {"--" + f.name.replace("_", "-") for f in outside}
        assert any(str(error).startswith(f"{flag} must lie in ") for flag in flags), (str(error), flags)
        return
    assert not outside, f"{name} was built with {[(f.name, getattr(cfg, f.name)) for f in outside]}"


def contradiction(name, cfg) -> bool:
    """Options each in range that contradict each other, refused when the policy is built: an l3
    cap (--l3-max-prob) below its mean (--l3-mean)."""
    return "l3" in build_reads(name, cfg) and cfg.l3_max_prob < cfg.l3_mean


def build_reads(name, cfg):
    """The policies whose options ``name`` checks when built: itself, and matched_random's reference."""
    return (name, cfg.matched_policy) if name == "matched_random" else (name,)
