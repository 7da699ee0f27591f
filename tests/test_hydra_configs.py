"""The shipped ``fairseq-hydra-train`` configs (recipes/config/<task>/{tiny,base}.yaml).

Every config names only options that fairseq and this plugin define (checked against the
registered dataclasses and the model's own arguments), and one config really trains through
``fairseq-hydra-train`` with a user policy from ``common.user_dir``, whose option arrives.
"""

import argparse
import dataclasses
import importlib
import json
import shutil

import pytest
from omegaconf import OmegaConf

from fairseq_helpers import BIN, EXAMPLE_PLUGIN, REPO, check, run
from preprocess import binarize_side_info

CONFIGS = sorted((REPO / "recipes" / "config").glob("*/*.yaml"))
SECTIONS = {"common": "CommonConfig", "checkpoint": "CheckpointConfig", "dataset": "DatasetConfig",
            "optimization": "OptimizationConfig", "distributed_training": "DistributedTrainingConfig"}


def field_names(dc) -> set:
    return {f.name for f in dataclasses.fields(dc)}


def model_options(arch: str) -> set:
    from fairseq.models import ARCH_MODEL_REGISTRY
    parser = argparse.ArgumentParser()
    ARCH_MODEL_REGISTRY[arch].add_args(parser)
    return {a.dest for a in parser._actions}


def test_every_task_has_a_tiny_and_a_base_config():
    tasks = {path.parent.name for path in CONFIGS}
    assert len(tasks) >= 7
    for task in tasks:
        assert {p.stem for p in CONFIGS if p.parent.name == task} == {"tiny", "base"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_config_names_only_known_options(path):
    import fairseq_maskplug.plugin  # noqa: F401  (registers the tasks, criteria, architectures)
    from fairseq.criterions import CRITERION_DATACLASS_REGISTRY, CRITERION_REGISTRY
    from fairseq.optim import OPTIMIZER_DATACLASS_REGISTRY
    from fairseq.optim.lr_scheduler import LR_SCHEDULER_DATACLASS_REGISTRY
    from fairseq.tasks import TASK_DATACLASS_REGISTRY
    configs = importlib.import_module("fairseq.dataclass.configs")

    cfg = OmegaConf.to_container(OmegaConf.load(path))
    assert path.read_text().startswith("# @package _group_")
    assert cfg["task"]["_name"] == path.parent.name
    assert set(cfg["task"]) - {"_name"} <= field_names(TASK_DATACLASS_REGISTRY[path.parent.name])
    criterion = cfg["criterion"] if isinstance(cfg["criterion"], dict) else {"_name": cfg["criterion"]}
    assert criterion["_name"] in CRITERION_REGISTRY
    if len(criterion) > 1:
        assert set(criterion) - {"_name"} <= field_names(CRITERION_DATACLASS_REGISTRY[criterion["_name"]])
    assert set(cfg["optimizer"]) - {"_name"} <= field_names(OPTIMIZER_DATACLASS_REGISTRY[cfg["optimizer"]["_name"]])
    assert set(cfg["lr_scheduler"]) - {"_name"} <= field_names(
        LR_SCHEDULER_DATACLASS_REGISTRY[cfg["lr_scheduler"]["_name"]])
    for section, dc in SECTIONS.items():
        assert set(cfg.get(section, {})) <= field_names(getattr(configs, dc)), section
    assert set(cfg["model"]) - {"_name"} <= model_options(cfg["model"]["_name"])
    assert [k for k, v in cfg["task"].items() if v == "???"] in (["data"], ["data", "tlm_external_data"])


def hydra_logs(result, tag: str):
    """The JSON records fairseq logged under hydra's ``[tag][INFO] - `` prefix."""
    marker = f"[{tag}][INFO] - "
    return [json.loads(line.split(marker, 1)[1]) for line in (result.stdout + result.stderr).splitlines()
            if marker in line]


@pytest.fixture(scope="module")
def marked_data(tiny_data, tmp_path_factory):
    """The tiny corpus with one side-information track, 'marks' (1 on w0..w3): there is no 'flags' track."""
    data = tmp_path_factory.mktemp("hydra") / "bin"
    shutil.copytree(tiny_data / "bin", data)
    marked = ("w0", "w1", "w2", "w3")
    for split in ("train", "valid"):
        values = data.parent / f"{split}.marks"
        with open(tiny_data / f"{split}.txt") as src, open(values, "w") as dst:
            for line in src:
                dst.write(" ".join("1" if w in marked else "0" for w in line.split()) + "\n")
        assert binarize_side_info.main(["--tokens", str(tiny_data / f"{split}.txt"), "--values", str(values),
                                        "--destdir", str(data), "--split", split, "--name", "marks",
                                        "--dtype", "uint8"]) == 0
    words = open(tiny_data / "train.txt").read().split()
    return data, sum(w in marked for w in words) / len(words)


@pytest.mark.e2e
def test_hydra_config_trains_with_a_user_policy_and_its_options(marked_data, tmp_path):
    data, marked_share = marked_data
    result = check(run([
        BIN / "fairseq-hydra-train", "--config-dir", REPO / "recipes" / "config" / "guided_mlm", "--config-name", "tiny",
        f"common.user_dir={EXAMPLE_PLUGIN}", f"task.data={data}", "task.mask_policy=flagged",
        "+task.flagged_track=marks", "task.tokens_per_sample=32", "model.max_positions=64",
        "model.encoder_layers=2", "model.encoder_embed_dim=32", "model.encoder_ffn_embed_dim=64",
        "model.encoder_attention_heads=2", "dataset.batch_size=8", "optimization.max_epoch=1",
        "common.cpu=true", "common.log_interval=1", "distributed_training.distributed_world_size=1",
        "lr_scheduler.warmup_updates=1", f"checkpoint.save_dir={tmp_path / 'ck'}", f"hydra.run.dir={tmp_path / 'hydra'}",
        "dataset.num_workers=0"]))
    (epoch,) = hydra_logs(result, "train")
    # the policy read track 'marks' (the option arrived): every marked token of the epoch is masked once
    assert float(epoch["train_mask_rate"]) == pytest.approx(marked_share, abs=1e-4)
    assert (tmp_path / "ck" / "checkpoint_last.pt").exists()
    assert not (REPO / "outputs").exists()


@pytest.mark.e2e
@pytest.mark.parametrize("case", ["missing", "relative"])
def test_hydra_refuses_a_missing_or_relative_task_data_in_one_line(marked_data, tmp_path, case):
    """hydra runs the job in its output directory: a relative task.data meant another directory there
    (fairseq itself failed with a traceback on it), and a missing one was an omegaconf traceback."""
    data = marked_data[0]
    given = [] if case == "missing" else [f"task.data={data.name}"]
    result = run([BIN / "fairseq-hydra-train", "--config-dir", REPO / "recipes" / "config" / "guided_mlm",
                  "--config-name", "tiny", f"common.user_dir={REPO / 'fairseq_maskplug'}", *given, "common.cpu=true",
                  f"checkpoint.save_dir={tmp_path / 'ck'}", f"hydra.run.dir={tmp_path / 'hydra'}"], cwd=data.parent)
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert "Traceback" not in result.stderr and len(errors) == 1, result.stderr[-3000:]
    expected = ("--data is required" if case == "missing" else
                f"task.data={data.name} is relative, and fairseq-hydra-train runs the job in {tmp_path / 'hydra'}: "
                f"give task.data={data}, or add hydra.job.chdir=False")
    assert errors[0] == f"fairseq-hydra-train: error: {expected}" or (
        case == "missing" and errors[0].startswith(f"fairseq-hydra-train: error: {expected}")), errors[0]
    assert not list(tmp_path.glob("ck/*.pt"))  # fairseq makes the directory before the task: nothing in it
