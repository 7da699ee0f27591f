"""L3Masking probabilities (exact mean, clipping with redistribution) and the l3 policy."""

import numpy as np
import pytest

from fairseq_helpers import check, json_logs, train
from fairseq_maskplug.masking import build_mask_policy, mask_probabilities
from stats_helpers import Z


def test_hand_checked_examples():
    # base 1 - PLT = [.1 .1 .1 1], mean .5 over 4: alpha = 2 / 1.3; the last value 1.538 is clipped
    # and its excess .538 is shared by the three others: 1/3 each
    np.testing.assert_allclose(mask_probabilities(np.array([0.9, 0.9, 0.9, 0.0]), 0.5), [1 / 3] * 3 + [1])
    # base [.2 .4 .1 1] (sum 1.7): the clipped token keeps 1, the others share the remaining 1
    plt = np.array([0.8, 0.6, 0.9, 0.0])
    equal = mask_probabilities(plt, 0.5)
    expected_equal = np.array([0.2, 0.4, 0.1]) * 2 / 1.7 + (2 / 1.7 - 1) / 3
    np.testing.assert_allclose(equal, [*expected_equal, 1.0])
    np.testing.assert_allclose(mask_probabilities(plt, 0.5, redistribute="proportional"),
                               [0.2 / 0.7, 0.4 / 0.7, 0.1 / 0.7, 1.0])


@pytest.mark.parametrize("transform", ["complement", "surprisal"])
@pytest.mark.parametrize("redistribute", ["equal", "proportional"])
def test_properties_over_random_inputs(transform, redistribute):
    rng = np.random.default_rng(0)
    for _ in range(1500):
        n = int(rng.integers(1, 60))
        plt = rng.beta(rng.uniform(0.2, 5), rng.uniform(0.2, 5), n)  # often near 0 or 1
        plt[rng.random(n) < 0.1] = 1.0
        maskable = rng.random(n) < 0.85
        mean = float(rng.choice([rng.uniform(0, 1), 0.15, 0.5, 1.0]))
        cap = float(rng.choice([1.0, rng.uniform(mean, 1), mean]))  # --l3-max-prob (fe_mlm: 1/K)
        p = mask_probabilities(plt, mean, maskable, transform, redistribute, cap)
        assert ((p >= 0) & (p <= cap + 1e-12)).all()
        assert (p[~maskable] == 0).all()
        if maskable.any():
            assert p[maskable].mean() == pytest.approx(mean, abs=1e-9)
        # monotone in 1 - PLT (surprisal orders tokens the same way)
        i = np.flatnonzero(maskable)
        order = np.argsort(plt[i], kind="stable")  # increasing PLT: decreasing probability
        assert (np.diff(p[i][order]) <= 1e-12).all()


def test_edge_cases():
    np.testing.assert_allclose(mask_probabilities(np.ones(5), 0.15), 0.15)  # nothing distinguishes tokens
    assert (mask_probabilities(np.zeros(3), 0.3, np.zeros(3, bool)) == 0).all()
    np.testing.assert_allclose(mask_probabilities(np.array([0.2, 0.5]), 1.0), [1, 1])
    with pytest.raises(ValueError, match="mean must lie in"):
        mask_probabilities(np.zeros(3), 1.5)
    with pytest.raises(ValueError, match="must lie in \\[0, 1\\]"):
        mask_probabilities(np.array([0.5, 1.2]))
    with pytest.raises(ValueError, match="cap must lie in \\[mean, 1\\]"):
        mask_probabilities(np.zeros(3), 0.3, cap=0.25)
    # a cap of 1/4: base [.1 .1 .1 1 .05] (sum 1.35) scaled to total 1.0; 1/1.35 is clipped at .25 and
    # its excess shared equally by the four others
    share = (1 / 1.35 - 0.25) / 4
    np.testing.assert_allclose(mask_probabilities(np.array([0.9, 0.9, 0.9, 0.0, 0.95]), 0.2, cap=0.25),
                               [0.1 / 1.35 + share] * 3 + [0.25, 0.05 / 1.35 + share])


class Options:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_policy_realised_rate_is_the_mean():
    rng = np.random.default_rng(1)
    plt = rng.beta(0.5, 0.5, 60)
    maskable = np.ones(60, bool)
    maskable[[0, 59]] = False
    policy = build_mask_policy("l3", Options(l3_track="plt", l3_mean=0.15, l3_transform="complement",
                                             l3_redistribute="equal", l3_max_prob=1.0))
    probs = mask_probabilities(plt, 0.15, maskable)
    seeds = 4000
    counts = [policy.choose(np.arange(60), maskable, {"plt": plt}, np.random.default_rng(s)).sum()
              for s in range(seeds)]
    # sum of independent Bernoulli(p_i): mean 0.15 * 58 exactly, variance sum p (1 - p)
    se = np.sqrt((probs * (1 - probs)).sum() / seeds)
    assert abs(np.mean(counts) - 0.15 * 58) <= Z * se


@pytest.mark.e2e
def test_l3_policy_trains_in_guided_mlm(tiny_data, tmp_path):
    import shutil
    from fairseq.data import Dictionary, data_utils
    from fairseq_maskplug.data import write_side_info

    data = tmp_path / "bin"
    shutil.copytree(tiny_data / "bin", data)
    rng = np.random.default_rng(0)
    for split in ("train", "valid"):
        tokens = data_utils.load_indexed_dataset(str(data / split), Dictionary.load(str(data / "dict.txt")))
        write_side_info(str(data / f"{split}.plt"), (rng.beta(2, 1, len(tokens[i])) for i in range(len(tokens))),
                        tokens_prefix=str(data / split))
    result = check(train(data, tmp_path / "ck", "--max-epoch", "1", "--mask-policy", "l3", "--l3-mean", "0.2"))
    (epoch,) = json_logs(result, "train")
    # every word token is maskable; a sum of N Bernoulli draws has variance <= N / 4
    n_tokens = len(open(tiny_data / "train.txt").read().split())
    assert abs(float(epoch["train_mask_rate"]) - 0.2) <= Z * 0.5 / np.sqrt(n_tokens) + 5e-5
