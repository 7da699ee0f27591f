"""Every task trains under fairseq's default data-parallel backend (pytorch_ddp).

In process (quick tier): after one training step every trainable parameter has a gradient (what
torch's DistributedDataParallel needs without --find-unused-parameters). Then real runs:
two CPU worker processes started by torchrun (and by srun, simulated) form one run whose
workers average their gradients (full tier).
"""

import os
import shutil
import socket
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fairseq_helpers import (BIN, CPU_RUN, HALF_PRECISION, REPO, TINY_BART, TINY_ROBERTA, assert_half_precision_run,
                             build_in_process, check, json_logs, model_params, run)
from fairseq_maskplug.integration.launch import LaunchError, configure_launch, detect_launch
from test_finetune_e2e import write_task

_AT = CPU_RUN.index("--distributed-world-size")
SINGLE = CPU_RUN[:_AT] + CPU_RUN[_AT + 2:]  # the world size comes from the launcher


def write_labels_track(split_prefix, seed, name="importance"):
    """A 0/1 track (``importance``) for every line of a binarized split (</s>: 0)."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    from fairseq_maskplug.data import write_side_info

    rng = np.random.default_rng(seed)
    tokens = MMapIndexedDataset(str(split_prefix))  # keep it alive: .sizes is a view of its mmap
    rows = [np.append(rng.integers(0, 2, n - 1), 0).astype(np.uint8) for n in tokens.sizes]
    write_side_info(f"{split_prefix}.{name}", rows, "uint8", tokens_prefix=str(split_prefix))


@pytest.fixture(scope="module")
def data(tiny_data, tmp_path_factory):
    """Masked-LM data and a sentence_prediction task, both with an ``importance`` track."""
    root = tmp_path_factory.mktemp("ddp")
    task = write_task(tiny_data, root)
    mlm = shutil.copytree(tiny_data / "bin", root / "mlm")
    for i, split in enumerate(("train", "valid")):
        write_labels_track(mlm / split, i)
        write_labels_track(task / "input0" / split, 10 + i)
        write_labels_track(mlm / split, 20 + i, name="pmi_units")  # unit starts, for the pmi policy
    return SimpleNamespace(mlm=mlm, task=task)


JOINT = ["--task", "joint_mlm_classification", "--criterion", "joint_mlm_classification", "--num-classes", "2"]
TARTAN = ["--loss-weighting", "tartan", "--tartan-dev-fit-size", "8", "--tartan-dev-batch-size", "16"]
CASES = {
    "guided_mlm": ("mlm", ["--task", "guided_mlm", "--criterion", "masked_lm"]),
    # Self-Evolution's smoothing: a second, no-grad forward through the unwrapped model
    "guided_mlm_self_evolution_criterion": ("mlm", ["--task", "guided_mlm", "--criterion", "self_evolution"]),
    "selective_mlm": ("mlm", ["--task", "selective_mlm", "--criterion", "masked_lm"]),
    "fe_mlm": ("mlm", ["--task", "fe_mlm", "--criterion", "masked_lm", "--fe-views", "2"]),
    "joint": ("task", JOINT),
    "joint_stl": ("task", JOINT + ["--mlm-weight", "0"]),
    "joint_tartan": ("task", JOINT + TARTAN),
    "token_importance": ("input0", ["--task", "token_importance", "--criterion", "token_importance"]),
    "guided_denoising": ("mlm", ["--task", "guided_denoising", "--criterion", "cross_entropy"]),
    "guided_denoising_t5": ("mlm", ["--task", "guided_denoising", "--criterion", "cross_entropy", "--mask-policy",
                                    "span", "--target-format", "t5"]),
    "guided_mlm_pmi_words_schedule": ("mlm", ["--task", "guided_mlm", "--criterion", "masked_lm", "--mask-policy", "pmi",
                                              "--mask-unit", "word", "--mask-prob-schedule", "linear",
                                              "--mask-prob-schedule-updates", "3"]),
}


def arch(case):
    return TINY_BART if case.startswith("guided_denoising") else TINY_ROBERTA


def data_dir(data, kind):
    return data.task / "input0" if kind == "input0" else getattr(data, kind)


def build(data, case):
    kind, args = CASES[case]
    task, model, criterion, optimizer, _ = build_in_process([data_dir(data, kind), *args, "--tokens-per-sample", "32",
                                                             *arch(case), *CPU_RUN])
    dataset = task.dataset("train")
    return task, model, criterion, optimizer, dataset.collater([dataset[i] for i in range(8)])


def without_gradient(model):
    return [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]


# tasks whose data comes from their own producers train in a quick-tier test of their own file
TRAINED_ELSEWHERE = {
    "span_policy": ("test_learned_spans", "test_span_policy_resumes_exactly_and_reaches_every_parameter"),
    "meta_span_policy": ("test_meta_span_policy", "test_one_meta_step_gives_every_policy_parameter_a_gradient"),
    "tlm": ("test_tlm", "test_logs_per_source_losses_and_resumes_exactly"),
}


def marks(obj):
    marks = getattr(obj, "pytestmark", [])
    return {m.name for m in (marks if isinstance(marks, list) else [marks])}


def test_every_registered_task_trains_in_the_quick_tier():
    """A new task of the package needs a case here (or a quick-tier test named in
    TRAINED_ELSEWHERE), so that the quick tier trains every task at least once."""
    import importlib

    from fairseq.tasks import TASK_REGISTRY

    registered = {name for name, cls in TASK_REGISTRY.items() if cls.__module__.startswith("fairseq_maskplug.")}
    here = {args[args.index("--task") + 1] for _, args in CASES.values()}
    assert registered == here | set(TRAINED_ELSEWHERE)
    for task, (module_name, test_name) in TRAINED_ELSEWHERE.items():
        module = importlib.import_module(module_name)
        test = getattr(module, test_name)
        assert "full" not in marks(module) | marks(test), f"{module_name}.{test_name} is not in the quick tier"


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_step_gives_every_trainable_parameter_a_gradient(data, case):
    task, model, criterion, optimizer, sample = build(data, case)
    optimizer.zero_grad()
    task.train_step(sample, model, criterion, optimizer, update_num=0)
    assert without_gradient(model) == []


def test_a_joint_micro_batch_without_masked_tokens_still_reaches_every_parameter(data):
    task, model, criterion, optimizer, sample = build(data, "joint")
    pad = task.source_dictionary.pad()
    sample["mlm"]["src_tokens"] = sample["net_input"]["src_tokens"].clone()
    sample["mlm"]["target"] = torch.full_like(sample["mlm"]["target"], pad)
    optimizer.zero_grad()
    loss, _, log = task.train_step(sample, model, criterion, optimizer, update_num=0)
    assert log["n_masked"] == 0 and log["mlm_loss"] == 0.0
    assert without_gradient(model) == []
    embeddings = model.encoder.sentence_encoder.embed_tokens.weight  # tied with the LM head's output weight
    lm_head = [p for p in model.encoder.lm_head.parameters() if p is not embeddings]
    assert all(torch.count_nonzero(p.grad) == 0 for p in lm_head)  # a zero gradient, not a made-up one


# ---- two worker processes -------------------------------------------------------------------

def torchrun(*args, workers=2):
    return run([BIN / "torchrun", "--standalone", "--nproc-per-node", str(workers),
                BIN / "fairseq-maskplug-train", *args], timeout=600)


def train_args(data, case, save, *extra):
    kind, args = CASES[case]
    return [data_dir(data, kind), *args, "--tokens-per-sample", "32", "--save-dir", save, "--no-epoch-checkpoints",
            *arch(case), *SINGLE, "--max-update", "3", *extra]


def world_size_logged(result):
    return "'distributed_world_size': 2" in result.stdout + result.stderr


@pytest.mark.e2e
@pytest.mark.full
@pytest.mark.parametrize("case", sorted(CASES))
def test_two_torchrun_workers_train_under_the_default_backend(data, case, tmp_path):
    result = check(torchrun(*train_args(data, case, tmp_path / "ck")))
    assert world_size_logged(result)
    assert "'ddp_backend': 'pytorch_ddp'" in result.stdout + result.stderr
    steps = json_logs(result, "train_inner")
    assert [int(r["num_updates"]) for r in steps] == [1, 2, 3]
    rows_per_update = 2 * 8  # both workers' batches
    assert int(steps[0]["bsz"]) == rows_per_update
    assert all(np.isfinite(float(r["loss"])) for r in steps)


@pytest.mark.e2e
@pytest.mark.full
def test_sentence_prediction_stage_of_the_recipes_trains_on_two_workers(data, tmp_path):
    """fairseq's own fine-tuning leaves roberta's LM head unused: the recipes pass
    --find-unused-parameters, as fairseq's RoBERTa fine-tuning configs do."""
    args = [data.task, "--task", "sentence_prediction", "--criterion", "sentence_prediction", "--num-classes", "2",
            "--init-token", "0", "--separator-token", "2", *TINY_ROBERTA, *SINGLE, "--max-update", "3",
            "--save-dir", tmp_path / "ck", "--no-epoch-checkpoints"]
    failed = torchrun(*args)
    assert failed.returncode != 0 and "Expected to have finished reduction" in failed.stdout + failed.stderr
    result = check(torchrun(*args, "--find-unused-parameters"))
    assert world_size_logged(result)


@pytest.mark.e2e
@pytest.mark.full
def test_two_workers_average_their_gradients(data, tmp_path):
    """Two workers with 8 sequences each take the update of one worker with --update-freq 2
    (the same 16 sequences; dropout off), not that of one worker on 8."""
    common = ["--dropout", "0", "--attention-dropout", "0", "--max-update", "2", "--lr", "1e-2"]
    check(torchrun(*train_args(data, "guided_mlm", tmp_path / "two"), *common))
    check(run([BIN / "fairseq-maskplug-train", *train_args(data, "guided_mlm", tmp_path / "accumulated"), *common,
               "--update-freq", "2"]))
    check(run([BIN / "fairseq-maskplug-train", *train_args(data, "guided_mlm", tmp_path / "one"), *common]))
    two, accumulated, one = (model_params(tmp_path / name / "checkpoint_last.pt")
                             for name in ("two", "accumulated", "one"))
    for name in two:
        torch.testing.assert_close(two[name].float(), accumulated[name].float(), rtol=1e-4, atol=1e-5, msg=name)
    assert any(not torch.allclose(two[n].float(), one[n].float(), atol=1e-4) for n in two)


@pytest.mark.e2e
@pytest.mark.full
def test_srun_tasks_form_one_run(data, tmp_path):
    """srun's environment (simulated: two local tasks) with MASTER_ADDR/MASTER_PORT exported."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [str(a) for a in [BIN / "fairseq-maskplug-train", *train_args(data, "guided_mlm", tmp_path / "ck")]]
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, PYTHONWARNINGS="ignore", SLURM_STEP_ID="0", SLURM_NTASKS="2", SLURM_PROCID=str(rank),
                   SLURM_LOCALID=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen(args, cwd=REPO, env=env, text=True, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT))
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    assert "'distributed_world_size': 2" in outputs[0]
    assert int(json_logs(subprocess.CompletedProcess([], 0, outputs[0], ""), "train_inner")[0]["bsz"]) == 16


# ---- the launch rules, without processes ------------------------------------------------------

def dt(**kw):
    base = dict(distributed_init_method=None, distributed_world_size=1, distributed_rank=0, device_id=0,
                distributed_no_spawn=False, distributed_backend="nccl", distributed_port=-1)
    return SimpleNamespace(**{**base, **kw})


def test_torchrun_environment_forms_one_gloo_run_on_cpus_and_uses_the_local_gpu_otherwise():
    env = {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "MASTER_ADDR": "node0", "MASTER_PORT": "29500"}
    cpu = dt()
    assert configure_launch(cpu, env, cpu=True).launcher == "torchrun"
    assert (cpu.distributed_init_method, cpu.distributed_world_size, cpu.distributed_rank, cpu.device_id,
            cpu.distributed_no_spawn, cpu.distributed_backend) == ("env://", 4, 3, 0, True, "gloo")
    gpu = dt(distributed_world_size=8)
    configure_launch(gpu, env, cpu=False)
    assert (gpu.distributed_world_size, gpu.device_id, gpu.distributed_backend) == (4, 1, "nccl")


def test_launch_rules_leave_explicit_and_single_runs_alone_and_refuse_cpu_workers_without_a_launcher():
    explicit = dt(distributed_init_method="tcp://h:1", distributed_world_size=2)
    assert configure_launch(explicit, {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
                            cpu=True) is None
    assert explicit.distributed_world_size == 2
    single = dt()
    assert configure_launch(single, {"WORLD_SIZE": "1", "RANK": "0", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
                            cpu=True) is None
    assert single.distributed_init_method is None
    with pytest.raises(LaunchError, match="torchrun --standalone --nproc-per-node 2"):
        configure_launch(dt(distributed_world_size=2), {}, cpu=True)
    assert configure_launch(dt(distributed_world_size=2), {}, cpu=False) is None  # fairseq spawns per GPU


def test_srun_needs_a_rendezvous_address():
    env = {"SLURM_STEP_ID": "0", "SLURM_NTASKS": "2", "SLURM_PROCID": "1", "SLURM_LOCALID": "0"}
    with pytest.raises(LaunchError, match="export MASTER_ADDR"):
        detect_launch(env)
    launch = detect_launch({**env, "MASTER_ADDR": "n0"}, port=1234)
    assert launch == ("srun", 2, 1, 0, "tcp://n0:1234")
    assert detect_launch({"SLURM_NTASKS": "2", "SLURM_PROCID": "0"}) is None  # a batch script, not an srun step


# ---- half precision on CPU ------------------------------------------------------------------

@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_task_trains_in_half_precision_with_a_settling_loss_scale(data, case, tmp_path):
    """--memory-efficient-fp16 --cpu: the model in float16, losses scaled by fairseq's dynamic
    scaler, overflow handling live. Eight updates are taken (an update that overflows is skipped
    and does not count), every logged loss is finite and the scale ends above fairseq's minimum."""
    kind, args = CASES[case]
    assert_half_precision_run(run([BIN / "fairseq-maskplug-train", data_dir(data, kind), *args, "--tokens-per-sample",
                                   "32", "--save-dir", tmp_path / "ck", *arch(case), *CPU_RUN, "--max-update", "8",
                                   *HALF_PRECISION]), 8)


@pytest.mark.e2e
def test_bf16_trains_in_bfloat16_without_torch_xla(data, tmp_path):
    """fairseq's parser makes --bf16 imply --tpu, and its trainer then fails asking torch_xla for a device
    (``'NoneType' object has no attribute 'xla_device'``, seen on CPU; fairseq's trainer takes the same
    path on CUDA). The plugin switches that TPU mode off where torch_xla is missing: fairseq's Trainer
    then holds the model in bfloat16, and both entry points train four updates with finite losses."""
    import importlib.util

    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer
    from fairseq_maskplug.integration.compat import bf16_without_xla

    if importlib.util.find_spec("torch_xla") is not None:
        pytest.skip("torch_xla is installed: --bf16 keeps fairseq's TPU mode")
    kind, args = CASES["guided_mlm"]
    common = [data_dir(data, kind), *args, "--tokens-per-sample", "32", *TINY_ROBERTA, *CPU_RUN, "--bf16"]
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(),
                                                                     [str(a) for a in common]))
    assert cfg.common.tpu  # what fairseq's parser made of --bf16
    assert bf16_without_xla(cfg.common) and not cfg.common.tpu
    task = tasks.setup_task(cfg.task)
    trainer = Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
    assert {p.dtype for p in trainer.model.parameters()} == {torch.bfloat16}
    for entry in ("fairseq-maskplug-train", "fairseq-train"):
        plugin = ["--user-dir", REPO / "fairseq_maskplug"] if entry == "fairseq-train" else []
        result = check(run([BIN / entry, *common, *plugin, "--max-update", "4", "--no-save", "--save-dir",
                            tmp_path / entry], new_process=entry == "fairseq-train"))
        records = json_logs(result, "train_inner")
        assert [int(r["num_updates"]) for r in records] == [1, 2, 3, 4], entry
        assert all(np.isfinite(float(r["loss"])) for r in records), (entry, records)
