"""FE-MLM: the K disjoint masks (statistics), the view batches, the view-averaged loss, training."""

import numpy as np
import pytest
import torch

import fairseq_maskplug.plugin  # noqa: F401  (registers the tasks with fairseq)
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq_helpers import TINY_ROBERTA, assert_same_params, check, json_logs, train
from fairseq_maskplug.data import ViewCountedDataset
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
    counted = ViewCountedDataset(None, sizes, views=4)
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
    task, _ = make_task(tiny_data / "bin", "--fe-views", "3", "--fe-mask-prob", "0.2")
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


def test_max_tokens_counts_the_tokens_of_all_views(tiny_data):
    task, _ = make_task(tiny_data / "bin", "--fe-views", "4")
    itr, _ = first_batch(task, max_sentences=None, max_tokens=256)
    ds = task.dataset("train")
    for batch_indices in itr.frozen_batches:
        assert all(ds.num_tokens(i) == 4 * ds.size(i) for i in batch_indices)
        assert max(ds.num_tokens(i) for i in batch_indices) * len(batch_indices) <= 256


def test_loss_is_the_mean_of_the_per_view_losses(tiny_data):
    task, cfg = make_task(tiny_data / "bin", "--fe-views", "4", "--fe-mask-prob", "0.25")
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
    with pytest.raises(ValueError, match="--fe-views \\* --fe-mask-prob must be <= 1"):
        make_task(tiny_data / "bin", "--fe-views", "8", "--fe-mask-prob", "0.15")


@pytest.mark.e2e
def test_fe_training_is_deterministic_and_resumes_exactly(tiny_data, tmp_path):
    common = ["--seed", "5", "--max-epoch", "100", "--no-epoch-checkpoints", "--fe-granularity", "span",
              "--batch-size", "4"]
    whole = check(train(tiny_data / "bin", tmp_path / "whole", *common, "--max-update", "40", task="fe_mlm"))
    check(train(tiny_data / "bin", tmp_path / "again", *common, "--max-update", "40", task="fe_mlm"))
    assert_same_params(tmp_path / "whole" / "checkpoint_last.pt", tmp_path / "again" / "checkpoint_last.pt")
    check(train(tiny_data / "bin", tmp_path / "parts", *common, "--max-update", "23", task="fe_mlm"))
    check(train(tiny_data / "bin", tmp_path / "parts", *common, "--max-update", "40", task="fe_mlm"))
    assert_same_params(tmp_path / "whole" / "checkpoint_last.pt", tmp_path / "parts" / "checkpoint_last.pt")
    record = json_logs(whole, "train_inner")[-1]
    assert float(record["bsz"]) <= 4 and float(record["masks_per_seq"]) > 0
