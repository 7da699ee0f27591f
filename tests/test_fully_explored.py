"""FE-MLM: the K disjoint masks (statistics), the view batches, the view-averaged loss, training."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import fairseq_maskplug.plugin  # noqa: F401  (registers the tasks with fairseq)
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq_helpers import TINY_ROBERTA, assert_same_params, check, json_logs, train
from fairseq_maskplug.data import PolicyMaskedDataset
from fairseq_maskplug.masking.fully_explored import GeometricSpans, fully_explored_masks, view_size
from stats_helpers import assert_uniform

SEEDS = 3000


def runs(mask_row):
    """Lengths of the runs of consecutive True values."""
    edges = np.diff(np.concatenate([[0], mask_row.astype(int), [0]]))
    return np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)


@pytest.mark.parametrize("span", [None, GeometricSpans()], ids=["subword", "span"])
def test_views_are_disjoint_equal_sized_and_uniform(span):
    length, k, ratio = 40, 4, 0.15
    maskable = np.ones(length, bool)
    maskable[[0, 17, 39]] = False  # <s>, an inner </s>, the last </s>
    per_view_counts = np.zeros((k, length))
    for s in range(SEEDS):
        masks = fully_explored_masks(length, k, ratio, np.random.default_rng(s), maskable, span)
        assert masks.shape == (k, length)
        assert (masks.sum(axis=1) == masks[0].sum()).all(), "every view masks the same tau tokens"
        assert masks.sum(axis=0).max() <= 1, "views overlap"
        assert not masks[:, ~maskable].any()
        per_view_counts += masks
    for j in range(k):  # each view on its own is uniform over positions
        assert_uniform(per_view_counts[j, maskable], f"view {j} position frequency")


@pytest.mark.parametrize("n", [4, 5, 9, 10, 17, 40])
def test_view_size_has_the_random_policys_distribution(n):
    """tau = floor(p n + U): tau is ceil(p n) with probability frac(p n), else floor(p n), so its
    mean is p n exactly (the old round(p n) gave 0 for n <= 3 and 1 instead of 1.35 at n = 9).
    The share of ceil draws is binomial: 5 standard errors. (At n = 3 four disjoint views
    cannot hold one token each: the cap n // k = 0 binds there.)"""
    k, ratio, draws = 4, 0.15, 4000
    assert k * np.ceil(ratio * n) <= n  # the cap n // k does not bind at these n
    taus = np.array([fully_explored_masks(n, k, ratio, np.random.default_rng(s))[0].sum() for s in range(draws)])
    low, frac = np.floor(ratio * n), ratio * n - np.floor(ratio * n)
    assert set(np.unique(taus)) <= {low, low + 1}
    share = np.mean(taus == low + 1)
    assert abs(share - frac) <= 5 * np.sqrt(max(frac * (1 - frac), 1e-12) / draws) + 1e-12


def test_subword_views_have_the_random_policys_mask_distribution():
    """Each subword view is a uniform tau-subset with tau drawn as --mask-policy random draws its
    count, so view 0 and the random policy agree in count distribution and position frequency."""
    from fairseq_maskplug.masking import random_mask

    n, draws = 9, 6000
    view = np.array([fully_explored_masks(n, 4, 0.15, np.random.default_rng(s))[0] for s in range(draws)])
    rand = np.array([random_mask(np.ones(n, bool), 0.15, np.random.default_rng(10**6 + s)) for s in range(draws)])
    share_view, share_rand = (view.sum(1) == 2).mean(), (rand.sum(1) == 2).mean()  # 0.15 * 9 = 1.35: 1 or 2
    p = (share_view + share_rand) / 2
    assert abs(share_view - share_rand) <= 5 * np.sqrt(2 * p * (1 - p) / draws)  # two binomial shares
    assert_uniform(view.sum(0), "view 0 position frequency")


def test_view_counted_tokens_do_not_wrap_around_uint16():
    sizes = np.array([20001, 7], dtype=np.uint16)
    counted = PolicyMaskedDataset(SimpleNamespace(sizes=sizes), {}, None, None, (), 1, 0, views=4)
    assert counted.num_tokens_vec(np.array([0, 1])).tolist() == [80004, 28]
    assert counted.num_tokens(0) == 80004


def test_span_views_are_made_of_spans():
    rng = np.random.default_rng(0)
    sub, spans = [], []
    for _ in range(300):
        sub += list(runs(fully_explored_masks(200, 4, 0.2, rng)[0]))
        spans += list(runs(fully_explored_masks(200, 4, 0.2, rng, span=GeometricSpans())[0]))
    # random 20% subsets: mean run about 1 / 0.8 = 1.25; Geometric(0.2) clipped at 10: 4.46,
    # less where a span is split between two views
    assert np.mean(sub) < 1.5 and np.mean(spans) > 3.0


def test_view_size_and_limits():
    rng = np.random.default_rng(0)
    assert view_size(20, 4, 0.15, rng) == 3  # 0.15 * 20 = 3 exactly
    assert view_size(6, 4, 0.25, rng) == 1  # floor(1.5 + U) is 1 or 2, capped at 6 // 4
    with pytest.raises(ValueError, match="k \\* ratio must be <= 1"):
        fully_explored_masks(10, 5, 0.25, np.random.default_rng(0))


def make_task(data, *flags):
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data), "--task", "fe_mlm", "--tokens-per-sample", "32", "--criterion", "masked_lm",
        *TINY_ROBERTA, *map(str, flags)])
    cfg = convert_namespace_to_omegaconf(args)
    return tasks.setup_task(cfg.task), cfg


def first_batch(task, max_sentences=3, max_tokens=None, epoch=1):
    task.load_dataset("train")
    itr = task.get_batch_iterator(task.dataset("train"), max_sentences=max_sentences,
                                  max_tokens=max_tokens, seed=1, epoch=epoch)
    return itr, next(iter(itr.next_epoch_itr(shuffle=False)))


def test_batch_rows_are_the_views_of_each_sequence(tiny_data):
    task, _ = make_task(tiny_data / "bin", "--fe-views", "3", "--mask-prob", "0.2")
    d = task.source_dictionary
    _, batch = first_batch(task, max_sentences=4)
    src, tgt = batch["net_input"]["src_tokens"], batch["target"]
    assert src.shape[0] == tgt.shape[0] == 3 * batch["nsentences"] == 12
    assert batch["ntokens"] == 3 * int(src[::3].ne(d.pad()).sum())
    for group in range(4):
        rows = slice(3 * group, 3 * group + 3)
        picked = tgt[rows].ne(d.pad())
        originals = torch.where(picked, tgt[rows], src[rows])
        for view in range(3):  # the same sequence under every view ...
            unpicked = ~picked.any(dim=0)
            assert torch.equal(src[rows][view][unpicked], originals[0][unpicked])
            assert torch.equal(originals[view][picked[view]], originals[(view + 1) % 3][picked[view]])
        assert picked.sum(dim=0).max() <= 1  # ... with disjoint masks of equal size
        assert len(set(picked.sum(dim=1).tolist())) == 1
    # the counts the items carried (one row per view) are what the batch shows
    maskable = (src.ne(d.pad()) & src.ne(d.bos()) & src.ne(d.eos())).sum(dim=1)
    chosen = tgt.ne(d.pad()).sum(dim=1)
    assert batch["mask_counts"].tolist() == torch.stack([chosen, maskable, chosen, maskable], dim=1).tolist()


def test_max_tokens_counts_the_tokens_of_all_views(tiny_data):
    task, _ = make_task(tiny_data / "bin", "--fe-views", "4")
    itr, _ = first_batch(task, max_sentences=None, max_tokens=256)
    ds = task.dataset("train")
    for batch_indices in itr.frozen_batches:
        assert all(ds.num_tokens(i) == 4 * ds.size(i) for i in batch_indices)
        assert max(ds.num_tokens(i) for i in batch_indices) * len(batch_indices) <= 256


def test_loss_is_the_mean_of_the_per_view_losses(tiny_data):
    task, cfg = make_task(tiny_data / "bin", "--fe-views", "4", "--mask-prob", "0.25")
    model = task.build_model(cfg.model).eval()
    criterion = task.build_criterion(cfg.criterion)
    _, batch = first_batch(task, max_sentences=1)
    with torch.no_grad():
        loss, sample_size, _ = criterion(model, batch)
        per_view = []
        for v in range(4):
            view = {**batch, "net_input": {"src_tokens": batch["net_input"]["src_tokens"][v:v + 1]},
                    "target": batch["target"][v:v + 1]}
            view_loss, view_size_, _ = criterion(model, view)
            per_view.append(float(view_loss) / view_size_)
    assert float(loss) / sample_size == pytest.approx(np.mean(per_view), rel=1e-5)


def test_rejects_too_many_views(tiny_data):
    with pytest.raises(ValueError, match=r"^--fe-views 8 with --mask-prob 0.15: K disjoint views need K \* rate <= 1; "
                                         r"use --fe-views 6 or fewer"):
        make_task(tiny_data / "bin", "--fe-views", "8", "--mask-prob", "0.15")
    with pytest.raises(ValueError, match=r"^--fe-views 8 with --span-mask-prob 0.2: K disjoint views"):
        make_task(tiny_data / "bin", "--fe-views", "8", "--mask-policy", "span", "--span-mask-prob", "0.2")


@pytest.mark.e2e
def test_fe_training_is_deterministic_and_resumes_exactly(tiny_data, tmp_path):
    common = ["--seed", "5", "--max-epoch", "100", "--no-epoch-checkpoints", "--mask-policy", "span",
              "--batch-size", "4"]
    whole = check(train(tiny_data / "bin", tmp_path / "whole", *common, "--max-update", "40", task="fe_mlm"))
    check(train(tiny_data / "bin", tmp_path / "again", *common, "--max-update", "40", task="fe_mlm"))
    assert_same_params(tmp_path / "whole" / "checkpoint_last.pt", tmp_path / "again" / "checkpoint_last.pt")
    check(train(tiny_data / "bin", tmp_path / "parts", *common, "--max-update", "23", task="fe_mlm"))
    check(train(tiny_data / "bin", tmp_path / "parts", *common, "--max-update", "40", task="fe_mlm"))
    assert_same_params(tmp_path / "whole" / "checkpoint_last.pt", tmp_path / "parts" / "checkpoint_last.pt")
    record = json_logs(whole, "train_inner")[-1]
    assert float(record["bsz"]) <= 4 and float(record["masks_per_seq"]) > 0


# ---- FE views of any policy (--task fe_mlm --mask-policy P; ours) ------------------------------

def l3_like_probabilities(n=24, k=4, seed=0):
    """The l3 policy's probabilities of one block (mean 0.15, capped at 1/k), two special tokens."""
    from fairseq_maskplug.masking import mask_probabilities

    rng = np.random.default_rng(seed)
    maskable = np.ones(n, bool)
    maskable[[0, n - 1]] = False
    return mask_probabilities(rng.beta(0.5, 0.5, n), 0.15, maskable, cap=1 / k), maskable


def test_bernoulli_views_are_disjoint_and_each_view_has_the_policys_distribution():
    """Per view: the per-token frequencies fit p_i (chi-square over the tokens), two tokens are
    in it together with probability p_i p_j (independence), and its mask count is distributed as
    the count of the policy's own Bernoulli draws (two-sample chi-square)."""
    from scipy import stats

    from fairseq_maskplug.masking.fully_explored import bernoulli_views
    from stats_helpers import P_MIN, assert_proportion

    k = 4
    p, maskable = l3_like_probabilities(k=k)
    views = np.array([bernoulli_views(p, k, np.random.default_rng(s)) for s in range(SEEDS)])  # S x K x n
    assert views.sum(axis=1).max() <= 1, "views overlap"
    assert not views[:, :, ~maskable].any()
    own = np.array([np.random.default_rng(10**6 + s).random(p.size) < p for s in range(SEEDS)])  # l3's choose
    free = (p > 0) & (p < 1)
    i, j = np.argsort(-p)[:2]  # the two likeliest tokens
    for view in range(k):
        counts = views[:, view].sum(axis=0)
        statistic = float(((counts[free] - SEEDS * p[free]) ** 2 / (SEEDS * p[free] * (1 - p[free]))).sum())
        assert stats.chi2.sf(statistic, int(free.sum())) > P_MIN, f"view {view}: frequencies do not fit p_i"
        assert_proportion(int((views[:, view, i] & views[:, view, j]).sum()), SEEDS, p[i] * p[j],
                          f"view {view}: tokens {i} and {j} together")
        sizes = np.arange(p.size + 1)
        table = np.array([np.bincount(views[:, view].sum(1), minlength=sizes.size),
                          np.bincount(own.sum(1), minlength=sizes.size)])
        table = table[:, table.sum(0) > 0]
        assert stats.chi2_contingency(table).pvalue > P_MIN, f"view {view}: mask counts differ from the policy's"


def test_the_k_view_average_is_unbiased_for_the_policys_summed_gradient():
    """For fixed per-token gradients g_i, (1/K) sum_k sum_{i in view k} g_i has expectation
    sum_i p_i g_i, that of one mask of the policy (linearity; the loss summed over masked tokens)."""
    from fairseq_maskplug.masking.fully_explored import bernoulli_views
    from stats_helpers import assert_mean

    k = 4
    p, _ = l3_like_probabilities(k=k, seed=3)
    g = np.random.default_rng(7).normal(size=(p.size, 3))
    estimates = np.array([bernoulli_views(p, k, np.random.default_rng(s)).astype(float).sum(0) @ g / k
                          for s in range(SEEDS)])
    for d in range(3):
        assert_mean(estimates[:, d], float(p @ g[:, d]), f"gradient coordinate {d}")


def test_bernoulli_views_refuse_probabilities_above_one_over_k():
    from fairseq_maskplug.masking.fully_explored import bernoulli_views

    with pytest.raises(ValueError, match="every inclusion probability <= 1/4, but the largest is 0.3"):
        bernoulli_views(np.array([0.1, 0.3, 0.0]), 4, np.random.default_rng(0))
    assert bernoulli_views(np.array([0.0, 0.25, 0.25]), 4, np.random.default_rng(0))[:, 0].sum() == 0


class Block(list):
    """A list of token tensors standing for blocked data (what the FE dataset wraps)."""


def fe_corruption():
    from fairseq_maskplug.masking import Corruption

    return Corruption(mask_idx=3, replacement_ids=np.arange(4, 30))


def fe_dataset(policy, k=3, side=None):
    rng = np.random.default_rng(0)
    blocks = Block(torch.from_numpy(np.concatenate([[0], rng.integers(4, 30, n), [2]])) for n in (12, 20, 7, 30))
    return PolicyMaskedDataset(blocks, side or {}, policy, fe_corruption(), (0, 1, 2), 1, 5, views=k)


@pytest.mark.parametrize("name", ["random", "span"])
def test_the_random_and_span_policies_draw_the_papers_views(name):
    """fe_mlm's one route: --mask-policy random (the default) and span give exactly the paper's subword and span
    views, fully_explored_masks + the 80/10/10 rule on the generator of (seed, epoch, index), as the task drew
    them before its views became a policy's (the full tier's test_compatibility resumes such a checkpoint)."""
    from fairseq_maskplug.masking import GeometricSpans, build_mask_policy, corrupt, maskable_positions

    options = {"mask_prob": 0.2} if name == "random" else {"span_mask_prob": 0.2, "span_geometric_p": 0.3,
                                                             "span_max_length": 4}
    dataset = fe_dataset(build_mask_policy(name, SimpleNamespace(**options)))
    dataset.set_epoch(2)
    span = None if name == "random" else GeometricSpans(0.3, 4)
    for index in range(4):
        tokens = dataset.items.blocks[index].numpy()
        rng = np.random.default_rng((5, 2, index))
        masks = fully_explored_masks(len(tokens), 3, 0.2, rng, maskable_positions(tokens, (0, 1, 2)), span)
        sources = [corrupt(tokens, m, rng, fe_corruption()) for m in masks]
        assert np.array_equal(dataset[index]["source"].numpy(), np.stack(sources))
        assert np.array_equal(dataset[index]["target"].numpy() != 1, masks)


def test_a_plugins_views_are_checked_at_the_item():
    from fairseq_maskplug.masking import MaskPolicy

    class Overlapping(MaskPolicy):
        def views(self, tokens, maskable, side_info, rng, k):
            return np.stack([maskable] * k)

    with pytest.raises(ValueError, match="Overlapping.views returned overlapping views at item 0"):
        fe_dataset(Overlapping(None))[0]


def with_plt(tiny_data, tmp_path, beta=(0.5, 0.5)):
    """tiny_data's binarized corpus with a random PLT track on train and valid."""
    import shutil

    from fairseq.data import Dictionary, data_utils
    from fairseq_maskplug.data import write_side_info

    data = tmp_path / "bin"
    shutil.copytree(tiny_data / "bin", data)
    rng = np.random.default_rng(0)
    for split in ("train", "valid"):
        tokens = data_utils.load_indexed_dataset(str(data / split), Dictionary.load(str(data / "dict.txt")))
        write_side_info(str(data / f"{split}.plt"), (rng.beta(*beta, n) for n in np.array(tokens.sizes)),
                        tokens_prefix=str(data / split))
    return data


@pytest.mark.parametrize("flags, message", [
    (["--mask-policy", "selective"], "cannot draw K disjoint views of --mask-policy selective: its masks are tokens"),
    (["--mask-policy", "salient_span"], "cannot draw K disjoint views of --mask-policy salient_span: it defines "
                                        "neither probabilities()"),
    (["--l3-mean", "0.2"], "--task fe_mlm --mask-policy random does not read --l3-mean (an option of mask policy "
                           "'l3')"),
])
def test_policies_without_views_and_options_that_nothing_reads_are_refused(tiny_data, flags, message):
    with pytest.raises(ValueError) as error:
        make_task(tiny_data / "bin", *flags)
    assert message in str(error.value)


def test_a_split_whose_l3_probabilities_exceed_one_over_k_is_refused_when_it_loads(tiny_data, tmp_path):
    data = with_plt(tiny_data, tmp_path)
    task, _ = make_task(data, "--mask-policy", "l3", "--fe-views", "4")
    with pytest.raises(ValueError, match=r"--fe-views 4 with --mask-policy l3: block \d+ of split 'train' masks a "
                                         r"token with probability 0\.\d+ > 1/4.*--l3-max-prob 0.25\)"):
        task.load_dataset("train")
    task, _ = make_task(data, "--mask-policy", "l3", "--fe-views", "4", "--l3-max-prob", "0.25")
    task.load_dataset("train")
    with pytest.raises(ValueError, match=r"--fe-views 4 with --mask-prob 0.3: K disjoint views need K \* rate <= 1"):
        make_task(data, "--mask-policy", "random", "--fe-views", "4", "--mask-prob", "0.3")  # refused before loading


@pytest.mark.e2e
def test_fe_mlm_with_l3_views_trains_deterministically(tiny_data, tmp_path):
    data = with_plt(tiny_data, tmp_path)
    flags = ["--mask-policy", "l3", "--fe-views", "4", "--l3-max-prob", "0.25", "--seed", "3", "--max-update", "6",
             "--no-epoch-checkpoints", "--batch-size", "4"]
    first = check(train(data, tmp_path / "a", *flags, task="fe_mlm"))
    check(train(data, tmp_path / "b", *flags, task="fe_mlm"))
    assert_same_params(tmp_path / "a" / "checkpoint_last.pt", tmp_path / "b" / "checkpoint_last.pt")
    records = json_logs(first, "train_inner")
    assert [int(r["num_updates"]) for r in records] == list(range(1, 7))
    assert all(np.isfinite(float(r["loss"])) for r in records) and float(records[-1]["masks_per_seq"]) > 0
