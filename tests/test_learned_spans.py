"""Learned span policies (Ye, Li et al. 2021, "+Supervised"): the span distribution and the
learned_span policy (layer 1), answer labels from character offsets, and the supervised
policy trained by real fairseq-train on a planted rule, applied by score_spans."""

import shutil

import numpy as np
import torch
import pytest
from fairseq.data import Dictionary
from fairseq.data.indexed_dataset import MMapIndexedDataset

from fairseq_helpers import (BIN, CPU_RUN, HALF_PRECISION, TINY_ROBERTA, assert_half_precision_run, assert_same_params,
                             build_in_process, check, json_logs, run)
from fairseq_maskplug.tools.binarize import encode, train_sentencepiece, write_fairseq_dict, write_lines
from fairseq_maskplug.data import load_side_info
from fairseq_maskplug.masking import build_mask_policy
from fairseq_maskplug.masking.learned_span import candidate_spans, choose_learned_spans, span_distribution
from fairseq_maskplug.scoring.alignment import TokenSurfaces, line_text
from fairseq_maskplug.data.answer_labels import END, START, answer_positions, label_row
from fairseq_maskplug.scoring.span_labels import answer_tokens

# ---- layer 1: the span distribution -----------------------------------------------------------


def brute_force(start, end, maskable, max_length):
    """Every (i, j) with i <= j, j - i < max_length and all of i..j maskable, by enumeration."""
    n = len(maskable)
    return {(i, j) for i in range(n) for j in range(i, min(n, i + max_length)) if all(maskable[i:j + 1])}


@pytest.mark.parametrize("seed", range(20))
def test_span_distribution_sums_to_one_over_exactly_the_allowed_spans(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    maskable = rng.random(n) < 0.8  # the False positions play </s> between sentences and <s>
    start, end = rng.normal(size=n) * 3, rng.normal(size=n) * 3
    max_length = int(rng.integers(1, 6))
    spans, p = span_distribution(start, end, maskable, max_length)
    assert {tuple(s) for s in spans.tolist()} == brute_force(start, end, maskable, max_length)
    assert len({tuple(s) for s in spans.tolist()}) == len(spans)  # no candidate twice
    if len(spans):
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
        scores = start[spans[:, 0]] + end[spans[:, 1]]
        # the softmax: probability ratios are exp(score differences)
        np.testing.assert_allclose(np.log(p) - np.log(p[0]), scores - scores[0], atol=1e-9)
        assert (spans[:, 1] - spans[:, 0] < max_length).all()
        assert all(maskable[i:j + 1].all() for i, j in spans)


def test_no_span_crosses_a_sentence_end_or_special_token():
    maskable = np.array([False, True, True, False, True, True, True, False])  # <s> a b </s> c d e </s>
    spans = candidate_spans(maskable, 10)
    assert {tuple(s) for s in spans.tolist()} == {(1, 1), (2, 2), (1, 2), (4, 4), (5, 5), (6, 6), (4, 5), (5, 6),
                                                 (4, 6)}


def test_top1_is_the_argmax_and_ignores_the_generator():
    start = np.array([0.0, 5.0, 0.0, 0.0, 1.0, 0.0])
    end = np.array([0.0, 0.0, 0.0, 4.0, 0.0, 0.0])
    maskable = np.array([False, True, True, True, True, False])
    assert choose_learned_spans(start, end, maskable, 3, 1, 0.0, None) == [(1, 3)]
    # (1, 3) is too long at 2; (1, 1) and (1, 2) tie at 5: the shorter wins
    assert choose_learned_spans(start, end, maskable, 2, 1, 0.0, None) == [(1, 1)]
    # a second span never overlaps the first: the best disjoint one is (4, 4)
    assert choose_learned_spans(start, end, maskable, 3, 2, 0.0, None) == [(1, 3), (4, 4)]


def test_sampling_is_deterministic_per_generator_seed_and_follows_the_distribution():
    rng0 = np.random.default_rng(0)
    start, end = rng0.normal(size=12), rng0.normal(size=12)
    maskable = np.ones(12, dtype=bool)
    maskable[[0, 6, 11]] = False
    draw = lambda seed: choose_learned_spans(start, end, maskable, 4, 1, 1.0, np.random.default_rng(seed))  # noqa: E731
    assert draw(7) == draw(7)
    assert len({tuple(draw(s)[0]) for s in range(50)}) > 1  # sampling, not the arg-max
    # frequencies over many seeds match P within 4.5 binomial standard deviations per span
    spans, p = span_distribution(start, end, maskable, 4)
    n = 4000
    counts = {}
    for s in range(n):
        (i, j), = draw(s)
        counts[(i, j)] = counts.get((i, j), 0) + 1
    for (i, j), prob in zip(spans.tolist(), p):
        sd = np.sqrt(n * prob * (1 - prob))
        assert abs(counts.get((i, j), 0) - n * prob) <= 4.5 * sd + 1, (i, j)


def learned_cfg(**overrides):
    from types import SimpleNamespace
    values = {"learned_start_track": "s", "learned_end_track": "e", "learned_max_length": 3, "learned_spans": 1,
              "learned_temperature": 0.0}
    return SimpleNamespace(**{**values, **overrides})


def test_learned_span_policy_masks_the_chosen_spans_and_validates_options():
    policy = build_mask_policy("learned_span", learned_cfg(learned_spans=2))
    assert policy.chooses_spans and policy.side_info_names == ("s", "e")
    tokens = np.arange(6)
    maskable = np.array([False, True, True, True, True, False])
    side = {"s": np.array([0.0, 5.0, 0.0, 0.0, 1.0, 0.0]), "e": np.array([0.0, 0.0, 0.0, 4.0, 0.0, 0.0])}
    mask = policy.choose(tokens, maskable, side, np.random.default_rng(0))
    assert mask.tolist() == [False, True, True, True, True, False]
    for bad in ({"learned_max_length": 0}, {"learned_spans": 0}, {"learned_temperature": -1.0}):
        with pytest.raises(ValueError):
            build_mask_policy("learned_span", learned_cfg(**bad))


# ---- answer labels from character offsets -------------------------------------------------------

@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("spm_rule")
    model = train_sentencepiece(rule_sentences(3000, 0), root / "spm", 69)
    return root, model


@pytest.mark.parametrize("task, option, field", [("span_policy", "--answer-max-length", "answer_max_length"),
                                                 ("meta_span_policy", "--candidate-max-length", "candidate_max_length")])
def test_the_span_tasks_length_options_share_no_name_with_a_policy_option(task, option, field):
    """--span-max-length is the span policy's longest span; these tasks' limits once took it as an alias, so one
    flag meant two things. It is theirs no more: the tasks refuse it (argparse, before any work)."""
    from fairseq import options

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["data", "--task", task, "--arch", "roberta_tiny", option, "4"])
    assert getattr(args, field) == 4 and not hasattr(args, "span_max_length")
    with pytest.raises(SystemExit):
        options.parse_args_and_arch(options.get_training_parser(),
                                    ["data", "--task", task, "--arch", "roberta_tiny", "--span-max-length", "4"])


def test_answer_labels_from_character_offsets(spm_model):
    root, model = spm_model
    texts = ["the song was written by Zorbalina in the city", "Zorbalina sang"]
    encoded = encode(model, texts, "labels")
    write_fairseq_dict(model, encoded, root / "dict_labels.txt")
    d = Dictionary.load(str(root / "dict_labels.txt"))
    surfaces = TokenSurfaces.from_dictionary(d, "sentencepiece")
    for text, tok in zip(texts, encoded):
        ids = d.encode_line(tok, add_if_not_exist=False, append_eos=True).numpy()
        spelled, ranges = line_text(surfaces, ids, text)
        start = text.index("Zorbalina")
        first, last = answer_tokens(spelled, ranges, start, start + len("Zorbalina"))
        symbols = tok.split()
        assert "".join(symbols[first:last + 1]).replace("\u2581", "") == "Zorbalina"
        assert first == 0 or not symbols[first - 1].endswith("Zorbalina")
        row = label_row(len(ids), first, last)
        assert answer_positions(row) == (first, last)
        assert row[first] & START and row[last] & END and row.sum() == START + END
    with pytest.raises(ValueError, match="whitespace"):
        answer_tokens("a  b", np.array([[0, 1], [1, 3], [3, 4]]), 1, 2)
    with pytest.raises(ValueError, match="ends after"):
        answer_tokens("ab", np.array([[0, 2]]), 0, 5)
    with pytest.raises(ValueError):
        answer_positions(np.array([0, 1, 0, 1, 2]))  # two starts


# ---- the supervised policy learns a planted rule ------------------------------------------------

NAMES = ["Zorbalina", "Quentaro", "Mirvelle", "Tobrecht", "Ansolde", "Kelvaris", "Drumond", "Pelagia",
         "Ostrava", "Bellamir", "Corvinus", "Feltrane"]
WORDS = ["the", "a", "song", "book", "was", "written", "made", "seen", "old", "new", "in", "on", "at", "river",
         "house", "city", "near", "with", "and", "then", "later", "story"]


def rule_sentences(n, seed, with_answers=False):
    """Lines with one "by <Name>" (the answer) and other capitalised names not after "by",
    plus "by" before lower-case words: only the capitalised word after "by" is the answer."""
    rng = np.random.default_rng(seed)
    lines, answers = [], []
    for _ in range(n):
        words = list(rng.choice(WORDS, size=int(rng.integers(6, 14))))
        for _ in range(int(rng.integers(1, 3))):  # distractors: names elsewhere, "by" before plain words
            words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(NAMES)))
        words.insert(int(rng.integers(0, len(words) + 1)), "by " + str(rng.choice(WORDS)))
        position = int(rng.integers(0, len(words) + 1))
        answer = str(rng.choice(NAMES))
        words.insert(position, "by " + answer)
        text = " ".join(words)
        # the answer follows the "by " at the inserted position
        offset = len(" ".join(words[:position])) + (1 if position else 0) + 3
        assert text[offset:offset + len(answer)] == answer
        lines.append(text)
        answers.append(f"{offset} {offset + len(answer)}")
    return (lines, answers) if with_answers else lines


@pytest.fixture(scope="module")
def rule_data(spm_model, tmp_path_factory):
    """3000 train, 100 valid and 200 test planted-rule contexts, binarized, with the answers' span labels
    on train and valid; returns the directory and the test split's lines and answers."""
    _, model = spm_model
    root = tmp_path_factory.mktemp("rule")
    splits = {"train": rule_sentences(3000, 1, True), "valid": rule_sentences(100, 2, True),
              "test": rule_sentences(200, 3, True)}
    encoded = {split: encode(model, lines, split) for split, (lines, _) in splits.items()}
    write_fairseq_dict(model, encoded["train"], root / "dict.txt")
    for split, (lines, answers) in splits.items():
        write_lines(root / f"{split}.txt", lines)
        write_lines(root / f"{split}.answers", answers)
        write_lines(root / f"{split}.tok", encoded[split])
    check(run([BIN / "fairseq-preprocess", "--only-source", "--srcdict", root / "dict.txt", "--trainpref",
               root / "train.tok", "--validpref", root / "valid.tok", "--testpref", root / "test.tok",
               "--destdir", root / "bin", "--workers", "1"]))
    for split in ("train", "valid"):
        check(run([BIN / "fairseq-maskplug-span-labels", "--data", root / "bin", "--split", split,
                   "--text", root / f"{split}.txt", "--answers", root / f"{split}.answers"]))
    return root, splits["test"]


@pytest.fixture(scope="module")
def rule_policy(rule_data):
    """A span_policy trained on the 3000 planted-rule contexts; held-out contexts scored by score_spans.
    (Measured once: the tiny encoder finds the rule after about 450 updates, from 45% valid
    span_em, the level of guessing between the two names, to 96% at 1200.)"""
    root, test = rule_data
    trained = check(run([BIN / "fairseq-maskplug-train", root / "bin", "--task", "span_policy", "--arch",
                         "roberta_tiny", "--encoder-layers", "2", "--encoder-embed-dim", "64",
                         "--encoder-ffn-embed-dim", "128",
                         "--tokens-per-sample", "64", "--save-dir", root / "ckpt", "--max-update", "1200",
                         "--no-epoch-checkpoints", "--dropout", "0.0", *CPU_RUN, "--batch-size", "32",
                         "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "100", "--log-interval", "200"]))
    scored = check(run([BIN / "fairseq-maskplug-score-spans", "--checkpoint", root / "ckpt" / "checkpoint_last.pt",
                        "--data", root / "bin", "--splits", "test"]))
    return root, trained, scored, test


@pytest.mark.e2e
@pytest.mark.full
def test_supervised_policy_learns_the_planted_rule_on_held_out_text(rule_policy):
    root, trained, scored, (lines, answers) = rule_policy
    valid = json_logs(trained, "valid")[-1]
    assert float(valid["valid_span_em"]) > 80.0, valid
    d = Dictionary.load(str(root / "bin" / "dict.txt"))
    surfaces = TokenSurfaces.from_dictionary(d, "sentencepiece")
    tokens = MMapIndexedDataset(str(root / "bin" / "test"))
    starts = load_side_info(str(root / "bin" / "test"), "span_start", tokens, "test")
    ends = load_side_info(str(root / "bin" / "test"), "span_end", tokens, "test")
    right = 0
    for k, (line, answer) in enumerate(zip(lines, answers)):
        ids = tokens[k].numpy()
        text, ranges = line_text(surfaces, ids, line)
        gold = answer_tokens(text, ranges, *map(int, answer.split()))
        maskable = ids != d.eos()
        right += choose_learned_spans(starts[k], ends[k], maskable, 10, 1, 0.0, None) == [gold]
    # a planted rule a 2-layer encoder can read exactly: at least 90 of 100 held-out answers
    assert right / len(lines) >= 0.9, f"{right} of {len(lines)} top-1 spans are the answer"
    assert "top-1 spans hold" in scored.stdout
    preview = (root / "bin" / "test.span_start.preview.txt").read_text().splitlines()
    assert len(preview) == len(lines) and sum("by [" in line for line in preview) >= 0.9 * len(lines)


@pytest.mark.e2e
@pytest.mark.full
def test_score_spans_in_shards_merges_into_the_one_process_tracks(rule_policy, tmp_path):
    root = rule_policy[0]
    scores = ["--checkpoint", root / "ckpt" / "checkpoint_last.pt", "--splits", "test", "--shard-block-lines", "64"]

    def tracks(data):
        return {p.name: p.read_bytes() for p in sorted(data.glob("test.span_*")) if "preview" not in p.name}

    one = shutil.copytree(root / "bin", tmp_path / "one", ignore=shutil.ignore_patterns("test.span_*"))
    check(run([BIN / "fairseq-maskplug-score-spans", "--data", one, *scores]))
    whole = tracks(one)
    assert len(whole) == 6  # start and end: .bin, .idx, .json
    for shards in (2, 3):  # 200 lines: 4 blocks of 64, which 3 shards do not divide
        data = shutil.copytree(one, tmp_path / f"shards{shards}", ignore=shutil.ignore_patterns("test.span_*"))
        for shard in range(shards):
            check(run([BIN / "fairseq-maskplug-score-spans", "--data", data, *scores, "--num-shards", shards,
                       "--shard-id", shard]))
        rerun = check(run([BIN / "fairseq-maskplug-score-spans", "--data", data, *scores, "--num-shards", shards,
                           "--shard-id", 1]))
        assert "is already written: skipped" in rerun.stdout
        check(run([BIN / "fairseq-maskplug-merge-shards", data]))
        assert tracks(data) == whole and not list(data.glob("*shard*"))


@pytest.mark.e2e
def test_span_policy_refuses_a_context_whose_answer_was_cut(rule_data, tmp_path):
    root = rule_data[0]
    result = run([BIN / "fairseq-maskplug-train", root / "bin", "--task", "span_policy", "--arch", "roberta_tiny",
                  "--tokens-per-sample", "8", "--save-dir", tmp_path, "--max-update", "1", *CPU_RUN])
    assert result.returncode != 0
    assert "start and" in result.stderr and "--tokens-per-sample" in result.stderr


def test_show_examples_prints_the_answer_positions_of_span_policy_items_as_tokens(rule_data):
    """The target of a span_policy item is [start, end] of the answer: shown with the tokens it spans
    (they were decoded as dictionary symbols 4 and 5 before), which are the answer's text."""
    root = rule_data[0]
    result = check(run([BIN / "fairseq-maskplug-show-examples", root / "bin", "--task", "span_policy",
                        "--tokens-per-sample", "64", "--split", "valid", "-n", "4", "--post-process",
                        "sentencepiece"]))
    lines, answers = rule_sentences(100, 2, True)
    shown = [line for line in result.stdout.splitlines() if line.startswith("  answer: ")]
    assert len(shown) == 4, result.stdout
    for k, line in enumerate(shown):
        start, end = map(int, answers[k].split())
        positions, text = line[len("  answer: tokens "):].split(": ", 1)
        first, last = map(int, positions.split(".."))
        assert 0 < first <= last and text == lines[k][start:end], (line, lines[k][start:end])


def test_score_spans_refuses_a_checkpoint_of_another_kind(rule_data, tmp_path):
    root = rule_data[0]
    result = run([BIN / "fairseq-maskplug-score-spans", "--checkpoint", tmp_path / "missing.pt", "--data", root / "bin",
                  "--splits", "test"])
    assert result.returncode == 2 and "checkpoint not found" in result.stderr


def span_policy_args(root, save, *extra):
    return [root / "bin", "--task", "span_policy", "--tokens-per-sample", "64", "--save-dir", save,
            "--no-epoch-checkpoints", *TINY_ROBERTA, *CPU_RUN, *extra]


@pytest.mark.e2e
def test_span_policy_resumes_exactly_and_reaches_every_parameter(rule_data, tmp_path):
    from test_data_parallel import without_gradient

    root = rule_data[0]

    def train_(save, *extra):
        return check(run([BIN / "fairseq-maskplug-train", *span_policy_args(root, save, *extra)]))

    train_(tmp_path / "full", "--max-update", "4")
    train_(tmp_path / "resumed", "--max-update", "2")
    resumed = train_(tmp_path / "resumed", "--max-update", "4")
    assert [int(r["num_updates"]) for r in json_logs(resumed, "train_inner")] == [3, 4]
    assert_same_params(tmp_path / "full" / "checkpoint_last.pt", tmp_path / "resumed" / "checkpoint_last.pt")
    task, model, criterion, optimizer, _ = build_in_process([*span_policy_args(root, tmp_path / "ip"),
                                                             "--criterion", "span_policy"])
    dataset = task.dataset("train")
    optimizer.zero_grad()
    task.train_step(dataset.collater([dataset[i] for i in range(8)]), model, criterion, optimizer, update_num=0)
    assert without_gradient(model) == []


@pytest.mark.e2e
@pytest.mark.full
def test_span_policy_trains_on_two_workers(rule_data, tmp_path):
    from test_data_parallel import SINGLE, torchrun

    args = span_policy_args(rule_data[0], tmp_path / "ddp", "--max-update", "2")
    at = args.index("--cpu")
    result = check(torchrun(*args[:at], *SINGLE, *args[at + len(CPU_RUN):]))
    assert "'distributed_world_size': 2" in result.stdout + result.stderr
    assert [int(r["num_updates"]) for r in json_logs(result, "train_inner")] == [1, 2]


@pytest.mark.e2e
@pytest.mark.full
def test_learned_span_masks_the_scored_spans_in_guided_mlm_and_guided_denoising(rule_policy, tmp_path):
    """The policy, reading the tracks score_spans wrote, in both policy tasks of real fairseq-train:
    one top-1 span per line of one or two tokens, so the realised mask rate is small but never 0."""
    root = rule_policy[0]
    common = ["--mask-policy", "learned_span", "--train-subset", "test", "--valid-subset", "test",
              "--sample-break-mode", "eos", "--tokens-per-sample", "64", "--max-update", "2", "--no-epoch-checkpoints",
              *CPU_RUN]
    mlm = check(run([BIN / "fairseq-maskplug-train", root / "bin", "--task", "guided_mlm", *TINY_ROBERTA,
                     "--save-dir", tmp_path / "mlm", *common]))
    denoise = check(run([BIN / "fairseq-maskplug-train", root / "bin", "--task", "guided_denoising", "--arch",
                         "bart_tiny", "--max-source-positions", "64", "--max-target-positions", "64",
                         "--save-dir", tmp_path / "denoise", *common]))
    for result in (mlm, denoise):
        for step in json_logs(result, "train_inner"):
            assert 0 < float(step["mask_rate"]) < 0.2, step
            assert float(step["masks_per_seq"]) == 1.0 and float(step["seq_unmasked"]) == 0.0, step


def test_later_spans_follow_the_scores_when_their_probabilities_underflow():
    """After a span scoring 1000 above the rest was chosen, every other candidate's probability was 0
    in float64: top-1 took the first free candidate (0, 0) instead of the best, sampling divided 0 by 0."""
    maskable = np.ones(5, dtype=bool)
    start, end = np.array([0.0, 1000.0, 0.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 5.0, 0.0])
    assert choose_learned_spans(start, end, maskable, 1, 2, 0.0, None) == [(1, 1), (3, 3)]
    for seed in range(20):
        rng = np.random.default_rng(seed)
        chosen = choose_learned_spans(start, end, maskable, 1, 2, 1.0, rng)
        # second draw: softmax over the free spans (0,0), (2,2), (3,3), (4,4) with scores 0, 0, 5, 0
        assert chosen[0] == (1, 1) and chosen[1] in [(0, 0), (2, 2), (3, 3), (4, 4)]
    draws = [choose_learned_spans(start, end, maskable, 1, 2, 1.0, np.random.default_rng(s))[1] for s in range(400)]
    share = sum(d == (3, 3) for d in draws) / len(draws)
    p = np.exp(5) / (np.exp(5) + 3)  # 0.980; 400 draws: sd 0.007, the bound is 5 sd
    assert abs(share - p) < 5 * np.sqrt(p * (1 - p) / len(draws)), share


def test_sentencepiece_post_processing_joins_pieces_into_words(rule_data):
    """The condition was inverted: `adds gr it ( a child mol est er` for "adds grit (a child molester"."""
    from fairseq_maskplug.evaluation.examples import render

    d = Dictionary.load(str(rule_data[0] / "bin" / "dict.txt"))
    tokens = MMapIndexedDataset(str(rule_data[0] / "bin" / "valid"))
    lines = rule_sentences(100, 2, True)[0]
    for k in range(5):
        assert render(tokens[k], d, "sentencepiece", False) == lines[k] + " </s>"
    ids = torch.tensor([d.bos(), *tokens[0][:3].tolist(), d.index("<mask>") if "<mask>" in d.indices else d.unk()])
    assert render(ids, d, "sentencepiece", False).startswith("<s> ")


@pytest.mark.e2e
def test_span_policy_trains_in_half_precision_with_a_settling_loss_scale(rule_data, tmp_path):
    assert_half_precision_run(run([BIN / "fairseq-maskplug-train", *span_policy_args(rule_data[0], tmp_path / "ck"),
                                   "--max-update", "8", *HALF_PRECISION]), 8)


@pytest.mark.e2e
@pytest.mark.full
def test_score_spans_writes_what_the_code_before_issue_54_wrote(rule_policy, tmp_path):
    from fairseq_helpers import run_producer_before, written_files

    root = rule_policy[0]
    scores = ["--checkpoint", root / "ckpt" / "checkpoint_last.pt", "--splits", "test"]
    now, before = (shutil.copytree(root / "bin", tmp_path / when, ignore=shutil.ignore_patterns("test.span_*"))
                   for when in ("now", "before"))
    check(run([BIN / "fairseq-maskplug-score-spans", "--data", now, *scores]))
    run_producer_before(tmp_path, "score_spans", "--data", before, *scores)
    written = written_files(now, "test.span_*")
    assert len(written) >= 6 and written == written_files(before, "test.span_*")


def test_the_candidates_are_every_maskable_span_up_to_the_longest_by_length_then_start():
    """The grid of :func:`candidate_spans` against the definition, spelled as loops, on random blocks."""
    rng = np.random.default_rng(3)
    for _ in range(500):
        n = int(rng.integers(0, 30))
        maskable = rng.random(n) < rng.uniform(0.3, 1.0)
        longest = int(rng.integers(1, 40))
        expected = [(i, i + width - 1) for width in range(1, longest + 1) for i in range(n - width + 1)
                    if maskable[i:i + width].all()]
        spans = candidate_spans(maskable, longest)
        assert spans.dtype == np.int64 and spans.shape == (len(expected), 2)
        assert [tuple(s) for s in spans.tolist()] == expected
