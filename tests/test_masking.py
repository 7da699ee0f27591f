"""Layer 1: distributions of the pure-NumPy masking functions over many seeds."""

from dataclasses import dataclass, field

import numpy as np
import pytest

from fairseq_maskplug.masking import (
    MASK_POLICY_DATACLASS_REGISTRY,
    MASK_POLICY_REGISTRY,
    Corruption,
    MaskPolicy,
    build_mask_policy,
    corrupt,
    maskable_positions,
    matched_random_mask,
    policies_read,
    probabilistic_count,
    random_mask,
    register_mask_policy,
)
from stats_helpers import assert_mean, assert_proportion, assert_uniform

SEEDS = 4000
SPECIAL = (0, 1, 2)  # <s>, <pad>, </s> in a fairseq dictionary


def sequence(n_inner: int) -> np.ndarray:
    """``<s> t_1 ... t_n </s>`` with ordinary token ids."""
    return np.array([0, *range(10, 10 + n_inner), 2])


def test_maskable_excludes_special_tokens():
    tokens = np.array([0, 5, 6, 1, 2, 7])
    assert maskable_positions(tokens, SPECIAL).tolist() == [False, True, True, False, False, True]


def test_probabilistic_count_is_floor_or_ceil_with_exact_mean():
    n, rate = 37, 0.15  # rate * n = 5.55
    counts = [probabilistic_count(rate, n, np.random.default_rng(s)) for s in range(SEEDS)]
    assert set(counts) == {5, 6}
    assert_mean(counts, rate * n, "mean count")


def test_random_mask_rate_marginals_and_specials():
    tokens = sequence(20)
    maskable = maskable_positions(tokens, SPECIAL)
    masks = np.array([random_mask(maskable, 0.15, np.random.default_rng(s)) for s in range(SEEDS)])
    assert not masks[:, ~maskable].any(), "special tokens were masked"
    assert_proportion(int(masks.sum()), SEEDS * int(maskable.sum()), 0.15, "realised rate")
    assert_uniform(masks[:, maskable].sum(axis=0), "per-position frequency")


@pytest.mark.parametrize("rate", [0.0, 1.0])
def test_random_mask_extreme_rates(rate):
    maskable = maskable_positions(sequence(9), SPECIAL)
    mask = random_mask(maskable, rate, np.random.default_rng(0))
    assert mask.sum() == rate * maskable.sum()


def test_random_mask_rejects_bad_rate():
    with pytest.raises(ValueError, match="mask rate"):
        random_mask(np.ones(5, bool), 1.5, np.random.default_rng(0))


def test_matched_random_exact_count_and_uniform_positions():
    maskable = maskable_positions(sequence(12), SPECIAL)
    masks = np.array([matched_random_mask(maskable, 4, np.random.default_rng(s)) for s in range(SEEDS)])
    assert (masks.sum(axis=1) == 4).all()
    assert not masks[:, ~maskable].any()
    assert_uniform(masks[:, maskable].sum(axis=0), "per-position frequency")


def test_matched_random_rejects_impossible_count():
    with pytest.raises(ValueError, match="cannot mask 3 positions .* 2 maskable"):
        matched_random_mask(np.array([False, True, True, False]), 3, np.random.default_rng(0))


def make_corruption(**kwargs):
    return Corruption(mask_idx=99, replacement_ids=np.arange(10, 30), **kwargs)


def test_corruption_80_10_10():
    tokens = np.arange(10, 30)
    mask = np.zeros(20, bool)
    mask[::2] = True
    corruption = make_corruption()
    outcomes = {"mask": 0, "kept": 0, "changed": 0}
    replaced_with = np.zeros(20, int)
    for s in range(SEEDS):
        source = corrupt(tokens, mask, np.random.default_rng(s), corruption)
        assert (source[~mask] == tokens[~mask]).all(), "unchosen positions changed"
        chosen_src, chosen_tok = source[mask], tokens[mask]
        outcomes["mask"] += int((chosen_src == 99).sum())
        random_draws = chosen_src[chosen_src != 99]
        outcomes["kept"] += int((random_draws == chosen_tok[chosen_src != 99]).sum())
        outcomes["changed"] += int((random_draws != chosen_tok[chosen_src != 99]).sum())
        np.add.at(replaced_with, random_draws - 10, 1)
    trials = SEEDS * int(mask.sum())
    assert_proportion(outcomes["mask"], trials, 0.8, "<mask> share")
    # a random draw equals the original with probability 1/20, so "kept" = 0.1 + 0.1/20
    assert_proportion(outcomes["kept"], trials, 0.1 + 0.1 / 20, "unchanged share")
    assert_proportion(outcomes["changed"], trials, 0.1 * 19 / 20, "random-token share")


def test_random_replacements_are_uniform_over_the_vocabulary_and_never_special():
    tokens = np.full(50, 15)
    mask = np.ones(50, bool)
    corruption = make_corruption(leave_unmasked_prob=0.0, random_token_prob=1.0)
    draws = np.concatenate([corrupt(tokens, mask, np.random.default_rng(s), corruption)
                            for s in range(400)])
    assert set(np.unique(draws)) <= set(range(10, 30))
    assert_uniform(np.bincount(draws - 10, minlength=20), "replacement frequency")


def test_frequency_weighted_replacements_follow_the_weights():
    probs = np.linspace(1, 20, 20) / np.linspace(1, 20, 20).sum()
    corruption = make_corruption(replacement_probs=probs, leave_unmasked_prob=0.0, random_token_prob=1.0)
    draws = np.concatenate([corrupt(np.full(50, 15), np.ones(50, bool), np.random.default_rng(s), corruption)
                            for s in range(400)])
    counts = np.bincount(draws - 10, minlength=20)
    from scipy import stats
    assert stats.chisquare(counts, probs * counts.sum()).pvalue > 1e-6


def test_corruption_validates_probabilities():
    with pytest.raises(ValueError, match="<= 1"):
        make_corruption(leave_unmasked_prob=0.6, random_token_prob=0.6)


class Options:
    """A stand-in for a task config: build_mask_policy maps its attributes onto a policy's options."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


def test_matched_random_policy_matches_the_reference_count_on_every_visit():
    tokens = sequence(41)  # 0.15 * 41 = 6.15: the reference count varies between 6 and 7
    maskable = maskable_positions(tokens, SPECIAL)
    cfg = Options(mask_prob=0.15, matched_policy="random")
    reference = build_mask_policy("random", cfg)
    matched = build_mask_policy("matched_random", cfg)
    counts, masks = [], []
    for s in range(SEEDS):
        ref = reference.choose(tokens, maskable, {}, np.random.default_rng(s))
        got = matched.choose(tokens, maskable, {}, np.random.default_rng(s))
        assert got.sum() == ref.sum()
        counts.append(int(ref.sum()))
        masks.append(got)
    assert len(set(counts)) > 1, "reference counts should vary (probabilistic rounding)"
    assert_uniform(np.array(masks)[:, maskable].sum(axis=0), "matched positions")


def test_every_policy_is_built_from_its_own_options_without_a_task():
    """A policy reads only an instance of its options dataclass (issue 40): built in a script, without a task
    configuration, from its defaults or from given values; a configuration goes through build_mask_policy."""
    from fairseq_maskplug.masking.builtin_policies import MatchedRandomOptions, MatchedRandomPolicy
    from fairseq_maskplug.masking.spans import SpanPolicy, SpanPolicyOptions

    for name, cls in MASK_POLICY_REGISTRY.items():
        declared = MASK_POLICY_DATACLASS_REGISTRY[name]
        policy = cls(None if declared is None else declared())
        assert policy.options == (None if declared is None else declared())
    span = SpanPolicy(SpanPolicyOptions(span_mask_prob=0.3))
    matched = MatchedRandomPolicy(MatchedRandomOptions(matched_policy="span"), span)
    tokens = sequence(60)
    maskable = maskable_positions(tokens, SPECIAL)
    for s in range(20):
        reference = span.choose(tokens, maskable, {}, np.random.default_rng(s))
        assert matched.choose(tokens, maskable, {}, np.random.default_rng(s)).sum() == reference.sum()
    with pytest.raises(ValueError, match="the reference policy is 'span' but --matched-policy names 'random'"):
        MatchedRandomPolicy(MatchedRandomOptions(), span)
    built = build_mask_policy("matched_random", Options(matched_policy="span", span_mask_prob=0.3, mask_prob=0.5))
    assert built.reference.options == SpanPolicyOptions(span_mask_prob=0.3)  # mask_prob is random's, not read
    assert policies_read("matched_random", Options(matched_policy="span")) == ["matched_random", "span"]
    assert build_mask_policy("span", Options(), rate=0.4).options.span_mask_prob == 0.4  # a schedule's rate


def test_matched_random_cannot_match_itself():
    with pytest.raises(ValueError, match="another policy"):
        build_mask_policy("matched_random", Options(matched_policy="matched_random"))


@pytest.fixture
def scratch_registry():
    """Registrations made inside a test are removed afterwards."""
    before = dict(MASK_POLICY_REGISTRY), dict(MASK_POLICY_DATACLASS_REGISTRY)
    yield
    for registry, saved in zip((MASK_POLICY_REGISTRY, MASK_POLICY_DATACLASS_REGISTRY), before):
        registry.clear()
        registry.update(saved)


def test_registry_rejects_duplicates_and_bad_options(scratch_registry):
    with pytest.raises(ValueError, match="already registered"):
        register_mask_policy("random")(type("Again", (MaskPolicy,), {}))

    @dataclass
    class Clashing:
        mask_prob: float = field(default=0.2, metadata={"help": "x"})

    with pytest.raises(ValueError, match="already declared by mask policy 'random'"):
        register_mask_policy("clash", dataclass=Clashing)(type("Clash", (MaskPolicy,), {}))

    @dataclass
    class NoHelp:
        nohelp_rate: float = 0.2

    with pytest.raises(ValueError, match="needs help text"):
        register_mask_policy("nohelp", dataclass=NoHelp)(type("NoHelpPolicy", (MaskPolicy,), {}))
    with pytest.raises(TypeError, match="subclass MaskPolicy"):
        register_mask_policy("notapolicy")(object)
    with pytest.raises(ValueError, match="unknown mask policy 'nope'"):
        build_mask_policy("nope", Options())
