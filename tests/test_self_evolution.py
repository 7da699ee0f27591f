"""Self-Evolution learning (Zhong et al. 2023): the self-questioning pass (each token's probability with nothing
masked) and the policy that masks the hard tokens it finds, on a real trained model."""

import shutil

import numpy as np
import pytest

from fairseq_helpers import BIN, CPU_RUN, TINY_ROBERTA, check, json_logs, run
from fairseq_maskplug.masking import build_mask_policy
from fairseq_maskplug.masking.self_evolution import self_evolution_mask
from test_pll import trained  # noqa: F401  (the fixture: a tiny roberta trained for 2 epochs)


def test_exactly_the_hard_tokens_are_masked():
    likelihood = np.array([1.0, 0.99, 0.5, 0.95, 0.2, 0.91, 0.89])  # -log P > 0.1 <=> P < 0.905
    maskable = np.array([False, True, True, True, True, True, True])
    mask = self_evolution_mask(likelihood, maskable, 0.1, 0.15, 1.0, np.random.default_rng(0))
    assert np.flatnonzero(mask).tolist() == [2, 4, 6]
    likelihood[2] = 0.01
    maskable[2] = False  # a special token is never masked, however hard
    assert np.flatnonzero(self_evolution_mask(likelihood, maskable, 0.1, 0.15, 1.0, np.random.default_rng(0))
                          ).tolist() == [4, 6]


def test_the_cap_keeps_the_hardest():
    likelihood = np.array([0.5, 0.1, 0.3, 0.2, 0.4, 0.99, 0.99, 0.99, 0.99, 0.99])
    mask = self_evolution_mask(likelihood, np.ones(10, dtype=bool), 0.1, 0.15, 0.2, np.random.default_rng(0))
    assert np.flatnonzero(mask).tolist() == [1, 3]  # floor(0.2 * 10) = 2: the two least likely


def test_a_sequence_without_a_hard_token_is_masked_at_random_at_the_fallback_rate():
    """floor(p n + U) uniform positions: over 2000 sequences of 40 the realised rate is 0.15 within 4 standard
    errors (the count's variance per sequence is at most 1/4, so SE <= sqrt(2000/4) / 80000)."""
    likelihood = np.full(40, 0.99)
    maskable = np.ones(40, dtype=bool)
    chosen = sum(self_evolution_mask(likelihood, maskable, 0.1, 0.15, 1.0, np.random.default_rng(seed)).sum()
                 for seed in range(2000))
    assert abs(chosen / 80000 - 0.15) < 4 * np.sqrt(2000 / 4) / 80000


def test_the_policy_reads_its_track():
    policy = build_mask_policy("self_evolution", {"se_threshold": 0.5})
    side = {"token_likelihood": np.array([1.0, 0.5, 0.7, 0.55])}  # -log: 0, 0.69, 0.36, 0.60
    mask = policy.choose(np.arange(4), np.array([False, True, True, True]), side, np.random.default_rng(0))
    assert mask.tolist() == [False, True, False, True]


def se_items(option, rows=400):
    """``rows`` items of 60 tokens through the one policy path (fairseq's and the Hugging Face collator's), half
    with hard tokens, half without (the random fallback): ``(sources, targets, has_hard)``."""
    from fairseq_maskplug.data.policy_path import MLMFormat, PolicyChooser, PolicyPath
    from fairseq_maskplug.masking import Corruption

    policy = build_mask_policy("self_evolution", {"se_hard_replacement": option})
    path = PolicyPath(PolicyChooser(policy), MLMFormat(Corruption(3, np.arange(10, 100)), 1), [0, 2], seed=5)
    rng = np.random.default_rng(0)
    out = []
    for index in range(rows):
        tokens = np.concatenate([[0], rng.integers(10, 100, 58), [2]])
        likelihood = np.full(60, 0.99)
        hard = index % 2 == 0
        if hard:
            likelihood[rng.choice(np.arange(1, 59), 8, replace=False)] = 0.5  # -log 0.5 > 0.1: hard
        item = path(tokens, {"token_likelihood": likelihood}, 1, index)
        out.append((item["source"].numpy(), item["target"].numpy(), tokens, hard))
    return out


@pytest.mark.parametrize("option", ["mask", "run"])
def test_hard_tokens_all_become_mask_and_the_fallback_keeps_80_10_10(option):
    """--se-hard-replacement mask (the default, the authors' mask_tokens_dataset.py): every chosen hard token is
    <mask>; a sequence without a hard token is masked at random and replaced 80/10/10 (over about 1,800 fallback
    positions: <mask> 0.8 within 5 standard errors, about 0.047); ``run``: the hard tokens 80/10/10 too."""
    shares = {True: [], False: []}
    for source, target, tokens, hard in se_items(option):
        chosen = target != 1
        assert chosen.any()
        shares[hard] += list(source[chosen] == 3)
    hard_share, fallback_share = np.mean(shares[True]), np.mean(shares[False])
    assert abs(fallback_share - 0.8) < 5 * np.sqrt(0.16 / len(shares[False])), fallback_share
    if option == "mask":
        assert hard_share == 1.0
    else:
        assert abs(hard_share - 0.8) < 5 * np.sqrt(0.16 / len(shares[True])), hard_share


def test_an_unknown_hard_replacement_is_refused():
    with pytest.raises(ValueError, match="--se-hard-replacement must be one of"):
        build_mask_policy("self_evolution", {"se_hard_replacement": "nope"})


@pytest.mark.e2e
def test_unmasked_scores_equal_the_naive_loop_and_train_a_self_evolution_run(tiny_data, trained, tmp_path):
    """The self-questioning pass batched equals one forward per sentence; the producer writes the track;
    guided_mlm then masks exactly the hard tokens of each block (its logged rate is theirs)."""
    from fairseq.data import data_utils
    from fairseq_maskplug.data import SideInfoDataset
    from fairseq_maskplug.scoring.pll import PLTScorer, iterate_lines

    checkpoint, model, task = trained
    d = task.source_dictionary
    scorer = PLTScorer(model, task.mask_idx, d.pad(), np.ones(len(d), dtype=bool), "unmasked")
    lines = list(iterate_lines(data_utils.load_indexed_dataset(str(tiny_data / "bin" / "valid"), d), d.bos()))[:12]
    special = (d.bos(), d.eos(), d.pad())
    for a, b in zip(scorer.score_naive(lines, special), scorer.score(lines, special, max_tokens=100, progress=False)):
        np.testing.assert_allclose(a, b, atol=1e-4)
        assert a[0] == 1 and a[-1] == 1 and ((a[1:-1] > 0) & (a[1:-1] < 1)).all()
    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    check(run([BIN / "fairseq-maskplug-score-pll", "--checkpoint", checkpoint, "--data", data, "--splits", "train",
               "valid", "--metric", "unmasked", "--name", "token_likelihood", "--word-starts", "token"]))
    likelihood = SideInfoDataset(str(data / "train.token_likelihood"))
    losses = -np.log(np.concatenate([likelihood[i].numpy()[:-1] for i in range(len(likelihood))]))
    threshold = float(np.quantile(losses, 0.7))  # a model this small finds every token hard at the paper's 0.1
    hard = float((losses > threshold).mean())
    result = check(run([BIN / "fairseq-maskplug-train", data, "--task", "guided_mlm", "--mask-policy",
                        "self_evolution", "--se-threshold", str(threshold), "--tokens-per-sample", "32", "--save-dir",
                        tmp_path / "ck", "--max-update", "3", *TINY_ROBERTA, *CPU_RUN]))
    rates = [float(r["mask_rate"]) for r in json_logs(result, "train_inner")]
    # 24 blocks of ~30 tokens: the hard share of a batch's blocks is within 0.1 of the split's (several SEs)
    assert len(rates) == 3 and abs(np.mean(rates) - hard) < 0.1, (rates, hard)


# ---- the token-specific label smoothing (--criterion self_evolution) ------------------------------------

def test_smoothed_cross_entropy_is_the_cross_entropy_against_the_mixed_target():
    import torch
    from fairseq_maskplug.criterions.self_evolution import smoothed_cross_entropy
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 7, generator=generator)
    targets = torch.tensor([0, 3, 6, 2, 2])
    clean = torch.softmax(torch.randn(5, 7, generator=generator), dim=-1)
    loss, nll = smoothed_cross_entropy(logits, targets, clean, 0.1)
    mixed = 0.9 * torch.nn.functional.one_hot(targets, 7).float() + 0.1 * clean
    by_hand = -(mixed * torch.log_softmax(logits, dim=-1)).sum()
    torch.testing.assert_close(loss, by_hand)
    torch.testing.assert_close(nll, torch.nn.functional.cross_entropy(logits, targets, reduction="sum"))
    zero, _ = smoothed_cross_entropy(logits, targets, clean, 0.0)
    torch.testing.assert_close(zero, nll)
    with pytest.raises(ValueError, match=r"smoothing must lie in \[0, 1\)"):
        smoothed_cross_entropy(logits, targets, clean, 1.0)


def masked_sample(task, seed: int):
    """``(original, masked, source, sample)``: 3 random lines of 12 tokens (``<s>`` first), positions 2, 5 and 9
    masked, as a masked-LM batch."""
    import torch

    d = task.source_dictionary
    original = torch.randint(d.nspecial, len(d) - 1, (3, 12), generator=torch.Generator().manual_seed(seed))
    original[:, 0] = d.bos()
    masked = torch.zeros_like(original, dtype=torch.bool)
    masked[:, [2, 5, 9]] = True
    source = torch.where(masked, torch.full_like(original, task.mask_idx), original)
    target = torch.where(masked, original, torch.full_like(original, d.pad()))
    sample = {"net_input": {"src_tokens": source}, "target": target, "ntokens": int(masked.sum()), "nsentences": 3}
    return original, masked, source, sample


@pytest.mark.e2e
def test_the_criterion_mixes_in_the_models_own_prediction_on_the_unmasked_input(trained):
    """On a trained tiny model (eval mode: no dropout), the criterion's loss equals the cross entropy of
    the masked input's predictions against 0.9 one-hot + 0.1 the model's softmax on the original input,
    at the masked positions only; --se-smoothing 0 gives fairseq's masked_lm loss."""
    import torch
    from fairseq.criterions.masked_lm import MaskedLmConfig, MaskedLmLoss
    from fairseq_maskplug.criterions.self_evolution import SelfEvolutionCriterion

    _, model, task = trained
    model.eval()
    d = task.source_dictionary
    original, masked, source, sample = masked_sample(task, 1)
    with torch.no_grad():
        loss, size, log = SelfEvolutionCriterion(task, 0.1)(model, sample)
        logits = model(source, masked_tokens=masked)[0]
        clean = torch.softmax(model(original, masked_tokens=masked)[0].float(), dim=-1)
        mixed = 0.9 * torch.nn.functional.one_hot(original[masked], len(d)).float() + 0.1 * clean
        by_hand = -(mixed * torch.log_softmax(logits.float(), dim=-1)).sum()
        plain, _, _ = MaskedLmLoss(MaskedLmConfig(tpu=False), task)(model, sample)
        unsmoothed, _, _ = SelfEvolutionCriterion(task, 0.0)(model, sample)
    assert int(size) == 9
    torch.testing.assert_close(loss, by_hand, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(log["nll_loss"], plain, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(unsmoothed, plain, rtol=1e-5, atol=1e-5)
    assert abs(float(loss) - float(plain)) > 1e-3  # the smoothing changes the loss


@pytest.mark.e2e
def test_in_training_the_target_comes_from_an_eval_mode_pass_and_the_mode_is_restored(trained):
    """In train mode with dropout (the tiny model's 0.1), the loss equals the by-hand loss whose masked-input
    logits are the same dropout draw and whose target is the unmasked input's prediction *without* dropout (the
    authors switch to eval() for it); the model is in train mode again after the call."""
    import torch
    from fairseq_maskplug.criterions.self_evolution import SelfEvolutionCriterion

    _, model, task = trained
    d = task.source_dictionary
    original, masked, source, sample = masked_sample(task, 2)
    model.train()
    try:
        torch.manual_seed(5)
        with torch.no_grad():
            loss, _, _ = SelfEvolutionCriterion(task, 0.1)(model, sample)
        assert model.training
        torch.manual_seed(5)
        with torch.no_grad():
            logits = model(source, masked_tokens=masked)[0]  # the same dropout draw as the criterion's
            model.eval()
            clean = torch.softmax(model(original, masked_tokens=masked)[0].float(), dim=-1)
            model.train()
            dropped = torch.softmax(model(original, masked_tokens=masked)[0].float(), dim=-1)
        mixed = 0.9 * torch.nn.functional.one_hot(original[masked], len(d)).float() + 0.1 * clean
        by_hand = -(mixed * torch.log_softmax(logits.float(), dim=-1)).sum()
        torch.testing.assert_close(loss, by_hand, rtol=1e-5, atol=1e-5)
        assert (dropped - clean).abs().max() > 1e-4  # a pass with dropout would give another target
    finally:
        model.eval()
