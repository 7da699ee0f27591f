"""The policies x tasks matrix (docs/methods.md), cell by cell: every built-in policy builds in every task that
takes ``--mask-policy``, loads its side information with the tokens and masks items (``mask_counts``
carried by the items), and what the items predict follows the policy's rule (its signature); ``fe_mlm``
takes the policies that define views and refuses the others; with ``--mask-unit word`` every policy
predicts whole words of several sentencepiece or GPT-2 pieces."""

import shutil

import numpy as np
import pytest
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from benchmarks.stand_in_tracks import write_stand_in_tracks
from fairseq_maskplug.masking import MASK_POLICY_REGISTRY
from test_finetune_e2e import write_task
from test_words import gpt2_data, spm_data  # noqa: F401  (fixtures)

POLICIES = {"random", "span", "l3", "selective", "matched_random", "salient_span", "learned_span", "pmi", "ptw",
            "informask", "self_evolution", "difference"}
WITH_VIEWS = {"random", "span", "l3", "pmi", "informask"}
#: policies that learn from training, and the tasks that train them (the others refuse them)
FEEDBACK = {"ptw"}
FEEDBACK_TASKS = {"guided_mlm", "selective_mlm"}


def write_tracks(directory, rng):
    """Every built-in policy's tracks for the train and valid splits of ``directory``."""
    write_stand_in_tracks(directory, ("train", "valid"), rng)


@pytest.fixture(scope="module")
def matrix_data(tiny_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("matrix")
    classification = write_task(tiny_data, root)
    mlm = shutil.copytree(tiny_data / "bin", root / "mlm")
    rng = np.random.default_rng(0)
    write_tracks(mlm, rng)
    write_tracks(classification / "input0", rng)
    return {"mlm": mlm, "classification": classification}


TASKS = {"guided_mlm": ("mlm", ["--arch", "roberta_base"]),
         "selective_mlm": ("mlm", ["--arch", "roberta_base"]),
         "guided_denoising": ("mlm", ["--arch", "bart_tiny"]),
         "joint_mlm_classification": ("classification", ["--arch", "roberta_base", "--num-classes", "2"]),
         "fe_mlm": ("mlm", ["--arch", "roberta_base", "--fe-views", "3"])}


def build(matrix_data, task, policy, *unit):
    kind, extra = TASKS[task]
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(matrix_data[kind]), "--task", task, "--tokens-per-sample", "32", "--mask-policy", policy,
        *(["--l3-max-prob", "0.3"] if policy == "l3" and task == "fe_mlm" else []), *extra, *unit])
    return tasks.setup_task(convert_namespace_to_omegaconf(args).task)


def test_the_matrix_covers_every_built_in_policy():
    assert POLICIES == set(MASK_POLICY_REGISTRY)


@pytest.mark.parametrize("unit", ["token", "word"])
@pytest.mark.parametrize("task", [t for t in TASKS if t != "fe_mlm"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_masks_items_in_every_policy_task(matrix_data, task, policy, unit):
    """(Words of this whitespace data are its tokens; tests/test_words.py checks words of several pieces.) A policy
    that learns from training is refused, in one line, by the tasks that cannot train it."""
    if policy in FEEDBACK and task not in FEEDBACK_TASKS:
        with pytest.raises(ValueError, match=f"--mask-policy {policy} learns from training, which --task {task}"):
            build(matrix_data, task, policy, "--mask-unit", unit)
        return
    built = build(matrix_data, task, policy, "--mask-unit", unit)
    built.load_dataset("valid")
    dataset = built.dataset("valid")
    batch = dataset.collater([dataset[i] for i in range(len(dataset))])
    counts = batch["mlm"]["mask_counts"] if "mlm" in batch else batch["mask_counts"]
    chosen, maskable = counts[:, 0], counts[:, 1]
    assert int(chosen.sum()) > 0 and bool((chosen <= maskable).all()), (task, policy)


@pytest.mark.parametrize("unit", ["token", "word"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_fe_mlm_takes_the_policies_with_views_and_refuses_the_others(matrix_data, policy, unit):
    if policy not in WITH_VIEWS:
        with pytest.raises(ValueError, match=policy):
            build(matrix_data, "fe_mlm", policy, "--mask-unit", unit).load_dataset("valid")
        return
    built = build(matrix_data, "fe_mlm", policy, "--mask-unit", unit)
    built.load_dataset("valid")
    dataset = built.dataset("valid")
    batch = dataset.collater([dataset[i] for i in range(len(dataset))])
    assert batch["mask_counts"].shape[0] == 3 * len(dataset) and int(batch["mask_counts"][:, 0].sum()) > 0


# ---- each policy's signature in every cell: what the task's items predict follows the policy's rule --------------

#: epochs over which l3's mask frequencies are compared with its probabilities
L3_EPOCHS = 40


def predicted_positions(built, split="valid", epoch=1):
    """``(tokens, predicted, side)`` per item of ``split`` at ``epoch``: the item's original tokens, the positions
    it predicts (target != pad; text-to-text items built with one <mask> per chosen token and no 80/10/10:
    source == <mask>) and the side-information tracks aligned with them, blocked as the task blocked them."""
    from fairseq_maskplug.data import load_blocked_split

    tokens, side = load_blocked_split(built.blocking_cfg(), split, built.dictionary, built.side_info_rules, epoch,
                                      False, framing=built.framing_tokens)
    dataset = built.dataset(split)
    dataset.set_epoch(epoch)
    pad = built.dictionary.pad()
    for i in range(len(dataset)):
        item, original = dataset[i], tokens[i].numpy()
        if built.encoder_decoder:
            source = item["source"].numpy()[:len(original)]
            assert len(item["source"]) == len(original) + (original[-1] != built.dictionary.eos())
            predicted = source == built.mask_idx
        else:
            predicted = (item["mlm"] if "mlm" in item else item)["target"].numpy() != pad
        yield original, predicted, {name: track[i].numpy() for name, track in side.items()}


def signature_task(matrix_data, task, policy, unit):
    extra = ["--collapse-spans", "off", "--leave-unmasked-prob", "0", "--random-token-prob", "0"] \
        if task == "guided_denoising" else []
    built = build(matrix_data, task, policy, "--mask-unit", unit, *extra)
    built.load_dataset("valid")
    return built


@pytest.mark.parametrize("unit", ["token", "word"])
@pytest.mark.parametrize("task", [t for t in TASKS if t != "fe_mlm"])
@pytest.mark.parametrize("policy", ["selective", "salient_span", "pmi", "learned_span"])
def test_side_information_policies_predict_what_their_track_says_in_every_task(matrix_data, task, policy, unit):
    """selective: only tagged tokens (score >= threshold), at most the cap; salient_span: exactly one complete
    entity span where a line has one; pmi: whole units, never part of one; learned_span: the top-scoring span
    (temperature 0), recomputed from the track. (Words of this whitespace data are its tokens.)"""
    from fairseq_maskplug.masking import choose_learned_spans, complete_spans, maskable_positions
    from fairseq_maskplug.masking.pmi import unit_ids

    built = signature_task(matrix_data, task, policy, unit)
    options = built.policy.options
    items = 0
    for tokens, predicted, side in predicted_positions(built):
        maskable = maskable_positions(tokens, built.special_ids)
        if policy == "selective":
            tagged = side[options.selective_track] >= options.selective_threshold
            assert not (predicted & ~(tagged & maskable)).any()
        elif policy == "salient_span":
            spans = complete_spans(side[options.salient_track], maskable)
            assert predicted.tolist() in [[s <= k < e for k in range(len(tokens))] for s, e in spans] if spans \
                else not predicted.any()
        elif policy == "pmi":
            units = unit_ids(side[options.pmi_track], maskable)
            for u in np.unique(units[predicted]):
                assert predicted[units == u].all(), f"unit {u} predicted in part"
        else:
            start, end = side[options.learned_start_track], side[options.learned_end_track]
            spans = choose_learned_spans(start, end, maskable, options.learned_max_length, 1, 0.0, None)
            assert np.flatnonzero(predicted).tolist() == [k for i, j in spans for k in range(i, j + 1)]
        items += 1
    assert items > 0


@pytest.mark.parametrize("task", [t for t in TASKS if t != "fe_mlm"])
def test_l3_masks_follow_the_plt_scores_in_every_task(matrix_data, task):
    """Over L3_EPOCHS visits, each position's mask frequency tracks its probability p_i (Kimura et al., Eq. 4):
    rank correlation above 0.6. Derivation: the frequency's noise variance is at most p(1 - p) / 40 <= 0.0053
    (p <= 0.3 here), p's own variance about 0.0075 (uniform PLT), so the expected correlation is about 0.8 and
    its standard error over the hundreds of positions about 0.03: 0.6 is several standard errors below, while
    masks that ignore the scores (random at the same rate) give about 0."""
    from fairseq_maskplug.masking import mask_probabilities, maskable_positions

    built = signature_task(matrix_data, task, "l3", "token")
    options = built.policy.options
    probabilities, frequencies = [], []
    for epoch in range(1, L3_EPOCHS + 1):
        for n, (tokens, predicted, side) in enumerate(predicted_positions(built, epoch=epoch)):
            maskable = maskable_positions(tokens, built.special_ids)
            if epoch == 1:
                probabilities.append(mask_probabilities(side[options.l3_track], options.l3_mean, maskable)[maskable])
                frequencies.append(np.zeros(int(maskable.sum())))
            frequencies[n] += predicted[maskable] / L3_EPOCHS
    p, f = np.concatenate(probabilities), np.concatenate(frequencies)
    assert len(p) > 200
    rank = lambda x: np.argsort(np.argsort(x, kind="stable"), kind="stable")  # noqa: E731
    assert np.corrcoef(rank(p), rank(f))[0, 1] > 0.6
    assert abs(f.mean() - options.l3_mean) < 4 * np.sqrt(options.l3_mean / (L3_EPOCHS * len(f)))


@pytest.fixture(scope="module")
def subword_data(spm_data, gpt2_data, tmp_path_factory):
    """The words tests' sentencepiece and GPT-2 BPE corpora (words of several pieces), with every policy's tracks."""
    root = tmp_path_factory.mktemp("matrix_words")
    gpt2_root, _ = gpt2_data
    spm = shutil.copytree(spm_data / "bin", root / "sentencepiece")
    gpt2 = shutil.copytree(gpt2_root / "bin", root / "gpt2")
    rng = np.random.default_rng(1)
    write_tracks(spm, rng)
    write_tracks(gpt2, rng)
    return {"sentencepiece": (spm, []), "gpt2": (gpt2, ["--gpt2-encoder-json", str(gpt2_root / "encoder.json")])}


@pytest.mark.parametrize("vocabulary", ["sentencepiece", "gpt2"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_predicts_whole_words_of_several_pieces(subword_data, vocabulary, policy):
    """The matrix's word column on real subword vocabularies: with --mask-unit word every word a policy touches is
    predicted whole, and words of more than one piece are among them (on whitespace data words are tokens)."""
    from fairseq_maskplug.masking import maskable_positions
    from fairseq_maskplug.masking.words import Words

    data, extra = subword_data[vocabulary]
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data), "--task", "guided_mlm", "--tokens-per-sample", "64", "--mask-policy", policy, "--mask-unit",
        "word", "--arch", "roberta_base", *extra])
    built = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    built.load_dataset("valid")
    several = 0
    for tokens, predicted, _ in predicted_positions(built):
        words = Words(tokens, maskable_positions(tokens, built.special_ids), built.policy.start_symbols).ids
        for word in np.unique(words[predicted]):
            assert predicted[words == word].all(), f"word {word} predicted in part"
            several += int((words == word).sum() > 1)
    assert several > 0, "no word of several pieces was predicted"
