"""``--mask-prob-schedule``: the rate of every update, thinning that keeps runs whole with each token's
probability scaled exactly (many seeds), the batches fairseq-train takes (the realised rate per update,
resume identical), and the configurations refused."""

import numpy as np
import pytest
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from fairseq_helpers import assert_same_params, check, json_logs, train
from fairseq_maskplug.masking.rate_schedule import hashed_uniforms, scheduled_rate, thin_rows
from fairseq_maskplug.masking.spans import GeometricSpans, span_mask
from stats_helpers import assert_proportion

SCHEDULE = ["--mask-prob-schedule", "linear", "--mask-prob-schedule-updates", "6"]


def test_schedules_by_hand():
    assert scheduled_rate(0, "linear", 0.3, 0.15, 10) == 0.3
    assert np.isclose(scheduled_rate(4, "linear", 0.3, 0.15, 10), 0.3 - 0.4 * 0.15)
    assert scheduled_rate(10, "linear", 0.3, 0.15, 10) == scheduled_rate(99, "linear", 0.3, 0.15, 10) == 0.15
    assert scheduled_rate(0, "cosine", 0.3, 0.15, 10) == 0.3
    assert np.isclose(scheduled_rate(5, "cosine", 0.3, 0.15, 10), 0.225)  # half way: the mean
    assert np.isclose(scheduled_rate(10, "cosine", 0.3, 0.15, 10), 0.15)
    assert scheduled_rate(7, "constant", 0.3, 0.15, 0) == 0.15
    with pytest.raises(ValueError, match="needs its length"):
        scheduled_rate(1, "linear", 0.3, 0.15, 0)


def runs(chosen):
    """Per position: the number of its run of chosen positions (0, 1, ...), -1 where not chosen."""
    begins = chosen & ~np.concatenate([[False], chosen[:-1]])
    return np.where(chosen, np.cumsum(begins) - 1, -1)


def test_thinning_keeps_runs_whole_and_scales_each_tokens_probability_exactly():
    """Span masks at 0.3 thinned with keep = 0.5: each position is predicted with probability exactly
    half its probability under the policy (both estimated over the same seeds), runs kept or dropped
    whole."""
    maskable = np.ones(40, dtype=bool)
    maskable[[0, 20, 39]] = False
    spans, seeds = GeometricSpans(0.2, 10), 6000
    masks = np.stack([span_mask(maskable, 0.3, spans, np.random.default_rng(seed)) for seed in range(seeds)])
    kept = thin_rows(masks, 0.5, np.stack([np.full(seeds, 7), np.arange(seeds)], axis=1))
    for mask, row in zip(masks[:500], kept[:500]):
        ids = runs(mask)
        for run in np.unique(ids[ids >= 0]):
            assert len(set(row[ids == run].tolist())) == 1, "a run was split"
    assert not (kept & ~masks).any()
    before, after = masks.sum(axis=0), kept.sum(axis=0)
    for position in (1, 10, 19, 30):
        # given the policy's masks, each one keeps position i with probability 0.5
        assert_proportion(int(after[position]), int(before[position]), 0.5, f"position {position}")
    assert before[~maskable].sum() == 0


def test_hashed_uniforms_are_uniform_and_depend_only_on_their_keys():
    from stats_helpers import assert_uniform

    u = hashed_uniforms(np.full(20000, 3), np.arange(20000))
    assert_uniform(np.histogram(u, bins=20, range=(0, 1))[0], "hashed uniforms")
    assert hashed_uniforms(np.array([3]), np.array([5]))[0] == u[5]  # the same keys, the same value
    assert len(np.unique(hashed_uniforms(np.arange(1000), np.zeros(1000, dtype=np.int64)))) == 1000


def make_task(data, *flags, task="guided_mlm", arch="roberta_base"):
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data), "--task", task, "--arch", arch, "--tokens-per-sample", "32", *map(str, flags)])
    return tasks.setup_task(convert_namespace_to_omegaconf(args).task)


def test_a_thinned_batch_gets_its_originals_back_and_its_counts(tiny_data):
    task = make_task(tiny_data / "bin", "--mask-policy", "span", *SCHEDULE)
    assert task.policy.options.span_mask_prob == 0.3  # the policy draws at the schedule's highest rate
    assert task.cfg.span_mask_prob == 0.15  # the task's configuration (saved in checkpoints) keeps what was given
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    batch = dataset.collater([dataset[i] for i in range(len(dataset))])
    source, target = batch["net_input"]["src_tokens"].clone(), batch["target"].clone()
    logged = task.prepare_batch(batch, 3)  # update 3 of 6: 0.3 - 0.5 * 0.15
    assert np.isclose(logged["mask_prob_scheduled"], 0.225) and batch["update_num"] == 3
    pad = task.dictionary.pad()
    dropped = target.ne(pad) & batch["target"].eq(pad)
    kept = batch["target"].ne(pad)
    assert dropped.any() and kept.any() and not (kept & target.eq(pad)).any()
    assert batch["net_input"]["src_tokens"][dropped].tolist() == target[dropped].tolist()  # originals back
    assert batch["net_input"]["src_tokens"][kept].tolist() == source[kept].tolist()
    assert batch["mask_counts"][:, 0].tolist() == kept.sum(dim=1).tolist()
    # the same update thins the same way (a resumed run's batches)
    again = dataset.collater([dataset[i] for i in range(len(dataset))])
    task.prepare_batch(again, 3)
    assert again["target"].tolist() == batch["target"].tolist()


@pytest.mark.parametrize("flags, message", [
    (["--mask-policy", "selective", *SCHEDULE], "needs a --mask-policy with a rate"),
    (["--mask-policy", "random", "--mask-prob", "0.2", *SCHEDULE], "leave --mask-prob out"),
    (["--mask-policy", "random", "--mask-prob-schedule", "cosine"], "needs --mask-prob-schedule-updates"),
    (["--mask-policy", "random", "--mask-prob-schedule-start", "0.4"], "read only with --mask-prob-schedule"),
])
def test_schedules_that_cannot_be_applied_are_refused(tiny_data, flags, message):
    with pytest.raises(ValueError, match=message):
        make_task(tiny_data / "bin", *flags)


def test_text_to_text_items_are_refused_a_schedule(tiny_data):
    with pytest.raises(ValueError, match="cannot be thinned"):
        make_task(tiny_data / "bin", "--mask-policy", "span", *SCHEDULE, task="guided_denoising", arch="bart_tiny")


@pytest.mark.e2e
def test_fairseq_train_follows_the_schedule_per_update_and_resumes_identically(tiny_data, tmp_path):
    common = ["--mask-policy", "random", *SCHEDULE, "--seed", "2", "--max-epoch", "100", "--no-epoch-checkpoints",
              "--batch-size", "16"]
    whole = check(train(tiny_data / "bin", tmp_path / "whole", *common, "--max-update", "10"))
    records = json_logs(whole, "train_inner")
    assert [float(r["mask_prob_scheduled"]) for r in records] == [
        round(scheduled_rate(u, "linear", 0.3, 0.15, 6), 4) for u in range(10)]
    early = np.mean([float(r["mask_rate"]) for r in records[:2]])
    late = np.mean([float(r["mask_rate"]) for r in records[-4:]])
    assert early > 0.24 and late < 0.2  # the realised rate follows it (about 300 maskable tokens a batch)
    check(train(tiny_data / "bin", tmp_path / "parts", *common, "--max-update", "4"))
    resumed = check(train(tiny_data / "bin", tmp_path / "parts", *common, "--max-update", "10"))
    assert [r["mask_rate"] for r in json_logs(resumed, "train_inner")] == [r["mask_rate"] for r in records[4:]]
    assert_same_params(tmp_path / "whole" / "checkpoint_last.pt", tmp_path / "parts" / "checkpoint_last.pt")
    # the checkpoint's configuration rebuilds the task (as evaluation loads it)
    from fairseq import checkpoint_utils

    _, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(tmp_path / "whole" / "checkpoint_last.pt")], arg_overrides={"data": str(tiny_data / "bin")})
    assert task.rate_schedule[0] == "linear" and task.policy.options.mask_prob == 0.3
