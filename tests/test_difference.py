"""Difference-Masking (Wilf et al. 2023): TF-ICF anchors, similarity to them, the weighted draw of the policy, and
the producer on a real checkpoint with a target domain that differs from the general corpus."""

import json
import shutil

import numpy as np
import pytest

from fairseq_helpers import BIN, CPU_RUN, TINY_ROBERTA, check, json_logs, run
from fairseq_maskplug.masking import build_mask_policy
from fairseq_maskplug.masking.difference import weighted_mask
from fairseq_maskplug.scoring.difference import anchor_similarity, anchors, tf_icf
from test_pll import trained  # noqa: F401  (the fixture: a tiny roberta trained on tiny_data)


def test_tf_icf_favours_what_is_frequent_here_and_rare_there():
    domain = np.array([0, 10, 10, 1, 0])
    general_lines = np.array([0, 100, 1, 1, 50])
    scores = tf_icf(domain, general_lines, 100)
    assert scores[1] == pytest.approx(10 / 21 * np.log(101 / 101))  # everywhere in the general corpus: 0
    assert scores[2] == pytest.approx(10 / 21 * np.log(101 / 2))
    assert anchors(scores, 2, domain > 0).tolist() == [2, 3]
    with pytest.raises(ValueError):
        anchors(scores, 1, np.zeros(5, dtype=bool))


def test_similarity_is_the_largest_cosine_to_an_anchor_clipped_at_zero():
    embeddings = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [-1.0, 0.0]])
    similarity = anchor_similarity(embeddings, np.array([0, 1]))
    assert similarity.tolist() == pytest.approx([1.0, 1.0, np.sqrt(0.5), 0.0])


def test_one_draw_picks_each_position_in_proportion_to_its_score():
    """With a budget of one token (rate 0.1 of 10 positions: floor(1 + U) = 1) each position is chosen with
    probability w_i / sum(w) (Efraimidis-Spirakis keys); over 4000 draws within 4 standard errors. A position
    of score 0 is never chosen while others remain."""
    weights = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    maskable = np.ones(10, dtype=bool)
    counts = np.zeros(10)
    for seed in range(4000):
        mask = weighted_mask(weights, maskable, 0.1, np.random.default_rng(seed))
        assert mask.sum() == 1
        counts += mask
    p = weights / weights.sum()
    assert np.all(np.abs(counts / 4000 - p) <= 4 * np.sqrt(p * (1 - p) / 4000) + 1e-12)
    assert counts[0] == 0


def test_the_policy_keeps_the_random_masking_count():
    policy = build_mask_policy("difference", {"difference_mask_prob": 0.25})
    side = {"difference_score": np.linspace(0, 1, 40)}
    maskable = np.ones(40, dtype=bool)
    for seed in range(20):
        assert policy.choose(np.arange(40), maskable, side, np.random.default_rng(seed)).sum() == 10  # 0.25 * 40


@pytest.fixture(scope="module")
def domain_data(tiny_data, tmp_path_factory):
    """A target domain whose lines are mostly words w0..w4, binarized with the tiny corpus's dictionary."""
    root = tmp_path_factory.mktemp("difference")
    rng = np.random.default_rng(5)
    for split, n in (("train", 200), ("valid", 30)):
        lines = [" ".join(f"w{i}" for i in np.where(rng.random(k) < 0.7, rng.integers(0, 5, k), rng.integers(0, 40, k)))
                 for k in rng.integers(4, 14, n)]
        (root / f"{split}.txt").write_text("\n".join(lines) + "\n")
    check(run([BIN / "fairseq-preprocess", "--only-source", "--srcdict", tiny_data / "bin" / "dict.txt",
               "--trainpref", root / "train.txt", "--validpref", root / "valid.txt", "--destdir", root / "bin",
               "--workers", "1"]))
    return root / "bin"


@pytest.mark.e2e
def test_producer_scores_the_domain_and_guided_mlm_trains_on_it(tiny_data, domain_data, trained, tmp_path, capsys):
    from fairseq_maskplug.data import SideInfoDataset
    from preprocess import difference

    checkpoint, _, _ = trained
    data = shutil.copytree(domain_data, tmp_path / "bin")
    assert difference.main(["--data", str(data), "--general", str(tiny_data / "bin"), "--checkpoint",
                            str(checkpoint), "--anchors", "3", "--write-anchors", str(tmp_path / "anchors.tsv")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(summary["anchors"]) == 3 and set(summary["anchors"]) <= {f"w{i}" for i in range(5)}
    assert len((tmp_path / "anchors.tsv").read_text().splitlines()) == 3
    track = SideInfoDataset(str(data / "train.difference_score"))
    values = np.concatenate([track[i].numpy() for i in range(len(track))])
    assert values.min() >= 0 and values.max() == pytest.approx(1.0)  # an anchor scores 1
    result = check(run([BIN / "fairseq-maskplug-train", data, "--task", "guided_mlm", "--mask-policy", "difference",
                        "--tokens-per-sample", "32", "--save-dir", tmp_path / "ck", "--max-update", "3",
                        *TINY_ROBERTA, *CPU_RUN]))
    rates = [float(r["mask_rate"]) for r in json_logs(result, "train_inner")]
    assert len(rates) == 3 and all(0.05 < r < 0.3 for r in rates)


@pytest.mark.e2e
def test_difference_in_shards_writes_the_one_process_tracks(tiny_data, domain_data, trained, tmp_path, capsys):
    """200 + 30 target lines and the tiny corpus's 300 general lines in blocks of 16, 2 shards run twice each as
    independent jobs (counts, then tracks), merged by merge-shards DATA: the one-process tracks byte for byte,
    the counts removed."""
    from preprocess import difference, merge_shards

    def tracks(data):
        return {p.name: p.read_bytes() for p in sorted(data.glob("*.difference_score.*")) if p.is_file()}

    checkpoint, _, _ = trained
    args = ["--general", str(tiny_data / "bin"), "--checkpoint", str(checkpoint), "--shard-block-lines", "16"]
    one = shutil.copytree(domain_data, tmp_path / "one")
    assert difference.main(["--data", str(one), *args]) == 0
    whole = tracks(one)
    assert len(whole) == 6
    data = shutil.copytree(domain_data, tmp_path / "shards")
    said = []
    for _ in range(2):
        for i in (0, 1):
            capsys.readouterr()
            assert difference.main(["--data", str(data), *args, "--num-shards", "2", "--shard-id", str(i)]) == 0
            said.append(capsys.readouterr().out)
    assert "token counts written; shard 1 has not written theirs" in said[0]
    assert "its token counts are written already: skipped" in said[2]
    assert json.loads(said[3].strip().splitlines()[-1])["anchors"] == json.loads(said[1].strip().splitlines()[-1])[
        "anchors"]
    assert merge_shards.main([str(data)]) == 0
    assert "removed the shards' counts" in capsys.readouterr().out
    assert tracks(data) == whole and not list(data.glob("*shard*"))


@pytest.mark.e2e
@pytest.mark.full
def test_two_torchrun_ranks_write_the_one_process_vocabulary_tracks(tiny_data, domain_data, trained, tmp_path):
    """informask and difference as two torchrun ranks (their counts exchanged at barriers, rank 0 merging): the
    one-process tracks byte for byte, no part left, no rank telling the user to merge."""
    checkpoint, _, _ = trained
    commands = {"informask": ("informask_rate", ["--shard-block-lines", "16"]),
                "difference": ("difference_score", ["--general", tiny_data / "bin", "--checkpoint", checkpoint,
                                                    "--shard-block-lines", "16"])}
    for command, (name, args) in commands.items():
        one, ranks = (shutil.copytree(domain_data, tmp_path / f"{command}_{k}") for k in ("one", "ranks"))
        check(run([BIN / f"fairseq-maskplug-{command}", "--data", one, *args]))
        result = check(run([BIN / "torchrun", "--standalone", "--nproc-per-node", "2",
                            BIN / f"fairseq-maskplug-{command}", "--data", ranks, *args], timeout=600))
        assert "merged 2 shards" in result.stdout and "fairseq-maskplug-merge-shards" not in result.stdout

        def tracks(data):
            return {p.name: p.read_bytes() for p in sorted(data.glob(f"*.{name}.*")) if p.is_file()}
        assert len(tracks(one)) == 6 and tracks(ranks) == tracks(one) and not list(ranks.glob("*shard*"))


def test_producer_refuses_a_general_corpus_of_another_dictionary(domain_data, tmp_path, capsys):
    from preprocess import difference

    other = tmp_path / "other"
    other.mkdir()
    (other / "dict.txt").write_text("x 1\ny 1\n")
    assert difference.main(["--data", str(domain_data), "--general", str(other), "--checkpoint", "none.pt",
                            "--name", "x"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "dict.txt differs" in err
    assert not (domain_data / "train.x.bin").exists()


def test_no_anchor_without_a_positive_tf_icf_and_fewer_when_fewer_are_positive():
    scores = tf_icf(np.array([0, 5, 5]), np.array([0, 10, 10]), 10)  # both entries in every general line
    with pytest.raises(ValueError, match="no entry of the target domain has a positive TF-ICF"):
        anchors(scores, 2, np.array([False, True, True]))
    scores = tf_icf(np.array([0, 5, 5]), np.array([0, 10, 3]), 10)
    assert anchors(scores, 5, np.array([False, True, True])).tolist() == [2]


@pytest.mark.e2e
def test_a_general_corpus_that_is_the_target_warns_and_one_repeated_line_is_refused(tiny_data, domain_data, trained,
                                                                                    tmp_path, capsys):
    """The fault round's BAD case: exit 0 with anchors of TF-ICF 0 (the first entries of dict.txt) and no warning."""
    from preprocess import difference

    checkpoint, _, _ = trained
    data = shutil.copytree(domain_data, tmp_path / "bin")
    assert difference.main(["--data", str(data), "--general", str(data), "--checkpoint", str(checkpoint),
                            "--anchors", "3"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert any("holds the same tokens as the target's train" in w for w in summary["warnings"]), summary
    repeated = tmp_path / "repeated"
    repeated.mkdir()
    for split in ("train", "valid"):
        (repeated / f"{split}.txt").write_text("w1 w2 w3\n" * 20)
    check(run([BIN / "fairseq-preprocess", "--only-source", "--srcdict", tiny_data / "bin" / "dict.txt",
               "--trainpref", repeated / "train.txt", "--validpref", repeated / "valid.txt", "--destdir",
               repeated / "bin", "--workers", "1"]))
    assert difference.main(["--data", str(repeated / "bin"), "--general", str(repeated / "bin"), "--checkpoint",
                            str(checkpoint)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no entry of the target domain has a positive TF-ICF" in err[0]
    assert not list((repeated / "bin").glob("*.difference_score.*"))


def test_rank_weighting_draws_each_position_in_proportion_to_its_rank():
    """--difference-weighting rank (the authors' code): with a budget of one token, position r of n by score is
    chosen with probability proportional to n - r + 1 (mixed with uniform at --difference-uniform-mix), tied
    positions with the mean of their ranks' weights (ties in a random order: by position, the earlier of two
    tied positions was always ranked first); a chi-square goodness-of-fit test over 4000 draws at the 0.001
    level. A score of 0 is no longer never chosen."""
    from scipy.stats import chisquare

    from fairseq_maskplug.masking.difference import rank_weights

    scores = np.array([0.0, 0.9, 0.2, 0.9, 0.5, 0.1, 0.0, 0.7, 0.3, 0.6])
    maskable = np.ones(10, dtype=bool)
    maskable[6] = False
    weights = rank_weights(scores, maskable, 0.0, np.random.default_rng(0))
    assert weights[6] == 0 and weights.sum() == pytest.approx(1.0)
    assert sorted(weights[[1, 3]]) == pytest.approx([8 / 45, 9 / 45]) and weights[0] == pytest.approx(1 / 45)
    first = [rank_weights(scores, maskable, 0.0, np.random.default_rng(seed))[1] == weights.max() for seed in
             range(400)]
    assert 0.4 < np.mean(first) < 0.6  # either tied position ranked first, half the time (4.9 standard errors)
    weights[[1, 3]] = 8.5 / 45  # what a draw sees on average
    mixed = rank_weights(scores, maskable, 0.5, np.random.default_rng(0))
    assert mixed[0] == pytest.approx(0.5 / 45 + 0.5 / 9)
    mixed[[1, 3]] = 0.5 * 8.5 / 45 + 0.5 / 9
    for mix, expected in ((0.0, weights), (0.5, mixed)):
        policy = build_mask_policy("difference", {"difference_mask_prob": 1 / 9, "difference_weighting": "rank",
                                                  "difference_uniform_mix": mix})
        counts = np.zeros(10)
        for seed in range(4000):
            mask = policy.choose(np.arange(10), maskable, {"difference_score": scores}, np.random.default_rng(seed))
            assert mask.sum() == 1 and not mask[6]
            counts += mask
        keep = maskable
        assert chisquare(counts[keep], 4000 * expected[keep])[1] > 0.001, (mix, counts)
    with pytest.raises(ValueError, match="--difference-weighting must be one of"):
        build_mask_policy("difference", {"difference_weighting": "nope"})


@pytest.mark.e2e
@pytest.mark.full
def test_difference_writes_what_the_code_before_issue_54_wrote(tiny_data, domain_data, trained, tmp_path):
    from fairseq_helpers import run_producer_before, written_files

    checkpoint, _, _ = trained
    args = ["--general", tiny_data / "bin", "--checkpoint", checkpoint, "--anchors", "3"]
    now, before = (shutil.copytree(domain_data, tmp_path / when) for when in ("now", "before"))
    check(run([BIN / "python", "-m", "preprocess.difference", "--data", now, *args]))
    run_producer_before(tmp_path, "difference", "--data", before, *args)
    def written(data):
        return written_files(data, "*.difference_score.*")

    assert len(written(now)) == 6 and written(now) == written(before)


def authors_draw(word_sims, word_pieces, prob, rng):
    """A reimplementation of the authors' draw (``get_masked_indices`` in ``Unimodal/AANG/AutoSearchSpace/data.py``,
    for a sentence of distinct words): the words by descending similarity, every piece of the word ranked r (from
    0) weighing ``words - r``, then ``int(T * prob)`` single pieces drawn without replacement in proportion."""
    indices, weights = [], []
    order = np.argsort(-np.asarray(word_sims))
    for rank, word in enumerate(order):
        indices += word_pieces[word]
        weights += [len(order) - rank] * len(word_pieces[word])
    weights = np.asarray(weights, dtype=np.float64) / sum(weights)
    total = sum(len(pieces) for pieces in word_pieces)
    return np.asarray(indices)[rng.choice(len(indices), size=int(total * prob), replace=False, p=weights)]


def test_rank_ranks_words_and_draws_their_pieces_as_the_authors_sampler():
    """--difference-weighting rank on pieces (--mask-unit token): words ranked by their best piece, each piece
    drawn with its word's weight, three pieces of fifteen. Over 6000 draws each, the pieces' inclusion counts
    agree with the authors' sampler (chi-square test of homogeneity at the 0.001 level), and the earlier rule
    (each piece ranked by its own score) is told apart from it by the same test."""
    from scipy.stats import chi2_contingency

    from fairseq_maskplug.masking.words import with_words

    piece_scores = [[0.9, 0.05, 0.02], [0.5], [0.4, 0.45], [0.1], [0.3, 0.01], [0.2, 0.03, 0.04], [0.6], [0.7, 0.06]]
    word_pieces, position = [], 0
    for pieces in piece_scores:
        word_pieces.append(list(range(position, position + len(pieces))))
        position += len(pieces)
    scores = np.array([s for pieces in piece_scores for s in pieces])
    start_symbols = np.zeros(300, dtype=bool)
    start_symbols[100:200] = True
    tokens = np.array([100 + w if i == 0 else 200 + i for w, pieces in enumerate(piece_scores)
                       for i, _ in enumerate(pieces)])  # 100-199 start a word
    maskable = np.ones(len(tokens), dtype=bool)
    options = {"difference_weighting": "rank", "difference_mask_prob": 0.2}
    policy = with_words(build_mask_policy("difference", options), "token", lambda: start_symbols)
    draws = 6000
    ours, authors, earlier = np.zeros(len(tokens)), np.zeros(len(tokens)), np.zeros(len(tokens))
    for seed in range(draws):
        mask = policy.choose(tokens, maskable, {"difference_score": scores}, np.random.default_rng(seed))
        assert mask.sum() == 3
        ours += mask
        word_sims = [max(pieces) for pieces in piece_scores]
        authors[authors_draw(word_sims, word_pieces, 0.2, np.random.default_rng(seed + draws))] += 1
        earlier += build_mask_policy("difference", options).choose(tokens, maskable, {"difference_score": scores},
                                                                    np.random.default_rng(seed))
    assert chi2_contingency([ours, authors])[1] > 0.001, (ours, authors)
    assert chi2_contingency([earlier, authors])[1] < 0.001, (earlier, authors)
