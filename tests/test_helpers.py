"""The test suite's own machinery: the rule behind the ``e2e`` marker, and training in this
process (``fairseq_helpers.run``) giving what the command gives in a process of its own."""

import numpy as np
import pytest
import torch

import subprocess_guard
from fairseq_helpers import BIN, CPU_RUN, REPO, TINY_ROBERTA, assert_same_params, check, json_logs, run
from subprocess_guard import training_command


@pytest.mark.parametrize("args, program", [
    ([BIN / "fairseq-train", "data"], "fairseq-train"),
    ([str(BIN / "fairseq-maskplug-train"), "data", "--task", "guided_mlm"], "fairseq-maskplug-train"),
    (["fairseq-hydra-train", "--config-dir", "x"], "fairseq-hydra-train"),
    ([BIN / "torchrun", "--standalone", BIN / "fairseq-maskplug-train"], "torchrun"),
    (["bash", "-c", "TRY=1\nfairseq-maskplug-train work/data --task fe_mlm $TRY"], "fairseq-maskplug-train"),
    (["bash", str(REPO / "recipes" / "selective_masking.sh")], "recipes/selective_masking.sh"),
    ("fairseq-train data --arch roberta_base", "fairseq-train"),
    ([BIN / "fairseq-preprocess", "--only-source"], None),
    ([BIN / "fairseq-maskplug-score-spans", "--checkpoint", "/tmp/test_two_torchrun_workers0/ck.pt"], None),
    ([BIN / "python", "-m", "preprocess.score_pll", "--data", "/tmp/fairseq-train-data"], None),
    ([BIN / "python", "benchmarks/bench_bm25.py", "--smoke"], None),
])
def test_training_commands_are_recognised(args, program):
    assert training_command(args) == program


def test_an_unmarked_test_may_not_train():
    with pytest.raises(RuntimeError, match="test_an_unmarked_test_may_not_train runs fairseq-train but is not "
                                           "marked e2e: add @pytest.mark.e2e"):
        run([BIN / "fairseq-train", "--help"])
    with pytest.raises(RuntimeError, match="runs torchrun but is not marked e2e"):
        run([BIN / "torchrun", "--help"], new_process=True)
    subprocess_guard.check_current_test([BIN / "fairseq-preprocess", "--help"])  # not training: allowed


def train_args(data, save, *extra):
    return [BIN / "fairseq-maskplug-train", data, "--task", "guided_mlm", "--criterion",
            "masked_lm", "--tokens-per-sample", "32", "--save-dir", save, "--seed", "4", "--no-epoch-checkpoints",
            *TINY_ROBERTA, *CPU_RUN, *extra]


@pytest.mark.e2e
def test_in_process_training_equals_its_own_process_and_leaks_nothing(tiny_data, tmp_path):
    """A better run first (2 epochs), then a worse one (lr 1e-5, 1 epoch) in a new directory: fairseq
    keeps the best validation loss on a function attribute, which would stop the second run from
    writing checkpoint_best.pt. The second run in this process equals the same command in a process
    of its own, and the caller's random states are left as they were."""
    args = lambda save, *extra: train_args(tiny_data / "bin", save, *extra)  # noqa: E731
    torch.manual_seed(123)
    np.random.seed(123)
    states = torch.get_rng_state(), np.random.get_state()[1].copy()
    better = check(run(args(tmp_path / "better", "--max-epoch", "2")))
    worse = check(run(args(tmp_path / "worse", "--max-epoch", "1", "--lr", "1e-5")))
    assert float(json_logs(worse, "valid")[-1]["valid_loss"]) > float(json_logs(better, "valid")[-1]["valid_loss"])
    assert (tmp_path / "worse" / "checkpoint_best.pt").exists()
    assert "valid_best_loss" not in json_logs(worse, "valid")[0]  # fairseq logs it once a best is known
    alone = check(run(args(tmp_path / "alone", "--max-epoch", "1", "--lr", "1e-5"), new_process=True))
    assert [r["loss"] for r in json_logs(alone, "train_inner")] == [r["loss"] for r in json_logs(worse, "train_inner")]
    assert_same_params(tmp_path / "worse" / "checkpoint_best.pt", tmp_path / "alone" / "checkpoint_best.pt")
    assert torch.equal(torch.get_rng_state(), states[0]) and np.array_equal(np.random.get_state()[1], states[1])


@pytest.mark.e2e
def test_in_process_errors_keep_their_exit_status_and_stderr(tiny_data, tmp_path):
    refused = run([BIN / "fairseq-maskplug-train", tiny_data / "bin", "--task", "guided_mlm", "--mask-prob", "0",
                   "--arch", "roberta_tiny", "--save-dir", tmp_path])
    assert refused.returncode == 2 and "fairseq-maskplug-train: error: --mask-prob" in refused.stderr
    unknown = run([BIN / "fairseq-train", tiny_data / "bin", "--task", "no_such_task"])
    assert unknown.returncode == 2 and "invalid choice: 'no_such_task'" in unknown.stderr
    missing = run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate",
                   "--checkpoint", tmp_path / "missing.pt", "--data", tiny_data / "bin"])
    assert missing.returncode != 0 and missing.stderr
