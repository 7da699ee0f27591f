"""The main job in miniature: guided_mlm checkpoint -> sentence_prediction fine-tuning -> evaluate."""

import json

import pytest

from fairseq_helpers import BIN, CPU_RUN, TINY_ROBERTA, check, json_logs, run, train

pytestmark = pytest.mark.e2e


def write_task(tiny_data, root):
    """Label = whether the sentence contains w0: learnable by a tiny model."""
    for split in ("train", "valid"):
        lines = open(tiny_data / f"{split}.txt").read().splitlines()
        (root / f"{split}.input0").write_text("\n".join(lines) + "\n")
        (root / f"{split}.label").write_text("\n".join("yes" if "w0" in l.split() else "no" for l in lines) + "\n")
    check(run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", root / "train.input0",
               "--validpref", root / "valid.input0", "--srcdict", tiny_data / "bin" / "dict.txt",
               "--destdir", root / "task" / "input0", "--workers", "1"]))
    check(run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", root / "train.label",
               "--validpref", root / "valid.label", "--destdir", root / "task" / "label", "--workers", "1"]))
    return root / "task"


def test_finetune_from_guided_mlm_and_evaluate(tiny_data, tmp_path):
    check(train(tiny_data / "bin", tmp_path / "mlm", "--max-epoch", "2"))
    task = write_task(tiny_data, tmp_path)
    result = check(run([BIN / "fairseq-maskplug-train", task, "--task", "sentence_prediction",
                        "--criterion", "sentence_prediction", "--num-classes", "2", "--init-token", "0",
                        "--separator-token", "2", *TINY_ROBERTA, *CPU_RUN, "--max-epoch", "3",
                        "--finetune-from-model", tmp_path / "mlm" / "checkpoint_last.pt",
                        "--best-checkpoint-metric", "accuracy", "--maximize-best-checkpoint-metric",
                        "--save-dir", tmp_path / "ft", "--no-epoch-checkpoints"]))
    assert "loading pretrained model from" in (result.stdout + result.stderr).lower()
    best = max(float(r["valid_accuracy"]) for r in json_logs(result, "valid"))
    scored = check(run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate", "--checkpoint",
                        tmp_path / "ft" / "checkpoint_best.pt", "--data", task, "--split", "valid",
                        "--output", tmp_path / "valid.json"]))
    record = json.loads((tmp_path / "valid.json").read_text())
    assert record == json.loads(scored.stdout.strip().splitlines()[-1])
    assert record["n"] == 40
    assert ("a constant predictor" in scored.stderr) == (record["classes_predicted"] == 1)
    # the evaluator reproduces fairseq's own validation accuracy of the best checkpoint
    assert record["accuracy"] == pytest.approx(best, abs=0.01)  # percent, as fairseq logs it
    assert 0 < record["macro_f1"] <= 100
    # two splits in one process (the model loaded once): the same valid record, one file per split
    both = check(run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate", "--checkpoint",
                      tmp_path / "ft" / "checkpoint_best.pt", "--data", task, "--split", "train,valid",
                      "--output", tmp_path / "both.{split}.json"]))
    assert [json.loads(line)["split"] for line in both.stdout.strip().splitlines()[-2:]] == ["train", "valid"]
    assert json.loads((tmp_path / "both.valid.json").read_text()) == record
    assert json.loads((tmp_path / "both.train.json").read_text())["n"] > record["n"]
    refused = run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate", "--checkpoint",
                   tmp_path / "ft" / "checkpoint_best.pt", "--data", task, "--split", "train,valid",
                   "--output", tmp_path / "one.json"])
    assert refused.returncode == 2 and "name each split's file with {split}" in refused.stderr
    missing = run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate", "--checkpoint",
                   tmp_path / "ft" / "checkpoint_best.pt", "--data", task, "--split", "train,nosuch",
                   "--output", tmp_path / "partial.{split}.json"])  # every split read before any is scored
    assert missing.returncode == 2 and "nosuch" in missing.stderr and not list(tmp_path.glob("partial.*"))
