"""PTW (Yang et al. 2023) and the training-feedback mechanism it uses: what it masks follows its tag
weights, its statistics fold as the authors' code folds them, and a run that learns them resumes, loads
in loader workers and trains on two data-parallel workers exactly as an uninterrupted one."""

import json
import shutil

import numpy as np
import pytest
import torch

from fairseq_helpers import BIN, CPU_RUN, TINY_ROBERTA, check, json_logs, one_line_error, run
from fairseq_maskplug.masking import build_mask_policy, group_loss_sums
from fairseq_maskplug.masking.ptw import UPOS_TAGS, fold_scores, ptw_mask, tag_weights
from fairseq_maskplug.tasks.training_feedback import STATE_KEY, SUMS_KEY, TrainingFeedback
from test_salient_spans import SENTENCES, spm_data  # noqa: F401  (the fixture: sentencepiece data and its text)

N_TAGS = len(UPOS_TAGS)


def test_weights_are_a_half_at_the_start_and_follow_the_scores():
    assert np.allclose(tag_weights(np.zeros(N_TAGS)), 0.5)
    scores = np.linspace(1.0, 3.0, N_TAGS)
    weights = tag_weights(scores)
    assert np.all(np.diff(weights) > 0)
    z = (scores - scores.mean()) / scores.std(ddof=1)  # torch's std: Bessel-corrected, as the authors' code
    assert np.allclose(weights, 1 / (1 + np.exp(-2 * z)))


def test_fold_moves_only_the_tags_predicted_in_the_batch():
    scores = np.arange(N_TAGS, dtype=float)
    sums, counts = group_loss_sums(np.array([0, 0, 3]), np.array([2.0, 4.0, 10.0]), N_TAGS)
    folded = fold_scores(scores, sums, counts, 0.999)
    assert folded[0] == pytest.approx(0.999 * 0 + 0.001 * 3.0)  # the batch's mean loss on tag 0
    assert folded[3] == pytest.approx(0.999 * 3 + 0.001 * 10.0)
    untouched = np.setdiff1d(np.arange(N_TAGS), [0, 3])
    assert np.array_equal(folded[untouched], scores[untouched])


def test_each_tag_is_masked_at_its_weight_when_the_budget_does_not_bind():
    """With p = 1 the budget is every position: each maskable position is predicted with its tag's weight
    (a Bernoulli draw). Over 400 sequences of 170 positions, each tag's realised rate lies within 4 standard
    errors of its weight."""
    weights = np.linspace(0.05, 0.95, N_TAGS)
    tags = np.repeat(np.arange(N_TAGS), 10)
    maskable = np.ones(len(tags), dtype=bool)
    maskable[:3] = False
    hits = np.zeros(N_TAGS)
    for seed in range(400):
        mask = ptw_mask(tags, maskable, weights, 1.0, np.random.default_rng(seed))
        assert not (mask & ~maskable).any()
        hits += np.bincount(tags[mask], minlength=N_TAGS)
    trials = 400 * np.bincount(tags[maskable], minlength=N_TAGS)
    se = np.sqrt(weights * (1 - weights) / trials)
    assert np.all(np.abs(hits / trials - weights) < 4 * se)


def test_the_count_is_the_rounded_rate_when_enough_positions_are_accepted():
    tags = np.zeros(200, dtype=int)
    maskable = np.ones(200, dtype=bool)
    for seed in range(50):
        mask = ptw_mask(tags, maskable, np.full(N_TAGS, 0.5), 0.15, np.random.default_rng(seed))
        assert mask.sum() == 30  # round(0.15 * 200); about 100 of 200 are accepted
    assert ptw_mask(tags[:3], maskable[:3], np.full(N_TAGS, 1.0), 0.1, np.random.default_rng(0)).sum() == 1


def test_the_token_path_draws_what_the_word_path_draws_with_one_token_words():
    """Without ``sizes`` (every position one token; the live redraw's hot path) the mask is the word path's
    with every size 1, draw for draw, on random lengths, tags, weights and rates."""
    for seed in range(500):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(1, 60))
        tags, maskable, weights = rng.integers(0, N_TAGS, n), rng.random(n) < 0.9, rng.random(N_TAGS)
        prob = float(rng.uniform(0.01, 1.0))
        tokens = ptw_mask(tags, maskable, weights, prob, np.random.default_rng(seed + 1))
        words = ptw_mask(tags, maskable, weights, prob, np.random.default_rng(seed + 1), sizes=np.ones(n, dtype=int))
        assert np.array_equal(tokens, words), seed


def authors_whole_word_mask(word_sizes, prob, rng):
    """The authors' ``_whole_word_mask`` (BERT's, as in Hugging Face's ``DataCollatorForWholeWordMask``) with every
    tag weight 1: the words in a random order, each added while ``max(1, round(p n_tokens))`` tokens are not
    reached, a word that would overflow skipped. Returns the tokens predicted."""
    budget = max(1, int(round(int(np.sum(word_sizes)) * prob)))
    predicted = 0
    for word in rng.permutation(len(word_sizes)):
        if predicted >= budget:
            break
        if predicted + word_sizes[word] > budget:
            continue
        predicted += word_sizes[word]
    return predicted


def test_the_word_budget_counts_tokens_as_the_authors_whole_word_masking():
    """Under --mask-unit word the budget is ``max(1, round(p n_tokens))`` tokens filled with whole words, skipping one
    that would overflow (it counted words: round(p n_words)). With unit weights, the count of predicted tokens
    has the distribution of the authors' procedure: over 3000 draws each, a chi-square test of the two count
    histograms (expected counts pooled into bins of at least 5) at the 0.001 level; and the count never exceeds
    the budget."""
    from scipy.stats import chi2_contingency

    rng = np.random.default_rng(7)
    sizes = rng.integers(1, 5, 40)  # 40 words of 1 to 4 tokens
    tags, maskable, budget = np.zeros(40, dtype=int), np.ones(40, dtype=bool), int(round(sizes.sum() * 0.15))
    ours, theirs = [], []
    for seed in range(3000):
        mask = ptw_mask(tags, maskable, np.ones(N_TAGS), 0.15, np.random.default_rng(seed), sizes)
        ours.append(int(sizes[mask].sum()))
        theirs.append(authors_whole_word_mask(sizes, 0.15, np.random.default_rng(10 ** 6 + seed)))
    assert max(ours) <= budget and max(theirs) <= budget
    values = sorted(set(ours) | set(theirs))
    table = np.array([[ours.count(v) for v in values], [theirs.count(v) for v in values]])
    keep = table.sum(axis=0) >= 10
    table = np.column_stack([table[:, keep], table[:, ~keep].sum(axis=1)]) if (~keep).any() else table
    assert chi2_contingency(table[:, table.sum(axis=0) > 0])[1] > 0.001, table
    # through --mask-unit word: the policy receives each word's token count
    from fairseq_maskplug.masking.words import WordUnitPolicy

    starts = np.ones(100, dtype=bool)
    starts[50:] = False  # ids >= 50 continue a word
    tokens = np.array([3, 60, 61, 4, 62, 5, 6, 63, 64, 65] * 4)  # words of 3, 2, 1 and 4 tokens
    policy = WordUnitPolicy(build_mask_policy("ptw", {"ptw_mask_prob": 0.25}).with_state(np.zeros(N_TAGS)), starts)
    side = {"pos": np.zeros(40, dtype=int)}
    for seed in range(200):
        assert policy.choose(tokens, np.ones(40, dtype=bool), side, np.random.default_rng(seed)).sum() <= 10


def test_harder_tags_are_masked_more_after_training_feedback():
    """The policy with a state where tag 5 is the hardest masks it more often than with the initial state."""
    policy = build_mask_policy("ptw", {})
    scores = np.ones(N_TAGS)
    scores[5] = 3.0
    tags = np.arange(170) % N_TAGS
    maskable = np.ones(170, dtype=bool)
    before = after = 0
    for seed in range(200):
        before += policy.choose(tags, maskable, {"pos": tags}, np.random.default_rng(seed))[tags == 5].sum()
        after += policy.with_state(scores).choose(tags, maskable, {"pos": tags}, np.random.default_rng(seed))[
            tags == 5].sum()
    assert after > 1.5 * before
    assert policy.state is None  # with_state left the policy as it was


def fold(feedback, *batches, ignore=False):
    """One update of ``batches`` (``(groups, losses)`` each: its micro-batches, or its workers' batches)."""
    feedback.fold_update([feedback.batch_statistics(torch.tensor(g), torch.tensor(l), ignore) for g, l in batches])


def test_each_epoch_draws_with_the_statistics_the_previous_ones_left():
    feedback = TrainingFeedback(build_mask_policy("ptw", {}).feedback)
    assert np.array_equal(feedback.state_for_epoch(1), np.zeros(N_TAGS))
    fold(feedback, ([2, 2], [1.0, 3.0]))
    assert np.array_equal(feedback.state_for_epoch(1), np.zeros(N_TAGS))  # validation and epoch 1: initial
    second = feedback.state_for_epoch(2).copy()
    assert second[2] == pytest.approx(0.001 * 2.0)
    fold(feedback, ([4], [5.0]))
    assert np.array_equal(feedback.state_for_epoch(2), second)  # asked again in epoch 2: the same
    restored = TrainingFeedback(build_mask_policy("ptw", {}).feedback)
    restored.load_state_dict(feedback.state_dict())
    assert np.array_equal(restored.state_for_epoch(2), second)
    assert np.array_equal(restored.state_for_epoch(3), feedback.state_for_epoch(3))
    assert restored.updates_folded == feedback.updates_folded == 2
    fold(feedback, ([4], [5.0]), ignore=True)  # a dummy batch adds nothing
    assert np.array_equal(feedback.running, restored.running)


def test_a_non_finite_loss_is_left_out_and_the_state_stays_finite():
    """One NaN (an fp16 overflow step) made a tag's score NaN for good, after which PTW masked nothing."""
    feedback = TrainingFeedback(build_mask_policy("ptw", {}).feedback)
    fold(feedback, ([2, 2, 3], [1.0, float("nan"), float("inf")]))
    assert np.all(np.isfinite(feedback.running)) and feedback.dropped == 2
    assert feedback.running[2] == pytest.approx(0.001 * 1.0) and feedback.running[3] == 0


def test_a_forward_folds_once_with_every_worker_s_batch_it_summed_and_validation_folds_nothing():
    """The sums of one forward's workers (added up by fairseq's own synchronisation of logging outputs) fold in
    once: the statistics take no collective of their own, so a worker's skipped (OOM) batch or an AMP retry
    cannot leave them unpaired; validation's logging outputs carry no sums."""
    feedback = TrainingFeedback(build_mask_policy("ptw", {}).feedback)
    fold(feedback, ([2, 3], [1.0, 2.0]), ([2], [3.0]))
    np.testing.assert_allclose(feedback.running[[2, 3]], [0.001 * 2.0, 0.001 * 2.0])  # tag 2: mean of 1 and 3
    summed = feedback.batch_statistics(torch.tensor([2, 3]), torch.tensor([1.0, 2.0]))
    summed[SUMS_KEY] = summed[SUMS_KEY] * 2  # two workers' identical batches, as fairseq's fast sync sums them
    before = feedback.running.copy()
    feedback.fold_update([summed])
    np.testing.assert_allclose(feedback.running[[2, 3]], 0.999 * before[[2, 3]] + 0.001 * np.array([1.0, 2.0]))
    feedback.fold_update([{"loss": 1.0, "mask_counts": 3}])  # a validation logging output
    assert feedback.updates_folded == 2


def test_the_logged_state_names_the_most_and_the_least_masked_tags():
    from fairseq_maskplug.masking.ptw import describe_tag_weights

    assert describe_tag_weights(tag_weights(np.zeros(N_TAGS))) == \
        "tag weights: every tag 0.5 (no tag scored yet, or all alike)"
    scores = np.arange(N_TAGS, dtype=float)  # X (the last tag) the hardest, ADJ (the first) the easiest
    text = describe_tag_weights(tag_weights(scores))
    top, bottom = text.split(": ", 1)[1].split(" ... ")
    assert [entry.split()[0] for entry in top.split(", ")] == ["X", "VERB", "SYM"]
    assert [entry.split()[0] for entry in bottom.split(", ")] == ["ADJ", "ADP", "ADV"]
    with pytest.raises(ValueError, match="17 tags"):
        describe_tag_weights(np.ones(3))


# --- real training -------------------------------------------------------------------------------------------


def write_pos_track(split_prefix):
    """A ``pos`` track: each token's tag is its id modulo 17 (so a tag's loss is a property of its words)."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    from fairseq_maskplug.data import write_side_info

    tokens = MMapIndexedDataset(str(split_prefix))
    rows = [(tokens[i].numpy() % N_TAGS).astype(np.uint8) for i in range(len(tokens))]
    write_side_info(f"{split_prefix}.pos", rows, "uint8", tokens_prefix=str(split_prefix))


@pytest.fixture(scope="module")
def pos_data(tiny_data, tmp_path_factory):
    data = shutil.copytree(tiny_data / "bin", tmp_path_factory.mktemp("ptw") / "bin")
    for split in ("train", "valid"):
        write_pos_track(data / split)
    return data


def ptw_args(data, save, *extra):
    return [data, "--task", "guided_mlm", "--mask-policy", "ptw", "--tokens-per-sample", "32", "--save-dir", save,
            "--no-epoch-checkpoints", "--seed", "3", *TINY_ROBERTA, *CPU_RUN, *extra]


def ptw_train(data, save, *extra):
    return run([BIN / "fairseq-maskplug-train", *ptw_args(data, save, *extra)], new_process=True)


def task_state(checkpoint):
    return torch.load(checkpoint, map_location="cpu")["task_state"][STATE_KEY]


def test_the_task_s_items_follow_the_state_of_their_epoch(pos_data):
    """In guided_mlm's items, epoch 1 draws with the initial state: tag 7's positions are predicted as often as
    the others'. Once training has left tag 7 the hardest (weight ~1, the others ~0.38), epochs 2 to 6 predict
    its positions more than twice as often as the others' (expected about 2.6 times: most items reach their
    budget of 15% among ~42% accepted; measured 0.35 against 0.11). Tag 7 has ~200 positions an epoch, so its
    share's standard error is about 0.025 in epoch 1 and 0.015 over five epochs; both bounds hold by several
    standard errors."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(pos_data), "--task", "guided_mlm", "--mask-policy", "ptw", "--tokens-per-sample", "32",
        "--arch", "roberta_base"])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    task.load_dataset("train")
    dataset = task.dataset("train")
    pad = task.dictionary.pad()

    def predicted_shares(epochs, tag=7):
        """(share of tag's positions predicted, share of the other tags' positions predicted)."""
        counts = np.zeros((2, 2))
        for epoch in epochs:
            dataset.set_epoch(epoch)
            for i in range(len(dataset)):
                item = dataset[i]
                predicted, groups = item["target"].numpy() != pad, item["feedback_groups"].numpy()
                for row, where in enumerate((groups == tag, (groups != tag) & (groups >= 0))):
                    counts[row] += [(predicted & where).sum(), where.sum()]
        return counts[0, 0] / counts[0, 1], counts[1, 0] / counts[1, 1]

    tag7, others = predicted_shares([1])
    assert abs(tag7 - others) < 4 * 0.03  # measured 0.17 against 0.12 (the others include <s> and </s>)
    scores = np.ones(N_TAGS)
    scores[7] = 2.0
    task.training_feedback.running = scores  # what training would have left at the end of epoch 1
    tag7, others = predicted_shares(range(2, 7))
    assert tag7 > 2 * others


@pytest.mark.e2e
@pytest.mark.full  # four PTW trainings of 3 epochs: about 40 s (the quick tier's 10 minutes are nearly full)
def test_ptw_learns_tag_scores_and_resumes_exactly(pos_data, tmp_path, capsys):
    """Three epochs (13 updates each): the scores move; a run stopped in epoch 3 (update 30) and resumed logs
    the same losses as the uninterrupted run from there on and ends with the same statistics; loader workers
    change nothing."""
    full = check(ptw_train(pos_data, tmp_path / "full", "--max-epoch", "3"))
    # each epoch's state in the log, with the command that renders its masks
    logged = [line for line in full.stdout.splitlines() if "mask policy ptw: epoch " in line]
    assert [line.split("mask policy ptw: epoch ")[1].split()[0] for line in logged] == ["1", "2", "3"], logged
    assert "every tag 0.5" in logged[0] and "show-examples --task-state" in logged[0]
    assert all(line.count(", ") >= 4 and " ... " in line for line in logged[1:]), logged
    losses = [r["loss"] for r in json_logs(full, "train_inner")]
    assert len(losses) == 39
    state = task_state(tmp_path / "full" / "checkpoint_last.pt")
    assert state["epoch"] == 3 and np.count_nonzero(state["running"]) >= 10
    assert state["drawn"] != state["running"]
    check(ptw_train(pos_data, tmp_path / "part", "--max-update", "30"))
    resumed = check(ptw_train(pos_data, tmp_path / "part", "--max-epoch", "3"))
    assert [r["loss"] for r in json_logs(resumed, "train_inner")] == losses[30:]
    assert task_state(tmp_path / "part" / "checkpoint_last.pt") == state
    workers = check(ptw_train(pos_data, tmp_path / "workers", "--max-epoch", "3", "--num-workers", "2"))
    assert [r["loss"] for r in json_logs(workers, "train_inner")] == losses
    # show-examples draws with a run's statistics: as its epoch 4 (their running state), not its epoch 1's
    from preprocess import show_examples

    pages = []
    for extra in (["--task-state", str(tmp_path / "full" / "checkpoint_last.pt")], []):
        assert show_examples.main([str(pos_data), "--task", "guided_mlm", "--mask-policy", "ptw", "--split", "train",
                                   "-n", "30", "--tokens-per-sample", "32", "--epoch", "4", *extra]) == 0
        pages.append(capsys.readouterr().out)
    assert pages[0] != pages[1]  # the same generator, other tag weights
    assert show_examples.main([str(pos_data), "--task", "guided_mlm", "--mask-policy", "ptw", "--task-state",
                               str(tmp_path / "none.pt")]) == 2


@pytest.mark.e2e
@pytest.mark.full  # five PTW trainings: about 35 s
def test_a_run_continued_with_its_data_loader_reset_keeps_the_learnt_scores_and_counts_epochs_anew(pos_data, tmp_path):
    """--finetune-from-model and --reset-dataloader from a PTW checkpoint of epoch 2 start again at epoch 1: they
    failed at their epoch 2 ('epoch 2 asked after epoch 3'); now epoch 1 draws with the scores loaded."""
    check(ptw_train(pos_data, tmp_path / "first", "--max-epoch", "2"))
    learnt = task_state(tmp_path / "first" / "checkpoint_last.pt")
    for name, extra in (("finetune", ["--finetune-from-model", str(tmp_path / "first" / "checkpoint_last.pt")]),
                        ("reset", ["--restore-file", str(tmp_path / "first" / "checkpoint_last.pt"),
                                   "--reset-dataloader"])):
        result = check(ptw_train(pos_data, tmp_path / name, "--max-epoch", "3", *extra))
        state = task_state(tmp_path / name / "checkpoint_last.pt")
        assert state["start"] == learnt["running"] and state["epoch"] == 3, name
        logged = [line for line in result.stdout.splitlines() if "mask policy ptw: epoch 1 " in line]
        assert logged and "every tag 0.5" not in logged[0], logged  # epoch 1 draws with what was learnt


@pytest.mark.e2e
@pytest.mark.full  # about 12 s
def test_the_statistics_fold_every_forward_from_the_sums_fairseq_synchronises(pos_data, tmp_path):
    """With two micro-batches an update (``--update-freq 2``), fairseq-train folds both forwards' rows of the sums
    it synchronised with its own statistics when the update ends (before 2026-11-26, every micro-batch folded
    with a collective of its own that a worker skipping a batch on an out-of-memory error left unpaired)."""
    check(ptw_train(pos_data, tmp_path / "freq2", "--update-freq", "2", "--max-update", "6"))
    checkpoint = torch.load(tmp_path / "freq2" / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    state = checkpoint["task_state"][STATE_KEY]
    assert checkpoint["optimizer_history"][-1]["num_updates"] == 6 == state["updates_folded"]
    assert np.all(np.isfinite(state["running"])) and max(state["running"]) > 0


def test_the_rows_of_an_update_fold_in_order_one_per_forward():
    """The authors fold after every forward: an update of two forwards (two rows) gives fold(fold(s, first),
    second), not one fold of their sums; a forward of another row count is refused."""
    feedback = TrainingFeedback(build_mask_policy("ptw", {}).feedback)
    feedback.begin_update(2)
    rows = [feedback.batch_statistics(torch.tensor(g), torch.tensor(l), False, *feedback.take_slot())
            for g, l in (([2, 2], [1.0, 3.0]), ([2], [9.0]))]
    feedback.fold_update([{SUMS_KEY: rows[0][SUMS_KEY] + rows[1][SUMS_KEY]}])  # fairseq's sum of the two outputs
    once = fold_scores(np.zeros(N_TAGS), *group_loss_sums([2, 2], [1.0, 3.0], N_TAGS), 0.999)
    twice = fold_scores(once, *group_loss_sums([2], [9.0], N_TAGS), 0.999)
    np.testing.assert_allclose(feedback.running, twice)
    assert feedback.running[2] != pytest.approx(0.001 * 13 / 3)  # one fold of the summed forwards
    with pytest.raises(ValueError, match="row 2 of 2"):
        feedback.batch_statistics(torch.tensor([1]), torch.tensor([1.0]), False, 2, 2)


def test_fairseq_s_trainer_folds_each_micro_batch_of_an_update_in_order(pos_data, tmp_path):
    """fairseq's own Trainer with ``--update-freq 2``: after each update the scores are the per-forward folds of
    the losses each forward gave (read as the task computed them), in the order of the forwards (the plugin's
    Trainer.train_step announces the update's forwards to the task)."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    args = options.parse_args_and_arch(options.get_training_parser(), [str(a) for a in ptw_args(
        pos_data, tmp_path / "unused", "--update-freq", "2", "--num-workers", "0", "--criterion", "masked_lm")])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    trainer = Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
    forwards = []
    statistics = task.training_feedback.batch_statistics

    def recorded(groups, losses, *rest):
        forwards.append((groups.cpu().numpy().copy(), losses.detach().double().cpu().numpy().copy()))
        return statistics(groups, losses, *rest)

    task.training_feedback.batch_statistics = recorded
    batches = trainer.get_train_iterator(epoch=1).next_epoch_itr(shuffle=False)
    trainer.begin_epoch(1)
    expected = np.zeros(N_TAGS)
    for _ in range(3):
        forwards.clear()
        trainer.train_step([next(batches), next(batches)])
        assert len(forwards) == 2
        for groups, losses in forwards:
            expected = fold_scores(expected, *group_loss_sums(groups, losses, N_TAGS), 0.999)
        np.testing.assert_allclose(task.training_feedback.running, expected, rtol=1e-12)
    summed = fold_scores(np.zeros(N_TAGS), *[a + b for a, b in zip(*[group_loss_sums(g, l, N_TAGS)
                                                                     for g, l in forwards])], 0.999)
    assert not np.allclose(expected, summed)  # the check could tell per-forward folds from one fold of the sums


@pytest.mark.e2e
def test_tasks_that_cannot_learn_from_training_refuse_ptw(pos_data, tmp_path):
    result = run([BIN / "fairseq-maskplug-train", pos_data, "--task", "guided_denoising", "--mask-policy", "ptw",
                  "--arch", "bart_base", "--save-dir", tmp_path / "bart", *CPU_RUN, "--max-update", "1"])
    one_line_error(result, "--mask-policy ptw learns from training", "--task guided_denoising does not support")


@pytest.mark.e2e
@pytest.mark.full
def test_ptw_on_two_workers_shares_one_state_and_resumes_exactly(pos_data, tmp_path):
    """Two torchrun workers: the statistics are summed over both before every fold, so the saved state is the
    one state both drew with; a run stopped in epoch 2 and resumed logs the uninterrupted run's losses."""
    from test_data_parallel import SINGLE, torchrun

    def two_workers(save, *extra):
        args = ptw_args(pos_data, save, *extra)
        at = args.index("--cpu")
        return check(torchrun(*args[:at], *SINGLE, *args[at + len(CPU_RUN):]))

    full = two_workers(tmp_path / "full", "--max-epoch", "3")
    assert "'distributed_world_size': 2" in full.stdout + full.stderr
    losses = [r["loss"] for r in json_logs(full, "train_inner")]
    two_workers(tmp_path / "part", "--max-update", "10")
    resumed = two_workers(tmp_path / "part", "--max-epoch", "3")
    assert [r["loss"] for r in json_logs(resumed, "train_inner")] == losses[10:]
    assert task_state(tmp_path / "part" / "checkpoint_last.pt") == task_state(tmp_path / "full" / "checkpoint_last.pt")


# --- the POS producer ---------------------------------------------------------------------------------------


def test_a_piece_takes_the_tag_of_the_first_word_it_overlaps():
    from fairseq_maskplug.scoring.pos_tags import line_pos_track

    text = "Bob ran."
    ranges = np.array([[0, 2], [2, 3], [3, 7], [7, 8], [8, 8]])  # "Bo", "b", " ran", ".", </s>
    track = line_pos_track(text, ranges, [(0, 3, "PROPN"), (4, 7, "VERB"), (7, 8, "PUNCT")])
    assert [UPOS_TAGS[i] for i in track] == ["PROPN", "PROPN", "VERB", "PUNCT", "X"]


def test_pos_tags_command_writes_a_fingerprinted_track_in_one_process_and_in_shards(spm_data, tmp_path, capsys):
    """On real sentencepiece data: every token tagged, names and verbs where the sentences have them; the
    shards merge into the one-process track; text that does not spell the tokens stops it before tagging."""
    import shutil

    from fairseq.data.indexed_dataset import MMapIndexedDataset
    from fairseq_maskplug.data.side_info import load_side_info
    from fairseq_maskplug.masking.ptw import POS_IDS
    from preprocess import merge_shards, pos_tags

    root = spm_data
    data = shutil.copytree(root / "bin", tmp_path / "one")
    args = ["--split", "train", "--text", str(root / "train.txt"), "--shard-block-lines", "8", "--batch-size", "4"]
    assert pos_tags.main(["--data", str(data), *args]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"PROPN", "VERB", "PUNCT"} <= set(summary["tokens_per_tag"])
    tokens = MMapIndexedDataset(str(data / "train"))
    track = load_side_info(str(data / "train"), "pos", tokens, "train", POS_IDS)
    whole = [track[i].numpy().tolist() for i in range(len(tokens))]
    assert len(whole) == len(SENTENCES) and all(len(t) == len(tokens[i]) for i, t in enumerate(whole))
    sharded = shutil.copytree(root / "bin", tmp_path / "sharded")
    for shard in range(2):
        assert pos_tags.main(["--data", str(sharded), *args, "--num-shards", "2", "--shard-id", str(shard)]) == 0
    assert merge_shards.main([str(sharded)]) == 0
    merged = load_side_info(str(sharded / "train"), "pos", tokens, "train", POS_IDS)
    assert [merged[i].numpy().tolist() for i in range(len(tokens))] == whole
    wrong = tmp_path / "wrong.txt"
    wrong.write_text("\n".join(["Something else entirely."] * len(SENTENCES)) + "\n")
    capsys.readouterr()
    assert pos_tags.main(["--data", str(data), "--split", "train", "--text", str(wrong), "--name", "x"]) == 2
    assert str(wrong) in capsys.readouterr().err and not (data / "train.x.bin").exists()



# ---- live feedback: every training batch drawn again with the statistics of its update --------------------

def live_task(pos_data, *extra):
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(pos_data), "--task", "guided_mlm", "--mask-policy", "ptw", "--tokens-per-sample", "32",
        "--arch", "roberta_base", *extra])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    task.load_dataset("train")
    return task


def test_a_training_batch_is_drawn_again_with_the_statistics_of_its_update(pos_data):
    """The batch step draws every row again with the running statistics (tag 7 made the hardest: its positions
    predicted more than twice as often as the others', as the epoch-2 items of the test above), keyed by the
    update and the item (the same update: the same masks; another: others); validation keeps the items'."""
    import copy
    task = live_task(pos_data)
    dataset = task.dataset("train")
    pad = task.dictionary.pad()
    batch = dataset.collater([dataset[i] for i in range(len(dataset))])  # epoch 1's items: the initial state
    scores = np.ones(N_TAGS)
    scores[7] = 2.0
    task.training_feedback.running = scores

    def shares(sample, tag=7):
        predicted, groups = sample["target"].numpy() != pad, sample["feedback_groups"].numpy()
        where = groups == tag, (groups != tag) & (groups >= 0)
        return [(predicted & w).sum() / w.sum() for w in where]

    before = shares(batch)
    assert abs(before[0] - before[1]) < 4 * 0.03  # the items' draw: the initial state, every tag alike
    first, again, later, valid = (copy.deepcopy(batch) for _ in range(4))
    logs = task.prepare_batch(first, 5)
    tag7, others = shares(first)
    assert tag7 > 2 * others, (tag7, others)
    assert logs["feedback_chosen"] == int((first["target"] != pad).sum()) > 0
    task.prepare_batch(again, 5)
    task.prepare_batch(later, 6)
    assert torch.equal(first["net_input"]["src_tokens"], again["net_input"]["src_tokens"])
    assert torch.equal(first["target"], again["target"])
    assert not torch.equal(first["target"], later["target"])
    assert task.prepare_batch(valid, None) == {}
    assert torch.equal(valid["target"], batch["target"])
    # the originals are kept: every row's tokens, put back at the predicted positions, are the block's
    for sample in (first, later):
        restored = torch.where(sample["target"].ne(pad), sample["target"], sample["net_input"]["src_tokens"])
        original = torch.where(batch["target"].ne(pad), batch["target"], batch["net_input"]["src_tokens"])
        assert torch.equal(restored, original)
        chosen = (sample["target"] != pad).sum(dim=1)
        assert torch.equal(sample["mask_counts"][:, 0], chosen)


@pytest.mark.e2e
@pytest.mark.full  # one epoch of about 30 updates: about 30 s
def test_within_the_first_epoch_the_hardest_tag_is_masked_more(tmp_path):
    """One epoch, no earlier statistics, on text where one tag is hard: each line is sixteen fixed words (tags
    0 to 15, one each) with one word drawn from 30 in their middle (tag 16). Once training has scored the tags,
    tag 16 is predicted more often than its share of the text (the budget binds among about half the
    positions accepted; measured 1.71 over the epoch's second half). Drawn as before this change (the items'
    state: in epoch 1 the initial one) the lift would be 1 within noise: about 2,000 predicted positions there,
    110 of them tag 16's, put its standard error near 0.1, so the bound 1.3 lies 3 standard errors above 1 and
    4 below the measured lift."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    from fairseq_helpers import preprocess
    from fairseq_maskplug.data import write_side_info
    rng = np.random.default_rng(5)
    fixed = [f"f{i}" for i in range(16)]
    for split, n in (("train", 1500), ("valid", 40)):
        (tmp_path / f"{split}.txt").write_text("".join(
            " ".join(fixed[:8] + [f"r{rng.integers(30)}"] + fixed[8:]) + "\n" for _ in range(n)))
    data = preprocess(tmp_path / "bin", tmp_path / "train.txt", tmp_path / "valid.txt")
    symbols = ["<s>", "<pad>", "</s>", "<unk>"] + [l.split()[0] for l in (data / "dict.txt").read_text().splitlines()]
    tag_of = np.array([int(s[1:]) if s.startswith("f") else 16 if s.startswith("r") else 0 for s in symbols] + [0],
                      dtype=np.uint8)  # + <mask>
    for split in ("train", "valid"):
        tokens = MMapIndexedDataset(str(data / split))
        write_side_info(f"{data / split}.pos", [tag_of[tokens[i].numpy()] for i in range(len(tokens))], "uint8",
                        tokens_prefix=str(data / split))
    result = check(ptw_train(data, tmp_path / "ck", "--max-epoch", "1", "--batch-size", "16", "--log-interval", "2"))
    records = json_logs(result, "train_inner")
    assert len(records) >= 10
    lifts = [float(r["mask_top_group_lift"]) for r in records[len(records) // 2:]]
    assert np.mean(lifts) > 1.3, lifts
    state = task_state(tmp_path / "ck" / "checkpoint_last.pt")
    assert int(np.argmax(state["running"])) == 16  # the hard tag is the one training ranks highest
