"""Selective masking policy (Gu et al. 2020, In-domain Mask) and ``--task selective_mlm``."""

import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from fairseq_helpers import check, json_logs, train
from fairseq_maskplug.masking import build_mask_policy, selective_count, selective_mask
from fairseq_maskplug.masking.selective import selective_mask_per_sentence
from stats_helpers import assert_uniform


def options(**kw):
    base = dict(selective_track="importance", selective_threshold=0.5, selective_cap=0.15,
                selective_masks="fixed", selective_cap_scope="sentence", matched_policy="selective")
    return SimpleNamespace(**{**base, **kw})


def test_hand_checked_example():
    scores = np.array([0.0, 0.9, 0.2, 0.7, 0.95, 0.6, 0.0])
    maskable = np.array([False, True, True, True, True, True, False])
    # 5 maskable tokens, cap 0.4 -> at most 2; selected 1, 3, 4, 5 -> the two best: 4 and 1
    assert np.flatnonzero(selective_mask(scores, maskable, 0.5, 0.4)).tolist() == [1, 4]
    # cap 0.15 of 5 tokens -> max(1, 0) = 1: the best one
    assert np.flatnonzero(selective_mask(scores, maskable, 0.5, 0.15)).tolist() == [4]
    # a cap, not a target: nothing selected -> nothing masked (no random fill)
    assert not selective_mask(scores, maskable, 0.99, 0.5).any()
    # special tokens are never masked, whatever their score
    assert np.flatnonzero(selective_mask(np.ones(7), maskable, 0.5, 1.0)).tolist() == [1, 2, 3, 4, 5]
    # ties in the fixed mode: the earlier position first
    assert np.flatnonzero(selective_mask(np.ones(7), maskable, 0.5, 0.4)).tolist() == [1, 2]


def test_cap_holds_per_sentence_by_default_and_per_block_on_request():
    """A block of two sentences (``complete`` mode): the first one's tokens all score higher.
    Capped per block, only the first sentence is masked; per sentence, both are."""
    maskable = np.array([False] + [True] * 10 + [False] + [True] * 10 + [False])
    scores = np.concatenate([[0], np.linspace(0.99, 0.9, 10), [0], np.linspace(0.8, 0.6, 10), [0]])
    tokens = np.arange(len(scores))
    by_sentence = build_mask_policy("selective", options(selective_cap=0.2)).choose(
        tokens, maskable, {"importance": scores}, None)
    by_block = build_mask_policy("selective", options(selective_cap=0.2, selective_cap_scope="block")).choose(
        tokens, maskable, {"importance": scores}, None)
    assert np.flatnonzero(by_sentence).tolist() == [1, 2, 12, 13]  # 2 of 10 in each sentence
    assert np.flatnonzero(by_block).tolist() == [1, 2, 3, 4]  # 4 of 20, all from the first sentence


def test_out_of_range_options_are_refused():
    with pytest.raises(ValueError, match="--selective-threshold must lie in"):
        build_mask_policy("selective", options(selective_threshold=2.0))
    with pytest.raises(ValueError, match="--selective-cap-scope must be one of"):
        build_mask_policy("selective", options(selective_cap_scope="doc"))


def test_count_formula():
    assert selective_count(0, 40, 0.15) == 0
    assert selective_count(3, 0, 0.15) == 0
    assert selective_count(3, 5, 0.15) == 1  # max(1, floor(0.75))
    assert selective_count(10, 40, 0.15) == 6
    assert selective_count(4, 40, 0.15) == 4
    assert selective_count(100, 100, 0.29) == 29  # floor(28.999999999999996) would give 28


@pytest.mark.parametrize("mode", ["fixed", "per_epoch"])
def test_cap_and_selection_over_random_inputs(mode):
    rng = np.random.default_rng(0)
    for _ in range(2000):
        n = int(rng.integers(1, 80))
        scores = rng.random(n) ** rng.uniform(0.2, 4)
        maskable = rng.random(n) < 0.9
        cap = float(rng.choice([0.15, rng.uniform(0.01, 1)]))
        mask = selective_mask(scores, maskable, 0.5, cap, rng if mode == "per_epoch" else None)
        selected = maskable & (scores >= 0.5)
        assert not (mask & ~selected).any()
        assert mask.sum() == selective_count(int(selected.sum()), int(maskable.sum()), cap)
        assert mask.sum() <= max(1, np.floor(cap * maskable.sum() + 1e-9))
        if mode == "fixed" and (selected & ~mask).any():  # the kept ones are the best ones
            assert scores[mask].min() >= scores[selected & ~mask].max()


def test_fixed_masks_ignore_the_generator_and_per_epoch_masks_are_uniform_among_selected():
    scores = np.array([0.0, 0.9, 0.1, 0.6, 0.8, 0.55, 0.7, 0.2, 0.95, 0.3] + [0.1] * 30 + [0.0])
    maskable = np.ones(len(scores), bool)
    maskable[[0, -1]] = False
    fixed = build_mask_policy("selective", options())
    per_epoch = build_mask_policy("selective", options(selective_masks="per_epoch"))
    tokens = np.arange(len(scores))
    first = fixed.choose(tokens, maskable, {"importance": scores}, np.random.default_rng(0))
    # 6 selected (1, 3, 4, 5, 6, 8), floor(0.15 * 39) = 5 kept: all but the lowest score (position 5)
    assert np.flatnonzero(first).tolist() == [1, 3, 4, 6, 8]
    seeds = 4000
    counts = np.zeros(len(scores))
    for s in range(seeds):
        rng = np.random.default_rng(s)
        assert np.array_equal(fixed.choose(tokens, maskable, {"importance": scores}, rng), first)
        counts += per_epoch.choose(tokens, maskable, {"importance": scores}, np.random.default_rng(s))
    selected = np.flatnonzero(maskable & (scores >= 0.5))  # 6 tokens, 5 kept per visit
    assert counts.sum() == 5 * seeds and counts[np.setdiff1d(tokens, selected)].sum() == 0
    assert_uniform(counts[selected], "per-epoch selective masks over the selected tokens")


def test_matched_random_masks_as_many_tokens():
    rng = np.random.default_rng(3)
    matched = build_mask_policy("matched_random", options())
    selective = build_mask_policy("selective", options())
    for s in range(500):
        n = int(rng.integers(3, 60))
        scores, maskable = rng.random(n), rng.random(n) < 0.9
        side = {"importance": scores}
        a = selective.choose(np.arange(n), maskable, side, np.random.default_rng(s))
        b = matched.choose(np.arange(n), maskable, side, np.random.default_rng(s))
        assert a.sum() == b.sum() and not (b & ~maskable).any()


def test_invalid_options_are_rejected():
    with pytest.raises(ValueError, match="--selective-masks must be one of"):
        build_mask_policy("selective", options(selective_masks="static"))
    with pytest.raises(ValueError, match="--selective-cap must lie in"):
        build_mask_policy("selective", options(selective_cap=0.0))


@pytest.fixture(scope="module")
def importance_data(tiny_data, tmp_path_factory):
    """The tiny corpus with a random importance score per token (train and valid)."""
    from fairseq.data import Dictionary, data_utils
    from fairseq_maskplug.data import write_side_info
    data = tmp_path_factory.mktemp("selective") / "bin"
    shutil.copytree(tiny_data / "bin", data)
    rng = np.random.default_rng(5)
    for split in ("train", "valid"):
        tokens = data_utils.load_indexed_dataset(str(data / split), Dictionary.load(str(data / "dict.txt")))
        write_side_info(str(data / f"{split}.importance"), (rng.random(len(tokens[i])) for i in range(len(tokens))),
                        tokens_prefix=str(data / split))
    return data


def expected_fixed_rate(data, split, cap):
    """Realised rate of fixed selective masks, capped per sentence, on the blocks guided_mlm builds
    (tokens_per_sample 32)."""
    from fairseq.data import Dictionary
    from fairseq_maskplug.data import load_blocked_split
    dictionary = Dictionary.load(str(data / "dict.txt"))
    cfg = SimpleNamespace(data=str(data), tokens_per_sample=32, sample_break_mode="none", shorten_method="none",
                          shorten_data_split_list="", seed=1)
    tokens, side = load_blocked_split(cfg, split, dictionary, ["importance"])
    chosen = maskable = 0
    for i in range(len(tokens)):
        t = tokens[i].numpy()
        m = ~np.isin(t, [dictionary.bos(), dictionary.eos(), dictionary.pad()])
        chosen += selective_mask_per_sentence(side["importance"][i].numpy(), m, 0.5, cap).sum()
        maskable += m.sum()
    return chosen / maskable


@pytest.mark.e2e
def test_selective_mlm_trains_and_matched_random_masks_as_many(importance_data, tmp_path):
    selective = check(train(importance_data, tmp_path / "s", "--max-epoch", "2", "--selective-cap", "0.1",
                            task="selective_mlm"))
    matched = check(train(importance_data, tmp_path / "m", "--max-epoch", "2", "--selective-cap", "0.1",
                          "--mask-policy", "matched_random", "--matched-policy", "selective",
                          task="selective_mlm"))
    s_valid, m_valid = json_logs(selective, "valid"), json_logs(matched, "valid")
    s_train, m_train = json_logs(selective, "train"), json_logs(matched, "train")
    for split, records in (("train", s_train), ("valid", s_valid)):
        for record in records:  # fixed masks: the same rate in every epoch, as computed by hand
            assert float(record[f"{split}_mask_rate"]) == pytest.approx(
                expected_fixed_rate(importance_data, split, 0.1), abs=1e-4)
    for a, b in zip(s_valid + s_train, m_valid + m_train):
        for key in ("mask_rate", "masks_per_seq", "seq_unmasked"):
            tag = "valid" if "valid_loss" in a else "train"
            assert a[f"{tag}_{key}"] == b[f"{tag}_{key}"]
    assert s_train[-1]["train_loss"] != m_train[-1]["train_loss"]  # same counts, other positions


@pytest.mark.e2e
def test_selective_mlm_needs_the_importance_track(tiny_data, tmp_path):
    result = train(tiny_data / "bin", tmp_path / "x", "--max-epoch", "1", task="selective_mlm")
    assert result.returncode != 0
    assert "side information 'importance' for split" in result.stderr and "not found" in result.stderr
