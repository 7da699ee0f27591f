"""META-TARTAN loss weighting (--loss-weighting tartan): the weights, cosines, dev head and
gradients in process on a real fairseq task and model, then real fairseq-train runs."""

import math
import socket
import subprocess

import numpy as np
import pytest
import torch

from fairseq_helpers import (BIN, CPU_RUN, REPO, TINY_ROBERTA, assert_same_params, build_in_process, check,
                             json_logs, model_params, run)
from fairseq_maskplug.weighting import meta_tartan
from fairseq_maskplug.weighting.meta_tartan import MetaTartanWeights, cosine
from test_finetune_e2e import write_task

TARTAN = ["--loss-weighting", "tartan", "--tartan-dev-fit-size", "8", "--tartan-dev-batch-size", "16"]


# ---- the weights and the cosine ----------------------------------------------------------

def test_weights_start_equal_and_step_by_meta_lr_times_cosine():
    w = MetaTartanWeights(("cls", "mlm"))
    assert w.weights() == {"cls": 0.5, "mlm": 0.5}
    w.step([0.4, -0.2], meta_lr=0.5)
    assert w.logits.tolist() == [0.2, -0.1]
    w.step([None, 1.0], meta_lr=0.5)  # an unknown cosine leaves its logit alone
    assert w.logits.tolist() == pytest.approx([0.2, 0.4])
    e = [math.exp(0.2), math.exp(0.4)]
    assert w.weights()["mlm"] == pytest.approx(e[1] / sum(e), abs=1e-15)


def test_weights_survive_half_precision_and_checkpoints_without_them():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    model.meta_tartan = MetaTartanWeights(("cls", "mlm"))
    model.meta_tartan.step([0.123456789, 0.0], meta_lr=1.0)
    model.half()
    assert model[0].weight.dtype == torch.float16
    assert model.meta_tartan.logits.dtype == torch.float64
    assert model.meta_tartan.logits[0].item() == 0.123456789
    state = model.state_dict()
    fresh = torch.nn.Sequential(torch.nn.Linear(2, 2)).half()
    fresh.meta_tartan = MetaTartanWeights(("cls", "mlm"))
    fresh.load_state_dict(state, strict=True)
    assert fresh.meta_tartan.logits[0].item() == 0.123456789
    del state["meta_tartan.logits"]  # e.g. the vanilla model of --finetune-from-model
    other = torch.nn.Sequential(torch.nn.Linear(2, 2)).half()
    other.meta_tartan = MetaTartanWeights(("cls", "mlm"))
    other.load_state_dict(state, strict=True)
    assert other.meta_tartan.logits.tolist() == [0.0, 0.0]


def test_cosine_over_lists_of_tensors():
    a = [torch.tensor([1.0, 0.0]), torch.tensor([2.0]), None]
    b = [torch.tensor([1.0, 1.0]), None, torch.tensor([3.0])]
    # dot = 1 (pairs with None add nothing); |a|^2 = 5, |b|^2 = 2 + 9 = 11
    assert cosine(a, b) == pytest.approx(1 / math.sqrt(5 * 11), abs=1e-15)
    assert cosine(a, a) == pytest.approx(1.0, abs=1e-15)
    assert cosine(a, [-t if t is not None else None for t in a]) == pytest.approx(-1.0, abs=1e-15)
    assert cosine(a, [torch.zeros(2), None, None]) is None  # zero gradient: no direction
    assert cosine(a, [torch.tensor([float("inf"), 0.0]), None, None]) is None  # fp16 overflow
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    split = lambda v: [torch.tensor(v[:20]), torch.tensor(v[20:])]  # noqa: E731
    assert cosine(split(x), split(y)) == pytest.approx(x @ y / np.linalg.norm(x) / np.linalg.norm(y), abs=1e-12)


def test_fresh_head_is_seeded_and_leaves_the_global_random_state_alone():
    template = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    before = torch.random.get_rng_state()
    a, b, c = (meta_tartan.fresh_head(template, s) for s in (7, 7, 8))
    assert torch.equal(torch.random.get_rng_state(), before)
    assert torch.equal(a[0].weight, b[0].weight) and not torch.equal(a[0].weight, c[0].weight)
    assert not torch.equal(a[0].weight, template[0].weight)


# ---- on a real fairseq task and model, in process ----------------------------------------

@pytest.fixture(scope="module")
def task_dir(tiny_data, tmp_path_factory):
    return write_task(tiny_data, tmp_path_factory.mktemp("tartan"))


def build(task_dir, *extra):
    """task, model, criterion, optimizer and config as fairseq-train builds them (dropout off)."""
    return build_in_process([
        task_dir, "--task", "joint_mlm_classification", "--criterion", "joint_mlm_classification",
        "--num-classes", "2", "--tokens-per-sample", "32", "--dropout", "0", "--attention-dropout", "0",
        "--pooler-dropout", "0", *TINY_ROBERTA, *CPU_RUN, *TARTAN, *extra])


def first_batch(task, n=8):
    dataset = task.dataset("train")
    return dataset.collater([dataset[i] for i in range(n)])


def test_train_step_gradient_is_the_weighted_objectives_and_cosines_match(task_dir):
    task, model, criterion, optimizer, _ = build(task_dir)
    model.meta_tartan.logits.copy_(torch.tensor([0.3, -0.2], dtype=torch.float64))
    sample = first_batch(task)
    optimizer.zero_grad()
    task.train_step(sample, model, criterion, optimizer, update_num=3)
    stepped = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    (cos_cls, cos_mlm), = task.tartan.cosines

    # reference: the weighted objective differentiated as one loss
    w = torch.softmax(torch.tensor([0.3, -0.2], dtype=torch.float64), 0).tolist()
    optimizer.zero_grad()
    losses, _ = criterion.objective_losses(model, sample)
    (w[0] * losses["cls"] + w[1] * losses["mlm"]).backward()
    assert stepped.keys() == {n for n, p in model.named_parameters() if p.grad is not None}
    for name, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(stepped[name], p.grad, rtol=1e-5, atol=1e-7, msg=name)

    # the cosines: each objective's encoder gradient against the dev gradient, recomputed
    # here with loss.backward() on the dev head fitted from the same seed and batches
    body = list(model.encoder.sentence_encoder.parameters())
    grads = {}
    for k in ("cls", "mlm"):
        optimizer.zero_grad()
        losses, _ = criterion.objective_losses(model, sample)
        losses[k].backward()
        grads[k] = [p.grad.clone() if p.grad is not None else None for p in body]
    head_seed, draw_seed = task.tartan.seeds(3, 0)
    fit, probe = task._dev_batches(draw_seed, torch.device("cpu"))
    head = meta_tartan.fresh_head(model.classification_heads["sentence_classification_head"], head_seed)
    with torch.no_grad():
        fit_features = model(fit["net_input"]["src_tokens"], features_only=True)[0][:, :1, :]
    fit_losses = meta_tartan.fit_dev_head(head, fit_features, fit["target"], steps=10, lr=1e-3, weight_decay=0.1)
    assert fit_losses[-1] < fit_losses[0]  # the dev head learns the dev sample
    optimizer.zero_grad()
    features = model(probe["net_input"]["src_tokens"], features_only=True)[0][:, :1, :]
    torch.nn.functional.cross_entropy(head(features), probe["target"]).backward()
    g_dev = [p.grad.clone() if p.grad is not None else None for p in body]
    assert cos_cls == pytest.approx(cosine(g_dev, grads["cls"]), abs=1e-6)
    assert cos_mlm == pytest.approx(cosine(g_dev, grads["mlm"]), abs=1e-6)
    assert -1 <= cos_cls <= 1 and -1 <= cos_mlm <= 1


def test_half_precision_step_scales_like_fairseq_and_keeps_float64_weights(task_dir):
    """--memory-efficient-fp16 (runs on CPU): gradients arrive multiplied by the loss scale,
    as fairseq's own backward leaves them, and equal the weighted objective's."""
    from fairseq.optim.fp16_optimizer import MemoryEfficientFP16Optimizer

    task, model, criterion, _, cfg = build(task_dir, "--memory-efficient-fp16")
    model.half()
    assert model.meta_tartan.logits.dtype == torch.float64
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = MemoryEfficientFP16Optimizer.build_optimizer(cfg, params)
    scale = meta_tartan.loss_scale(optimizer)
    assert scale == optimizer.scaler.loss_scale > 1
    sample = first_batch(task)
    optimizer.zero_grad()
    task.train_step(sample, model, criterion, optimizer, update_num=0)
    stepped = [p.grad.float() / scale for p in params]
    assert all(g.dtype == torch.float32 for g in stepped) and all(p.grad.dtype == torch.float16 for p in params)
    w = model.meta_tartan.weights()
    for p in params:
        p.grad = None
    losses, _ = criterion.objective_losses(model, sample)
    ((w["cls"] * losses["cls"] + w["mlm"] * losses["mlm"]) * scale).backward()
    for got, p in zip(stepped, params):
        torch.testing.assert_close(got, p.grad.float() / scale, rtol=2e-2, atol=1e-4)


def test_update_moves_logits_by_meta_lr_times_the_mean_cosine_over_micro_batches(task_dir):
    task, model, criterion, optimizer, _ = build(task_dir, "--tartan-meta-lr", "0.3")
    optimizer.zero_grad()
    for sample in (first_batch(task), first_batch(task, 6)):  # two micro-batches of one update
        task.train_step(sample, model, criterion, optimizer, update_num=0)
    cosines = np.array(task.tartan.cosines, dtype=float)
    assert cosines.shape == (2, 2) and not np.isnan(cosines).any()
    task.optimizer_step(optimizer, model, update_num=0)
    assert model.meta_tartan.logits.tolist() == pytest.approx(list(0.3 * cosines.mean(axis=0)), abs=1e-15)
    assert task.tartan.cosines == []
    # a new update attempt (fairseq clears the gradients first) starts a new mean
    optimizer.zero_grad()
    task.tartan.cosines = [[0.9, 0.9]]  # left over from an update skipped for fp16 overflow
    task.train_step(first_batch(task), model, criterion, optimizer, update_num=1)
    assert len(task.tartan.cosines) == 1 and task.tartan.cosines[0] != [0.9, 0.9]


def test_dev_draws_depend_on_update_and_micro_batch_only(task_dir):
    task = build(task_dir)[0]
    draws = lambda update, micro_batch: task._dev_batches(task.tartan.seeds(update, micro_batch)[1],  # noqa: E731
                                                           torch.device("cpu"))
    fit, probe = draws(5, 0)
    again = draws(5, 0)
    assert torch.equal(fit["id"], again[0]["id"]) and torch.equal(probe["id"], again[1]["id"])
    assert not set(fit["id"].tolist()) & set(probe["id"].tolist())  # disjoint samples
    assert (len(fit["id"]), len(probe["id"])) == (8, 16)
    assert not torch.equal(fit["id"], draws(6, 0)[0]["id"])
    assert not torch.equal(fit["id"], draws(5, 1)[0]["id"])


# ---- real fairseq-train ------------------------------------------------------------------

def tartan_train(task_dir, save, *extra):
    return run([BIN / "fairseq-maskplug-train", task_dir, "--task", "joint_mlm_classification",
                "--criterion", "joint_mlm_classification", "--num-classes", "2", "--tokens-per-sample", "32",
                "--save-dir", save, "--no-epoch-checkpoints", *TINY_ROBERTA, *CPU_RUN, *TARTAN, *extra])


@pytest.mark.e2e
def test_tartan_training_follows_the_logged_cosines_and_resumes_exactly(task_dir, tmp_path):
    common = ["--tartan-meta-lr", "0.5", "--update-freq", "2", "--seed", "3", "--max-epoch", "10"]
    whole = check(tartan_train(task_dir, tmp_path / "whole", *common, "--max-update", "30"))
    steps = json_logs(whole, "train_inner")
    assert [int(r["num_updates"]) for r in steps] == list(range(1, 31))
    # w_mlm logged at update t is the weight in force during t; logit(w_mlm) moves by
    # meta_lr * (cos_mlm - cos_cls) of update t (values rounded to 4 decimals in the log)
    logit = lambda w: math.log(w / (1 - w))  # noqa: E731
    assert float(steps[0]["w_mlm"]) == 0.5
    for before, after in zip(steps, steps[1:]):
        moved = 0.5 * (float(before["cos_mlm"]) - float(before["cos_cls"]))
        assert logit(float(after["w_mlm"])) == pytest.approx(logit(float(before["w_mlm"])) + moved, abs=1e-3)
    assert len({r["w_mlm"] for r in steps}) > 10  # the weights do move
    logits = model_params(tmp_path / "whole" / "checkpoint_last.pt")["meta_tartan.logits"]
    final = torch.softmax(logits, 0)[1].item()
    last = steps[-1]
    expected = 1 / (1 + math.exp(-(logit(float(last["w_mlm"]))
                                   + 0.5 * (float(last["cos_mlm"]) - float(last["cos_cls"])))))
    assert final == pytest.approx(expected, abs=1e-3)

    # each logit is eta times the sum of its objective's logged mean cosines
    logits_from_log = [0.5 * sum(float(r[f"cos_{k}"]) for r in steps) for k in ("cls", "mlm")]
    assert logits.tolist() == pytest.approx(logits_from_log, abs=30 * 0.5 * 5e-5)

    check(tartan_train(task_dir, tmp_path / "parts", *common, "--max-update", "13"))
    check(tartan_train(task_dir, tmp_path / "parts", *common, "--max-update", "30"))
    assert_same_params(tmp_path / "whole" / "checkpoint_last.pt", tmp_path / "parts" / "checkpoint_last.pt")


@pytest.mark.e2e
def test_tartan_training_follows_the_mask_rate_schedule(task_dir, tmp_path):
    """The META-TARTAN step thins its batches to the scheduled rate as every train step does (it once trained
    at the highest rate while validation was thinned to the end rate)."""
    from fairseq_maskplug.masking.rate_schedule import scheduled_rate

    schedule = ["--mask-policy", "random", "--mask-prob-schedule", "linear", "--mask-prob-schedule-start", "0.5",
                "--mask-prob-schedule-end", "0.1", "--mask-prob-schedule-updates", "6"]
    result = check(tartan_train(task_dir, tmp_path / "ck", *schedule, "--seed", "2", "--max-epoch", "100",
                                "--max-update", "10", "--batch-size", "16"))
    steps = json_logs(result, "train_inner")
    assert [float(r["mask_prob_scheduled"]) for r in steps] == [
        round(scheduled_rate(u, "linear", 0.5, 0.1, 6), 4) for u in range(10)]
    early = np.mean([float(r["mask_rate"]) for r in steps[:2]])
    late = np.mean([float(r["mask_rate"]) for r in steps[-4:]])
    assert early > 0.4 and late < 0.16, (early, late)


@pytest.mark.e2e
@pytest.mark.full
def test_two_workers_update_the_weights_with_the_cosines_averaged_over_both(task_dir, tmp_path):
    """Two CPU processes (gloo, legacy_ddp): each worker's cosines differ, the weight update
    uses their mean, so every logit is eta x the sum of the logged (all-worker) mean cosines."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    at = CPU_RUN.index("--distributed-world-size")
    cpu_run = CPU_RUN[:at] + CPU_RUN[at + 2:]
    common = [BIN / "fairseq-train", task_dir, "--user-dir", REPO / "fairseq_maskplug", "--task",
              "joint_mlm_classification", "--criterion", "joint_mlm_classification", "--num-classes", "2",
              "--tokens-per-sample", "32", "--save-dir", tmp_path / "ck", "--no-epoch-checkpoints", *TINY_ROBERTA,
              *cpu_run, *TARTAN, "--tartan-meta-lr", "0.5", "--max-update", "12", "--distributed-world-size", "2",
              "--distributed-init-method", f"tcp://localhost:{port}", "--distributed-no-spawn",
              "--distributed-backend", "gloo", "--ddp-backend", "legacy_ddp", "--device-id", "0"]
    workers = [subprocess.Popen([str(a) for a in common + ["--distributed-rank", str(r)]], cwd=REPO, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in (0, 1)]
    outputs = [w.communicate(timeout=300)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    result = subprocess.CompletedProcess([], 0, outputs[0], "")
    steps = json_logs(result, "train_inner")
    assert len(steps) == 12 and int(steps[0]["bsz"]) == 16  # 8 sentences on each of 2 workers
    logits = model_params(tmp_path / "ck" / "checkpoint_last.pt")["meta_tartan.logits"]
    expected = [0.5 * sum(float(r[f"cos_{k}"]) for r in steps) for k in ("cls", "mlm")]
    assert logits.tolist() == pytest.approx(expected, abs=12 * 0.5 * 5e-5)


@pytest.mark.e2e
def test_tartan_finetunes_a_vanilla_checkpoint_and_the_result_evaluates(tiny_data, task_dir, tmp_path):
    check(run([BIN / "fairseq-maskplug-train", tiny_data / "bin", "--task", "guided_mlm", "--criterion",
               "masked_lm", "--tokens-per-sample", "32", "--save-dir", tmp_path / "vanilla",
               *TINY_ROBERTA, *CPU_RUN, "--max-epoch", "1"]))
    vanilla = tmp_path / "vanilla" / "checkpoint_last.pt"
    assert "meta_tartan.logits" not in model_params(vanilla)
    result = check(tartan_train(task_dir, tmp_path / "ft", "--tokens-per-sample", "64", "--max-epoch", "1",
                                "--finetune-from-model", vanilla))
    assert "loading pretrained model from" in (result.stdout + result.stderr).lower()
    assert float(json_logs(result, "train_inner")[0]["w_mlm"]) == 0.5  # starts from equal weights
    scored = check(run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate", "--checkpoint",
                        tmp_path / "ft" / "checkpoint_last.pt", "--data", task_dir, "--split", "valid"]))
    assert '"n": 40' in scored.stdout


@pytest.mark.e2e
def test_dev_subset_smaller_than_the_draws_and_a_fixed_mlm_weight_are_rejected(task_dir, tmp_path):
    result = tartan_train(task_dir, tmp_path / "x", "--tartan-dev-batch-size", "40", "--max-epoch", "1")
    assert result.returncode != 0
    assert "--tartan-dev-subset valid has 40 items, fewer than" in result.stderr
    result = tartan_train(task_dir, tmp_path / "y", "--mlm-weight", "0.5", "--max-epoch", "1")
    assert result.returncode != 0 and "--mlm-weight applies to --loss-weighting fixed" in result.stderr
