"""Real fairseq-train runs of --task guided_mlm on tiny data (CPU, a few seconds each)."""

import json
import math
import shutil
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from fairseq.data import Dictionary

from fairseq_maskplug.data import load_blocked_split
from fairseq_helpers import (BIN, CPU_RUN, EXAMPLE_PLUGIN, REPO, TINY_ROBERTA, assert_same_params, check,
                             json_logs, run, train)
from preprocess import binarize_side_info

pytestmark = pytest.mark.e2e


def block_counts(data, split):
    """Blocks, maskable tokens and blocks too short to be sure of a mask, as train() blocks them."""
    cfg = SimpleNamespace(data=str(data), sample_break_mode="none", tokens_per_sample=32,
                          shorten_method="none", shorten_data_split_list="", seed=1)
    d = Dictionary.load(str(data / "dict.txt"))
    blocks, _ = load_blocked_split(cfg, split, d)
    maskable = [int(((blocks[i] != d.bos()) & (blocks[i] != d.eos())).sum()) for i in range(len(blocks))]
    return len(blocks), sum(maskable), sum(0.15 * n < 1 for n in maskable)


def test_training_logs_what_the_policy_did(tiny_data, tmp_path):
    result = check(train(tiny_data / "bin", tmp_path / "ck", "--max-epoch", "2", "--mask-prob", "0.15"))
    epochs = json_logs(result, "train")
    assert len(epochs) == 2
    for record in epochs + json_logs(result, "valid"):
        split = "train" if "train_loss" in record else "valid"
        n_blocks, maskable, short = block_counts(tiny_data / "bin", split)
        assert math.isfinite(float(record[f"{split}_loss"]))
        # per block, floor(0.15 n + u) has mean 0.15 n and variance <= 1/4
        tolerance = 5 * math.sqrt(n_blocks / 4) / maskable + 5e-5  # + log rounding
        assert abs(float(record[f"{split}_mask_rate"]) - 0.15) <= tolerance
        assert float(record[f"{split}_masks_per_seq"]) == pytest.approx(
            float(record[f"{split}_mask_rate"]) * maskable / n_blocks, rel=0.01)
        # a block gets no mask only if 0.15 n < 1
        assert float(record[f"{split}_seq_unmasked"]) <= short / n_blocks + 5e-5
    # the fixed-mask scorer used to compare runs reproduces fairseq's own validation loss, with the same masks for
    # every checkpoint it scores (the same one three times: the same masked tokens, the same loss)
    scored = check(run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate_mlm", "--data", tiny_data / "bin",
                        "--mask-prob", "0.15", *[tmp_path / "ck" / "checkpoint_last.pt"] * 3]))
    scores = [json.loads(line) for line in scored.stdout.strip().splitlines()[-3:]]
    assert scores[0] == scores[1] == scores[2], scores
    score = scores[-1]
    last_valid = json_logs(result, "valid")[-1]
    assert score["updates"] == int(last_valid["valid_num_updates"])
    assert round(score["loss"], 3) == float(last_valid["valid_loss"])
    assert score["units"] == "bits per masked token" and score["masked"] > 0 and "unigram_loss" not in score
    # --unigram-from: the same masked tokens scored by the corpus's add-one smoothed frequencies, the model's own
    # loss unchanged
    with_unigram = check(run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate_mlm", "--data",
                              tiny_data / "bin", "--unigram-from", tiny_data / "bin",
                              tmp_path / "ck" / "checkpoint_last.pt"]))
    unigram = json.loads(with_unigram.stdout.strip().splitlines()[-1])
    assert unigram["loss"] == score["loss"] and unigram["masked"] == score["masked"]
    from fairseq.data import Dictionary
    types = len(Dictionary.load(str(tiny_data / "bin" / "dict.txt")))
    assert 0 < unigram["unigram_loss"] < math.log2(types)  # frequencies know more than a uniform guess


def test_unigram_bits_are_the_add_one_smoothed_frequencies():
    from fairseq_maskplug.evaluation.evaluate_mlm import unigram_bits

    bits = unigram_bits([0, 2, 6])  # (1, 3, 7) / 11
    assert bits.tolist() == pytest.approx([math.log2(11), math.log2(11 / 3), math.log2(11 / 7)])
    with pytest.raises(ValueError, match="non-negative counts"):
        unigram_bits([1, -1])


def test_tensorboard_event_files_hold_the_losses_and_the_mask_statistics(tiny_data, tmp_path):
    """fairseq's --tensorboard-logdir with tensorboardX (the tensorboard extra): the package's mask
    statistics are logged beside the losses, for train and valid."""
    # a process of its own: fairseq flushes its writers when the process exits
    check(run([BIN / "fairseq-maskplug-train", tiny_data / "bin", "--task", "guided_mlm", "--tokens-per-sample", "32",
               "--save-dir", tmp_path / "ck", *TINY_ROBERTA, *CPU_RUN, "--max-epoch", "1",
               "--tensorboard-logdir", tmp_path / "tb"], new_process=True))
    for split in ("train", "valid"):
        events = b"".join(path.read_bytes() for path in (tmp_path / "tb" / split).glob("events.out.tfevents.*"))
        for tag in (b"loss", b"mask_rate", b"masks_per_seq", b"seq_unmasked"):
            assert tag in events, (split, tag)


def test_same_seed_gives_identical_training_with_either_entry_point(tiny_data, tmp_path):
    check(train(tiny_data / "bin", tmp_path / "a", "--max-epoch", "1", "--seed", "11"))
    plugin_dir = check(run([BIN / "fairseq-maskplug-dir"])).stdout.strip()
    assert (REPO / "fairseq_maskplug").samefile(plugin_dir)
    # fairseq-maskplug-train adds --user-dir itself
    check(run([BIN / "fairseq-maskplug-train", tiny_data / "bin", "--task", "guided_mlm",
               "--criterion", "masked_lm", "--tokens-per-sample", "32", "--save-dir", tmp_path / "b",
               "--max-epoch", "1", "--seed", "11",
               *TINY_ROBERTA, *CPU_RUN]))
    assert_same_params(tmp_path / "a" / "checkpoint_last.pt", tmp_path / "b" / "checkpoint_last.pt")


def test_resume_mid_epoch_equals_the_uninterrupted_run(tiny_data, tmp_path):
    common = ["--seed", "3", "--max-epoch", "100", "--no-epoch-checkpoints"]
    whole = check(train(tiny_data / "bin", tmp_path / "whole", *common, "--max-update", "30"))
    check(train(tiny_data / "bin", tmp_path / "parts", *common, "--max-update", "17"))
    resumed = check(train(tiny_data / "bin", tmp_path / "parts", *common, "--max-update", "30"))
    assert "Loaded checkpoint" in resumed.stdout + resumed.stderr
    losses = {r["num_updates"]: r["loss"] for r in json_logs(whole, "train_inner")}
    resumed_losses = {r["num_updates"]: r["loss"] for r in json_logs(resumed, "train_inner")}
    assert sorted(resumed_losses, key=int)[0] == "18"
    assert all(losses[k] == v for k, v in resumed_losses.items())
    assert_same_params(tmp_path / "whole" / "checkpoint_last.pt", tmp_path / "parts" / "checkpoint_last.pt")


FLAGGED = ("w0", "w1", "w2", "w3")


def write_flags(text, out):
    with open(text) as src, open(out, "w") as dst:
        for line in src:
            dst.write(" ".join("1" if w in FLAGGED else "0" for w in line.split()) + "\n")


@pytest.fixture(scope="module")
def flagged_data(tiny_data, tmp_path_factory):
    data = tmp_path_factory.mktemp("flagged") / "bin"
    shutil.copytree(tiny_data / "bin", data)
    for split in ("train", "valid"):
        write_flags(tiny_data / f"{split}.txt", data.parent / f"{split}.flags")
        assert binarize_side_info.main([
            "--tokens", str(tiny_data / f"{split}.txt"), "--values", str(data.parent / f"{split}.flags"),
            "--destdir", str(data), "--split", split, "--name", "flags", "--dtype", "uint8"]) == 0
    words = open(tiny_data / "train.txt").read().split()
    return data, sum(w in FLAGGED for w in words) / len(words)


def test_user_plugin_policy_and_its_matched_random_baseline(flagged_data, tmp_path):
    data, flagged_share = flagged_data
    flagged = check(train(data, tmp_path / "f", "--max-epoch", "1", "--mask-policy", "flagged",
                          user_dir=EXAMPLE_PLUGIN))
    matched = check(train(data, tmp_path / "m", "--max-epoch", "1", "--mask-policy", "matched_random",
                          "--matched-policy", "flagged", "--flagged-track", "flags", user_dir=EXAMPLE_PLUGIN))
    (f_epoch,), (m_epoch,) = json_logs(flagged, "train"), json_logs(matched, "train")
    # every flagged token of the training text is masked exactly once in the epoch
    assert float(f_epoch["train_mask_rate"]) == pytest.approx(flagged_share, abs=1e-4)
    for key in ("train_mask_rate", "train_masks_per_seq", "train_seq_unmasked"):
        assert f_epoch[key] == m_epoch[key]
    assert f_epoch["train_loss"] != m_epoch["train_loss"]  # same counts, other positions
    # a tool that loads the user policy's checkpoint needs its module: --user-dir, as fairseq-train
    checkpoint = tmp_path / "f" / "checkpoint_last.pt"
    refused = run([BIN / "fairseq-maskplug-evaluate-mlm", "--data", data, checkpoint], new_process=True)
    assert refused.returncode == 2 and "unknown mask policy 'flagged'" in refused.stderr, refused.stderr[-2000:]
    assert "--user-dir" in refused.stderr and "Traceback" not in refused.stderr
    scored = check(run([BIN / "fairseq-maskplug-evaluate-mlm", "--data", data, "--user-dir", EXAMPLE_PLUGIN,
                        checkpoint], new_process=True))
    assert json.loads(scored.stdout.splitlines()[-1])["loss"] > 0
    missing = run([BIN / "fairseq-maskplug-evaluate-mlm", "--data", data, "--user-dir", tmp_path / "nowhere",
                   checkpoint])
    assert missing.returncode == 2 and f"--user-dir not found: {tmp_path / 'nowhere'}" in missing.stderr


def test_misaligned_side_information_stops_before_training(flagged_data, tmp_path):
    data, _ = flagged_data
    from fairseq_maskplug.data import SideInfoDataset, write_side_info
    flags = SideInfoDataset(str(data / "train.flags"))
    rows = [flags[i].numpy() for i in range(len(flags))]
    rows[41] = np.append(rows[41], 0)
    write_side_info(str(data / "train.shifted"), rows, "uint8")
    for suffix in (".bin", ".idx", ".json"):  # the valid split stays aligned
        shutil.copy(data / f"valid.flags{suffix}", data / f"valid.shifted{suffix}")
    result = train(data, tmp_path / "x", "--max-epoch", "1", "--mask-policy", "flagged",
                   "--flagged-track", "shifted", user_dir=EXAMPLE_PLUGIN)
    assert result.returncode != 0
    assert ("side information 'shifted' of split 'train'" in result.stderr
            and "does not match the token data at line 42" in result.stderr), result.stderr[-2000:]
    assert "train_inner" not in result.stdout + result.stderr


def test_empty_training_split_fails_clearly(tmp_path):
    (tmp_path / "train.txt").write_text("")
    (tmp_path / "valid.txt").write_text("w1 w2\n")
    (tmp_path / "dict.txt").write_text("w1 1\nw2 1\n")
    check(run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", tmp_path / "train.txt",
               "--validpref", tmp_path / "valid.txt", "--srcdict", tmp_path / "dict.txt",
               "--destdir", tmp_path / "bin", "--workers", "1"]))
    result = train(tmp_path / "bin", tmp_path / "ck", "--max-epoch", "1")
    assert result.returncode != 0
    assert "split 'train'" in result.stderr and "has no lines" in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize("task", ["guided_mlm", "guided_denoising"])
def test_a_finished_run_stays_finished(tiny_data, tmp_path, task):
    """--max-update reached in the middle of an epoch: fairseq-maskplug-train run again trains nothing and
    keeps its checkpoints (fairseq alone takes one more update and overwrites checkpoint_last.pt and
    checkpoint_best.pt); with --max-update raised it goes on."""
    from fairseq_helpers import TINY_BART, model_params

    shape = TINY_ROBERTA if task == "guided_mlm" else TINY_BART

    def go(updates):
        return check(run([BIN / "fairseq-maskplug-train", tiny_data / "bin", "--task", task, "--tokens-per-sample",
                          "32", "--save-dir", tmp_path / "ck", "--max-update", str(updates), "--save-interval-updates",
                          "5", "--no-epoch-checkpoints", *shape, *CPU_RUN]))

    go(5)
    names = ("checkpoint_last.pt", "checkpoint_best.pt")
    before = {name: (tmp_path / "ck" / name).stat().st_mtime_ns for name in names}
    params = model_params(tmp_path / "ck" / "checkpoint_last.pt")
    again = go(5)
    assert "has trained 5 updates (--max-update 5): nothing to do" in again.stdout
    assert json_logs(again, "train_inner") == []
    assert {name: (tmp_path / "ck" / name).stat().st_mtime_ns for name in names} == before
    assert all(torch.equal(v, model_params(tmp_path / "ck" / "checkpoint_last.pt")[k]) for k, v in params.items())
    assert [int(r["num_updates"]) for r in json_logs(go(7), "train_inner")] == [6, 7]


def test_the_console_command_trains_without_a_save_directory_lock(tiny_data, tmp_path):
    """With --no-save the console command holds no lock on --save-dir, as every data-parallel rank but 0 does;
    it still ends as a worker leaves (status 0, the updates taken). A release of the absent lock once failed
    every torchrun run's rank 1, and only the full tier ran torchrun."""
    result = check(run([BIN / "fairseq-maskplug-train", tiny_data / "bin", "--task", "guided_mlm", "--tokens-per-sample",
                        "32", "--save-dir", tmp_path / "ck", "--max-update", "2", "--no-save", *TINY_ROBERTA, *CPU_RUN], new_process=True))
    assert [int(r["num_updates"]) for r in json_logs(result, "train_inner")] == [1, 2]
    assert not (tmp_path / "ck").exists() or not any((tmp_path / "ck").iterdir())
