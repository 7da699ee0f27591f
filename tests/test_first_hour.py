"""What a new user meets first: ``--help`` listing the options a run has, each task's
criterion added or insisted on, options that would be ignored refused, one ``--data``
convention, lines longer than the block refused when the split is loaded."""

import dataclasses
import os
import subprocess

import numpy as np
import pytest
from fairseq.data import Dictionary
from fairseq.tasks import TASK_DATACLASS_REGISTRY

from fairseq_helpers import BIN
from fairseq_maskplug.data import write_side_info
from fairseq_maskplug.data.blocking import check_block_sizes
from fairseq_maskplug.data.layout import sentence_prediction_dir, token_data_dir
from fairseq_maskplug.tasks.joint_mlm_classification import JointMLMClassificationTask
from fairseq_maskplug.tasks.policy_options import build_task_policy
from fairseq_maskplug.commands.train_cli import main as train_main, with_task_criterion
from fairseq_maskplug.commands.train_help import training_help

ALL_POLICY_FLAGS = ("--mask-prob", "--matched-policy", "--l3-mean", "--selective-cap", "--span-max-length")


@pytest.mark.parametrize("task, own", [
    ("guided_mlm", ["--mask-policy", "--tokens-per-sample", "--sample-break-mode"]),
    ("selective_mlm", ["--mask-policy", "--leave-unmasked-prob"]),
    ("joint_mlm_classification", ["--loss-weighting", "--tartan-meta-lr", "--mlm-weight", "--num-classes"]),
])
def test_help_lists_the_task_and_every_policy_option_with_defaults(task, own):
    text = training_help(["--task", task])
    for flag in own + list(ALL_POLICY_FLAGS):
        assert f"  {flag} " in text, f"{flag} missing from --task {task} --help"
    assert "(default: 0.15)" in text and f"--task {task} options:" in text


def test_help_of_fe_mlm_shows_its_views_and_the_policy_it_takes():
    fe = training_help(["--task", "fe_mlm"])
    assert "  --fe-views " in fe and "(default: 4)" in fe and "  --mask-policy " in fe
    l3 = training_help(["--task", "fe_mlm", "--mask-policy", "l3"])
    assert "  --l3-max-prob " in l3 and "  --mask-prob " not in l3


def test_help_of_a_task_without_policies_and_its_criterion():
    tagger = training_help(with_task_criterion(["--task", "token_importance"]))
    assert "--criterion token_importance options:" in tagger and "  --positive-class-weight " in tagger


def test_mask_policy_narrows_help_to_the_policies_it_reads():
    span = training_help(["--task", "guided_mlm", "--mask-policy", "span"])
    assert "  --span-max-length " in span
    assert not any(f"  {flag} " in span for flag in ("--mask-prob", "--selective-cap", "--l3-mean"))
    matched = training_help(["--task", "guided_mlm", "--mask-policy", "matched_random", "--matched-policy",
                             "selective"])
    assert "  --matched-policy " in matched and "  --selective-cap " in matched
    assert "  --span-max-length " not in matched and "  --mask-prob " not in matched


@pytest.mark.e2e
def test_help_through_the_command_line_with_or_without_data_and_arch():
    for argv in (["--task", "guided_mlm", "--help"], ["DATA", "--arch", "roberta_tiny", "--task", "guided_mlm", "-h"]):
        result = subprocess.run([BIN / "fairseq-maskplug-train", *argv], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.count("--mask-policy") >= 2 and "  --selective-threshold " in result.stdout
    assert "--arch roberta_tiny options:" in result.stdout
    assert result.stdout.startswith("usage: ") and not result.stderr.strip(), result.stderr[-2000:]  # nothing first


def test_help_shows_the_package_first():
    """A task of this package: a one-line usage, then its options, its units, schedule and policies, its
    criterion's, and fairseq's generic groups after them (they came first: the task's started at line 581
    of 781). Without one of its tasks, the help begins with the package's tasks and policies."""
    lines = training_help(["--task", "guided_mlm"]).splitlines()
    assert lines[0].startswith("usage: ") and lines[1] == ""
    titles = [line for line in lines if line.endswith(":") and not line.startswith(" ")]
    assert titles[0] == "--task guided_mlm options:" and lines.index(titles[0]) < 10, lines[:12]
    ours = [i for i, t in enumerate(titles) if t.startswith(("--task ", "--mask-policy ", "what any policy",
                                                             "the mask rate"))]
    assert ours == list(range(len(ours))) and len(ours) >= 10, titles
    assert titles.index("options:") == len(ours) and "dataset_data_loading:" in titles[len(ours):]
    tagger = [line for line in training_help(with_task_criterion(["--task", "token_importance"])).splitlines()
              if line.endswith(":") and not line.startswith(" ")]
    assert tagger[:2] == ["--task token_importance options:", "--criterion token_importance options:"], tagger
    plain = " ".join(training_help([]).split()[:80])
    assert "Tasks of fairseq-maskplug: fe_mlm, guided_denoising, guided_mlm," in plain
    assert "Mask policies: random, matched_random, l3," in plain


def test_help_says_what_is_registered_now_and_each_range():
    text = " ".join(training_help(["--task", "guided_mlm"]).split())  # argparse wraps lines
    assert "registered now: random, matched_random, " in text and "learned_span" in text
    assert "; in (0, 1] (default: 0.15)" in text and "; in [2, inf) (default: 512)" in text


@pytest.mark.e2e
def test_an_unknown_task_is_named_before_anything_else():
    """fairseq's parser asked for --arch first: `--task guided_mlmm` gave `--arch is required`."""
    result = subprocess.run([BIN / "fairseq-maskplug-train", "DATA", "--task", "guided_mlmm"], capture_output=True,
                            text=True)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "fairseq-maskplug-train: error: --task guided_mlmm is not a registered task (did you mean guided_mlm?); "
        "this package's: fe_mlm, guided_denoising, guided_mlm, joint_mlm_classification, meta_span_policy, "
        "selective_mlm, span_policy, tlm, token_importance (a plugin's tasks need its --user-dir)"], result.stderr


def test_the_task_criterion_is_added_when_left_out():
    assert with_task_criterion(["D", "--task", "guided_mlm"])[-2:] == ["--criterion", "masked_lm"]
    assert with_task_criterion(["D", "--task", "joint_mlm_classification"])[-1] == "joint_mlm_classification"
    assert with_task_criterion(["D", "--task", "guided_mlm", "--criterion", "x"]) == ["D", "--task", "guided_mlm",
                                                                                   "--criterion", "x"]
    assert with_task_criterion(["D", "--task", "masked_lm"]) == ["D", "--task", "masked_lm"]  # fairseq's own


@pytest.mark.parametrize("argv, message", [
    (["--task", "joint_mlm_classification", "--criterion", "sentence_prediction", "--arch", "roberta_tiny"],
     "trains with --criterion joint_mlm_classification, not --criterion sentence_prediction (it trains the "
     "classifier without the masked-LM loss)"),
    (["--task", "guided_mlm", "--criterion", "cross_entropy", "--arch", "roberta_tiny"],
     "not --criterion cross_entropy (it predicts every input token"),
    (["--task", "guided_mlm"], "--arch is required"),
])
def test_wrong_criterion_or_missing_arch_is_one_line(tmp_path, capsys, argv, message):
    assert train_main([str(tmp_path / "no-data"), *argv, "--cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("fairseq-maskplug-train: error: ") and message in err[-1]


def test_the_task_refuses_a_wrong_criterion_under_plain_fairseq_train(tiny_data):
    from fairseq import tasks
    from omegaconf import OmegaConf

    cfg = TASK_DATACLASS_REGISTRY["guided_mlm"](data=str(tiny_data / "bin"))
    task = tasks.setup_task(OmegaConf.merge(OmegaConf.structured(cfg), {"_name": "guided_mlm", "seed": 1}))
    with pytest.raises(ValueError, match="--task guided_mlm trains with --criterion masked_lm"):
        task.build_criterion(OmegaConf.create({"_name": "cross_entropy"}))


def _task_cfg(task, **values):
    cfg = TASK_DATACLASS_REGISTRY[task]()
    for name, value in values.items():
        setattr(cfg, name, value)
    return cfg


@pytest.mark.parametrize("values, refused", [
    (dict(mask_prob=0.4), "--mask-policy selective does not read --mask-prob (an option of mask policy 'random')"),
    (dict(mask_policy="matched_random", selective_cap=0.2), "--selective-cap (an option of mask policy 'selective')"),
    (dict(mask_policy="span", mask_prob=0.3, l3_mean=0.2), "leave them out, or use --mask-policy l3 or "
                                                           "--mask-policy random"),
    (dict(), None),
    (dict(mask_policy="matched_random", matched_policy="selective", selective_cap=0.2), None),
    (dict(mask_policy="random", mask_prob=0.3), None),
])
def test_options_of_policies_the_run_does_not_read_are_refused(values, refused):
    cfg = _task_cfg("selective_mlm", **values)
    if refused is None:
        build_task_policy(cfg)
    else:
        with pytest.raises(ValueError, match=None) as error:
            build_task_policy(cfg)
        assert refused in str(error.value)


def _dictionary():
    d = Dictionary()
    for word in ("a", "b", "c"):
        d.add_symbol(word)
    return d


def test_meta_tartan_options_with_fixed_weights_are_refused():
    cfg = _task_cfg("joint_mlm_classification", loss_weighting="fixed", tartan_meta_lr=0.1, tartan_dev_fit_size=8)
    with pytest.raises(ValueError, match="--tartan-meta-lr, --tartan-dev-fit-size apply to --loss-weighting tartan"):
        JointMLMClassificationTask(cfg, _dictionary(), _dictionary())


def test_one_data_convention(tmp_path):
    root, input0 = tmp_path / "mr", tmp_path / "mr" / "input0"
    for directory in (input0, root / "label", tmp_path / "lm"):
        directory.mkdir(parents=True)
        (directory / "dict.txt").write_text("a 1\n")
    assert token_data_dir(str(root)) == str(input0)  # a root: its texts
    assert token_data_dir(str(input0)) == str(input0)
    assert token_data_dir(str(tmp_path / "lm")) == str(tmp_path / "lm")
    assert sentence_prediction_dir(str(input0)) == os.path.dirname(str(input0))  # input0/: its root
    assert sentence_prediction_dir(str(input0) + "/") == str(root)
    assert sentence_prediction_dir(str(root)) == str(root)
    assert sentence_prediction_dir(str(tmp_path / "lm")) == str(tmp_path / "lm")


def test_lines_longer_than_the_block_are_refused_naming_the_flag():
    cfg = dataclasses.make_dataclass("C", [])()
    cfg.tokens_per_sample, cfg.sample_break_mode = 128, "complete"
    check_block_sizes(np.array([5, 128, 64]), "valid", cfg)
    with pytest.raises(ValueError, match=r"split 'valid': 2 of 3 items are longer than --tokens-per-sample 128 "
                                         r"\(longest 197 tokens with <s>\) under --sample-break-mode complete: "
                                         r"add --shorten-method truncate"):
        check_block_sizes(np.array([129, 128, 197]), "valid", cfg)


def test_write_side_info_takes_a_numpy_type_or_a_name(tmp_path):
    rows = [np.array([1, 0, 1])]
    assert write_side_info(str(tmp_path / "a"), rows, np.uint8) == 1
    assert write_side_info(str(tmp_path / "b"), rows, "uint8") == 1
    assert (tmp_path / "a.bin").read_bytes() == (tmp_path / "b.bin").read_bytes() == bytes([1, 0, 1])
