"""--task joint_mlm_classification: classification + auxiliary MLM under any policy, real fairseq-train."""

import json

import numpy as np
import pytest

from fairseq_helpers import (BIN, CPU_RUN, REPO, TINY_ROBERTA, assert_same_params, check, json_logs, run)
from stats_helpers import Z
from test_finetune_e2e import write_task

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def task_data(tiny_data, tmp_path_factory):
    """Sentence-prediction layout with a PLT track (random values) in input0/."""
    from fairseq.data import Dictionary, data_utils
    from fairseq_maskplug.data import write_side_info
    root = tmp_path_factory.mktemp("joint")
    data = write_task(tiny_data, root)
    rng = np.random.default_rng(0)
    d = Dictionary.load(str(data / "input0" / "dict.txt"))
    for split in ("train", "valid"):
        tokens = data_utils.load_indexed_dataset(str(data / "input0" / split), d)
        write_side_info(str(data / "input0" / f"{split}.plt"),
                        (rng.beta(2, 1, len(tokens[i])) for i in range(len(tokens))),
                        tokens_prefix=str(data / "input0" / split))
    return data


def joint(data, save, *extra):
    return run([BIN / "fairseq-train", data, "--user-dir", REPO / "fairseq_maskplug",
                "--task", "joint_mlm_classification", "--criterion", "joint_mlm_classification",
                "--num-classes", "2", "--tokens-per-sample", "32", "--save-dir", save,
                "--best-checkpoint-metric", "accuracy", "--maximize-best-checkpoint-metric",
                "--no-epoch-checkpoints", *TINY_ROBERTA, *CPU_RUN, *extra])


def test_l3_joint_training_logs_both_objectives_and_resumes(tiny_data, task_data, tmp_path):
    common = ["--mask-policy", "l3", "--l3-mean", "0.2", "--mlm-weight", "0.5", "--seed", "2", "--max-epoch", "50"]
    whole = check(joint(task_data, tmp_path / "whole", *common, "--max-update", "30"))
    record = json_logs(whole, "valid")[-1]
    for key in ("valid_cls_loss", "valid_mlm_loss", "valid_accuracy", "valid_macro_f1", "valid_mask_rate"):
        assert key in record, record
    # an epoch masks each of the N training tokens by an independent Bernoulli draw with mean 0.2
    n_tokens = len(open(tiny_data / "train.txt").read().split())
    for epoch in json_logs(whole, "train"):
        assert abs(float(epoch["train_mask_rate"]) - 0.2) <= Z * 0.5 / np.sqrt(n_tokens) + 5e-5
    check(joint(task_data, tmp_path / "parts", *common, "--max-update", "13"))
    check(joint(task_data, tmp_path / "parts", *common, "--max-update", "30"))
    assert_same_params(tmp_path / "whole" / "checkpoint_last.pt", tmp_path / "parts" / "checkpoint_last.pt")
    # the evaluator scores joint checkpoints too, and agrees with fairseq's validation
    scored = check(run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate", "--checkpoint",
                        tmp_path / "whole" / "checkpoint_last.pt", "--data", task_data, "--split", "valid"]))
    result = json.loads(scored.stdout.strip().splitlines()[-1])
    assert result["units"] == "percent"
    assert result["accuracy"] == pytest.approx(float(record["valid_accuracy"]), abs=0.05)
    assert result["macro_f1"] == pytest.approx(float(record["valid_macro_f1"]), abs=0.01)


def test_stl_has_no_mlm_term(task_data, tmp_path):
    stl = check(joint(task_data, tmp_path / "stl", "--mlm-weight", "0", "--max-epoch", "1"))
    (epoch,) = json_logs(stl, "train")
    assert float(epoch["train_mlm_loss"]) == 0.0  # masks are drawn and logged, but not trained on
    assert float(epoch["train_mask_rate"]) > 0


def test_wrong_number_of_classes_is_rejected(task_data, tmp_path):
    result = joint(task_data, tmp_path / "x", "--num-classes", "3", "--max-epoch", "1")
    assert result.returncode != 0 and "has 2 labels but --num-classes is 3" in result.stderr
