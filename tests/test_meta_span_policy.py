"""The meta-learned span policy: the one-step lookahead meta-gradient (exact and DARTS'
finite difference) against finite differences, and --task meta_span_policy in real
fairseq-train (a tiny BART as the seq2seq model): logs, determinism, resume, two workers (full tier)."""

import numpy as np
import pytest
import torch

from fairseq_helpers import (BIN, CPU_RUN, HALF_PRECISION, TINY_ROBERTA, assert_half_precision_run, assert_same_params,
                             binarize_with_reordered_dictionary, build_in_process, check, json_logs, preprocess, run,
                             train_bart, write_corpus)
from fairseq_maskplug.evaluation.probe import word_cloze
from fairseq_maskplug.criterions.lookahead import lookahead

# ---- the meta-gradient of a tiny model, in float64 ------------------------------------------------

STEP = 0.5  # alpha, large enough that the virtual step matters


def tiny_problem(seed):
    """A two-layer tanh network θ; 6 regression examples (the masked examples) and a task
    batch; the policy φ is a logit per example, w = softmax(φ)."""
    g = torch.Generator().manual_seed(seed)
    theta = {"w1": torch.randn(4, 3, generator=g, dtype=torch.float64) * 0.7,
             "b1": torch.randn(4, generator=g, dtype=torch.float64) * 0.1,
             "w2": torch.randn(1, 4, generator=g, dtype=torch.float64) * 0.7}
    x, y = torch.randn(6, 3, generator=g, dtype=torch.float64), torch.randn(6, generator=g, dtype=torch.float64)
    xt, yt = torch.randn(5, 3, generator=g, dtype=torch.float64), torch.randn(5, generator=g, dtype=torch.float64)

    def predict(p, inputs):
        return (torch.tanh(inputs @ p["w1"].T + p["b1"]) @ p["w2"].T).squeeze(-1)

    example_losses = lambda p: (predict(p, x) - y) ** 2  # noqa: E731
    task_loss = lambda p: ((predict(p, xt) - yt) ** 2).mean()  # noqa: E731
    phi = torch.randn(6, generator=g, dtype=torch.float64)
    return theta, example_losses, task_loss, phi


def meta_gradient(problem, phi, mode, epsilon=0.01):
    theta, example_losses, task_loss, _ = problem
    phi = phi.clone().requires_grad_(True)
    result = lookahead(theta, torch.softmax(phi, 0), example_losses, task_loss, STEP, mode, epsilon)
    result.loss.backward()
    return phi.grad, float(result.loss.detach())


def outer(problem, phi):
    """L_task(θ'(φ)) computed directly: one SGD step on Σ w_n L_n, then the task loss."""
    theta, example_losses, task_loss, _ = problem
    t = {k: v.clone().requires_grad_(True) for k, v in theta.items()}
    inner = (torch.softmax(phi, 0) * example_losses(t)).sum()
    grads = torch.autograd.grad(inner, list(t.values()))
    return float(task_loss({k: v - STEP * g for (k, v), g in zip(t.items(), grads)}).detach())


def central_difference(f, h):
    return (f(h) - f(-h)) / (2 * h)


@pytest.mark.parametrize("seed", range(5))
def test_exact_meta_gradient_equals_a_finite_difference_of_the_lookahead_loss(seed):
    problem = tiny_problem(seed)
    phi = problem[3]
    grad, value = meta_gradient(problem, phi, "exact")
    assert value == pytest.approx(outer(problem, phi), rel=1e-12)
    u = torch.randn(6, generator=torch.Generator().manual_seed(100 + seed), dtype=torch.float64)
    along = lambda h: outer(problem, phi + h * u)  # noqa: E731
    h = 1e-4
    estimate, coarse = central_difference(along, h), central_difference(along, 2 * h)
    # central differences err by ~h²·f'''/6: the h and 2h estimates differ by ~3 times that
    # (Richardson), plus rounding ~ machine epsilon · |f| / h
    tolerance = abs(coarse - estimate) + 16 * np.finfo(float).eps * abs(value) / h
    assert abs(float(grad @ u) - estimate) <= tolerance + 1e-15, (float(grad @ u), estimate, tolerance)
    assert abs(float(grad @ u)) > 100 * tolerance  # a gradient that is not zero


@pytest.mark.parametrize("seed", range(5))
def test_darts_finite_difference_equals_its_formula_and_approaches_the_exact_gradient(seed):
    problem = tiny_problem(seed)
    theta, example_losses, task_loss, phi = problem
    exact, _ = meta_gradient(problem, phi, "exact")
    approx, value = meta_gradient(problem, phi, "finite_difference", epsilon=1e-3)
    # the formula, by hand: v = ∇θ' L_task(θ'), θ± = θ ± ε v, ∇φ = −α Σ_n ∇φ w_n (L_n(θ+) − L_n(θ−)) / 2ε
    t = {k: x.clone().requires_grad_(True) for k, x in theta.items()}
    w = torch.softmax(phi, 0)
    grads = torch.autograd.grad((w * example_losses(t)).sum(), list(t.values()))
    updated = {k: (x - STEP * g).detach().requires_grad_(True) for (k, x), g in zip(theta.items(), grads)}
    v = torch.autograd.grad(task_loss(updated), list(updated.values()))
    eps = 1e-3 / float(torch.sqrt(sum((g ** 2).sum() for g in v)))
    with torch.no_grad():
        diff = (example_losses({k: x + eps * g for (k, x), g in zip(theta.items(), v)})
                - example_losses({k: x - eps * g for (k, x), g in zip(theta.items(), v)})) / (2 * eps)
    jacobian = torch.diag(w) - torch.outer(w, w)  # d softmax / d phi
    torch.testing.assert_close(approx, -STEP * jacobian @ diff, rtol=1e-10, atol=1e-14)
    # DARTS errs by O(ε²): the ε and 2ε estimates differ by ~3 times the error (Richardson)
    coarse, _ = meta_gradient(problem, phi, "finite_difference", epsilon=2e-3)
    error_bound = (coarse - approx).abs().max() + 1e-9 * exact.abs().max()
    assert (approx - exact).abs().max() <= error_bound, ((approx - exact).abs().max(), error_bound)
    assert value == pytest.approx(outer(problem, phi), rel=1e-12)


def test_lookahead_validates_its_inputs():
    theta, example_losses, task_loss, phi = tiny_problem(0)
    with pytest.raises(ValueError, match="mode"):
        lookahead(theta, torch.softmax(phi, 0), example_losses, task_loss, STEP, "first_order")
    with pytest.raises(ValueError, match="step size"):
        lookahead(theta, torch.softmax(phi, 0), example_losses, task_loss, 0.0)
    with pytest.raises(ValueError, match="example losses"):
        lookahead(theta, torch.softmax(phi[:3], 0), example_losses, task_loss, STEP)


# ---- --task meta_span_policy in fairseq-train -----------------------------------------------------

@pytest.fixture(scope="module")
def meta_data(tmp_path_factory):
    """A corpus, a tiny BART trained on it (guided_denoising), and a cloze task q -> a on its
    dictionary plus <mask>."""
    root = tmp_path_factory.mktemp("meta")
    write_corpus(root / "train.txt", 120, 0)
    write_corpus(root / "valid.txt", 20, 1)
    corpus = preprocess(root / "corpus", root / "train.txt", root / "valid.txt")
    check(train_bart(corpus, root / "bart", "--max-update", "3", "--no-epoch-checkpoints"))
    (root / "dict.probe.txt").write_text((corpus / "dict.txt").read_text() + "<mask> 0\n")
    rng = np.random.default_rng(2)
    for split, source in (("train", "train.txt"), ("valid", "valid.txt")):
        questions, answers = word_cloze((root / source).read_text().splitlines(), rng)
        (root / f"cloze.{split}.q").write_text("\n".join(questions) + "\n")
        (root / f"cloze.{split}.a").write_text("\n".join(answers) + "\n")
    check(run([BIN / "fairseq-preprocess", "--source-lang", "q", "--target-lang", "a", "--trainpref",
               root / "cloze.train", "--validpref", root / "cloze.valid", "--srcdict", root / "dict.probe.txt",
               "--tgtdict", root / "dict.probe.txt", "--destdir", root / "cloze", "--workers", "1"]))
    return root


def meta_args(root, save, *extra):
    return [root / "corpus", "--task", "meta_span_policy", "--downstream-data", root / "cloze",
            "--seq2seq-checkpoint", root / "bart" / "checkpoint_last.pt", "--tokens-per-sample", "32",
            "--meta-candidates", "4", "--meta-downstream-batch", "8", "--save-dir", save, "--no-epoch-checkpoints",
            *TINY_ROBERTA, *CPU_RUN, *extra]


def meta_train(root, save, *extra):
    return run([BIN / "fairseq-maskplug-train", *meta_args(root, save, *extra)])


@pytest.mark.e2e
def test_meta_policy_trains_logs_its_lookahead_and_resumes_exactly(meta_data, tmp_path):
    full = check(meta_train(meta_data, tmp_path / "full", "--max-update", "4", "--save-interval-updates", "2"))
    steps = json_logs(full, "train_inner")
    assert [int(r["num_updates"]) for r in steps] == [1, 2, 3, 4]
    for r in steps:
        after, before = float(r["loss"]), float(r["task_before"])
        assert np.isfinite(after) and np.isfinite(before)
        assert float(r["gain"]) == pytest.approx(before - after, abs=2e-3)  # logged rounded
        assert 0 < float(r["entropy"]) <= 2.0  # 4 candidates: at most 2 bits
    assert "valid_gain" in json_logs(full, "valid")[-1]
    again = check(meta_train(meta_data, tmp_path / "again", "--max-update", "4"))
    assert [r["loss"] for r in json_logs(again, "train_inner")] == [r["loss"] for r in steps]  # deterministic
    # stop at 2, resume to 4: the same parameters as the uninterrupted run
    check(meta_train(meta_data, tmp_path / "resumed", "--max-update", "2"))
    resumed = check(meta_train(meta_data, tmp_path / "resumed", "--max-update", "4"))
    assert [int(r["num_updates"]) for r in json_logs(resumed, "train_inner")] == [3, 4]
    assert_same_params(tmp_path / "full" / "checkpoint_last.pt", tmp_path / "resumed" / "checkpoint_last.pt")
    # the policy it trained is a span policy: score_spans reads it
    scored = check(run([BIN / "fairseq-maskplug-score-spans", "--checkpoint", tmp_path / "full" / "checkpoint_last.pt",
                        "--data", meta_data / "corpus", "--splits", "valid"]))
    assert "scored 20 lines" in scored.stdout


@pytest.mark.e2e
def test_meta_policy_finite_difference_mode_trains(meta_data, tmp_path):
    result = check(meta_train(meta_data, tmp_path / "fd", "--max-update", "2", "--meta-gradient", "finite_difference"))
    assert all(np.isfinite(float(r["loss"])) for r in json_logs(result, "train_inner"))


@pytest.mark.e2e
def test_meta_policy_refuses_a_downstream_task_on_another_dictionary(meta_data, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    for f in (meta_data / "cloze").iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    (other / "dict.q.txt").write_text((meta_data / "corpus" / "dict.txt").read_text())  # no <mask>
    result = meta_train(meta_data, tmp_path / "ck", "--max-update", "1", "--downstream-data", other)
    assert result.returncode != 0 and "is not the corpus dictionary plus <mask>" in result.stderr


@pytest.mark.e2e
def test_meta_policy_refuses_a_seq2seq_model_of_a_reordered_dictionary_before_training(meta_data, tmp_path):
    """Same size, two symbols swapped: every shape fits, every token id means another word."""
    binarize_with_reordered_dictionary(meta_data / "corpus" / "dict.txt", meta_data / "train.txt",
                                       tmp_path / "reordered")
    check(train_bart(tmp_path / "reordered", tmp_path / "bart", "--max-update", "1", "--no-epoch-checkpoints",
                     "--disable-validation"))
    result = meta_train(meta_data, tmp_path / "ck", "--max-update", "1", "--seq2seq-checkpoint",
                        tmp_path / "bart" / "checkpoint_last.pt")
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"--seq2seq-checkpoint: {meta_data / 'corpus' / 'dict.txt'} is not the dictionary" in result.stderr
    assert "train_inner" not in result.stdout and not (tmp_path / "ck" / "checkpoint_last.pt").exists()


@pytest.mark.e2e
def test_one_meta_step_gives_every_policy_parameter_a_gradient(meta_data, tmp_path):
    from test_data_parallel import without_gradient

    task, model, criterion, optimizer, _ = build_in_process([*meta_args(meta_data, tmp_path / "ip"), "--criterion",
                                                             "meta_span_policy"])
    dataset = task.dataset("train")
    sample = dataset.collater([dataset[i] for i in range(8)])
    optimizer.zero_grad()
    task.train_step(sample, model, criterion, optimizer, update_num=0)
    assert without_gradient(model) == []
    seq2seq = task.seq2seq("cpu")
    assert all(p.grad is None for p in seq2seq.parameters())  # θ is frozen
    # the seq2seq model run with other parameters (its tied embeddings included) is left as it was
    from fairseq_maskplug.criterions.meta_span_policy import mean_token_nll

    before = {k: v.clone() for k, v in seq2seq.state_dict().items()}
    pairs = sample["pairs"]
    net_input = {k: pairs[k] for k in ("src_tokens", "src_lengths", "prev_output_tokens")}
    plain = mean_token_nll(seq2seq, dict(seq2seq.named_parameters()), net_input, pairs["target"], task.dictionary.pad())
    scaled = mean_token_nll(seq2seq, {k: 1.5 * p.detach() for k, p in seq2seq.named_parameters()}, net_input,
                            pairs["target"], task.dictionary.pad())
    assert not torch.allclose(plain, scaled)
    assert all(torch.equal(before[k], v) for k, v in seq2seq.state_dict().items())


@pytest.mark.e2e
@pytest.mark.full
def test_meta_policy_trains_on_two_workers(meta_data, tmp_path):
    from test_data_parallel import SINGLE, torchrun

    args = meta_args(meta_data, tmp_path / "ddp", "--max-update", "2")
    at = args.index("--cpu")
    result = check(torchrun(*args[:at], *SINGLE, *args[at + len(CPU_RUN):]))
    assert "'distributed_world_size': 2" in result.stdout + result.stderr
    assert [int(r["num_updates"]) for r in json_logs(result, "train_inner")] == [1, 2]


@pytest.mark.e2e
@pytest.mark.parametrize("gradient", ["exact", "finite_difference"])
def test_meta_span_policy_in_half_precision(meta_data, tmp_path, gradient):
    """Both meta-gradients (second-order autograd, DARTS' finite difference) through a float16 model."""
    assert_half_precision_run(run([BIN / "fairseq-maskplug-train", *meta_args(meta_data, tmp_path / "ck",
                                                                              "--meta-gradient", gradient),
                                   "--max-update", "4", *HALF_PRECISION]), 4)
