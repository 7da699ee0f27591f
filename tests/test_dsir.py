"""DSIR (Xie et al. 2023): hashed n-gram features, the importance weights of Eq. 2 by hand, the
resampling distribution over many seeds, and fairseq-maskplug-select's outputs and refusals."""

import json
import os
import zlib
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from fairseq_maskplug.retrieval.dsir import (fit_distribution, hashed_ngrams, log_importance_weight, log_ratio,
                                             resample)
from preprocess.select_dsir import main as select_main


def bucket(gram, buckets):
    return zlib.crc32(gram.encode("utf-8")) % buckets


def test_features_are_the_lower_cased_word_punct_unigrams_and_bigrams():
    got = hashed_ngrams("The cat, sat!", buckets=1000, n=2)
    grams = ["the", "cat", ",", "sat", "!", "the cat", "cat ,", ", sat", "sat !"]
    assert got.tolist() == [bucket(g, 1000) for g in grams]
    assert hashed_ngrams("", 1000).size == 0 and hashed_ngrams("   ", 1000).size == 0
    assert hashed_ngrams("a b c", 7, n=1).tolist() == [bucket(g, 7) for g in "abc"]


def test_weights_follow_equation_2_by_hand():
    buckets = 50
    target = fit_distribution(["good film", "good acting"], buckets)
    raw = fit_distribution(["good film", "stock market", "market news today"], buckets)
    counts = np.zeros(buckets)
    for g in ["good", "film", "good film", "good", "acting", "good acting"]:
        counts[bucket(g, buckets)] += 1
    assert target == pytest.approx(counts / 6)
    ratio = log_ratio(target, raw)
    doc = "good market"
    expected = sum(np.log(target[bucket(g, buckets)] + 1e-8) - np.log(raw[bucket(g, buckets)] + 1e-8)
                   for g in ["good", "market", "good market"])
    assert log_importance_weight(doc, ratio) == pytest.approx(expected)
    assert log_importance_weight("good film", ratio) > log_importance_weight("stock market", ratio)
    with pytest.raises(ValueError, match="no n-gram"):
        fit_distribution(["", "  "], buckets)


def test_top_keeps_the_largest_weights_and_never_an_ineligible_document():
    weights = np.array([0.5, -np.inf, 2.0, 2.0, -1.0])
    assert resample(weights, 3, sample=False).tolist() == [2, 3, 0]  # ties: the lower index first
    rng = np.random.default_rng(0)
    assert all(1 not in resample(weights, 4, rng).tolist() for _ in range(200))
    with pytest.raises(ValueError, match="cannot choose 5 of 4"):
        resample(weights, 5, rng)


def test_resampling_draws_the_first_document_in_proportion_to_its_weight():
    """Gumbel top-k: the first draw is i with probability w_i / sum w (the Gumbel-max theorem), the
    second from the rest likewise. 20,000 seeded draws of each; chi-square at the 0.001 level (the
    test fails by chance once in a thousand runs at most; the seeds are fixed, so it is repeatable)."""
    w = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    logw = np.log(w)
    n = 20_000
    rng = np.random.default_rng(12345)
    first, second_after_4 = np.zeros(5), np.zeros(5)
    for _ in range(n):
        order = resample(logw, 2, rng)
        first[order[0]] += 1
        if order[0] == 4:
            second_after_4[order[1]] += 1
    assert stats.chisquare(first, n * w / w.sum()).pvalue > 1e-3
    rest = w[:4] / w[:4].sum()
    m = second_after_4.sum()
    assert second_after_4[4] == 0 and stats.chisquare(second_after_4[:4], m * rest).pvalue > 1e-3


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def topics(rng, n, words):
    return [" ".join(rng.choice(words, rng.integers(5, 12))) for _ in range(n)]


def test_select_writes_the_retrieve_layout_prefers_the_target_topic_and_is_seeded(tmp_path, capsys):
    rng = np.random.default_rng(0)
    reviews = ["film", "actor", "plot", "boring", "great", "scene", "director", "movie"]
    news = ["market", "stock", "minister", "election", "bank", "trade", "court", "police"]
    corpus_lines = topics(rng, 100, reviews) + topics(rng, 300, news)
    corpus = write(tmp_path / "corpus.txt", corpus_lines)
    target = write(tmp_path / "task.txt", topics(rng, 40, reviews))
    args = ["--corpus", str(corpus), "--target", str(target), "--num-docs", "50", "--buckets", "1000"]
    assert select_main(args + ["--out", str(tmp_path / "a")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["method"] == "dsir" and summary["documents_selected"] == 50
    out = tmp_path / "a"
    assert sorted(os.listdir(out)) == [".maskplug-output.json", "provenance.tsv", "retrieved.ids", "retrieved.txt",
                                       "summary.json"]
    ids = [int(x) for x in (out / "retrieved.ids").read_text().split()]
    assert ids == sorted(ids) and len(set(ids)) == 50  # corpus order, no repeats
    assert (out / "retrieved.txt").read_text().splitlines() == [corpus_lines[i] for i in ids]
    rows = [line.split("\t") for line in (out / "provenance.tsv").read_text().splitlines()]
    assert rows[0] == ["draw", "doc", "log_weight"] and [int(r[0]) for r in rows[1:]] == list(range(1, 51))
    assert sorted(int(r[1]) for r in rows[1:]) == ids
    assert sum(i < 100 for i in ids) >= 45  # the review documents (a quarter of the corpus) dominate
    # the same seed: the same selection; another seed: another one; --top: the largest weights
    assert select_main(args + ["--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "provenance.tsv").read_text() == (out / "provenance.tsv").read_text()
    assert select_main(args + ["--out", str(tmp_path / "c"), "--seed", "1"]) == 0
    assert (tmp_path / "c" / "provenance.tsv").read_text() != (out / "provenance.tsv").read_text()
    assert select_main(args + ["--out", str(tmp_path / "d"), "--top"]) == 0
    top = [float(r.split("\t")[2]) for r in (tmp_path / "d" / "provenance.tsv").read_text().splitlines()[1:]]
    assert top == sorted(top, reverse=True)
    assert select_main(args + ["--out", str(out)]) == 0  # its own earlier output is replaced


@pytest.mark.parametrize("case", ["too many", "empty target", "non-UTF-8 corpus", "foreign out"])
def test_select_refuses_before_writing_anything(tmp_path, capsys, case):
    corpus = write(tmp_path / "corpus.txt", ["a b", "c d", "", "e f"])
    target = write(tmp_path / "task.txt", ["a b"])
    out, num, expected = tmp_path / "out", "2", None
    if case == "too many":
        num, expected = "4", "--num-docs 4 exceeds the 3 documents"
    elif case == "empty target":
        target.write_text("")
        expected = f"{target}: the target file is empty"
    elif case == "non-UTF-8 corpus":
        corpus.write_bytes(b"a b\n\xff c\n")
        expected = f"{corpus}:2: not UTF-8"
    else:
        out.mkdir()
        (out / "mine.txt").write_text("keep")
        expected = "is a directory that it did not write"
    assert select_main(["--corpus", str(corpus), "--target", str(target), "--num-docs", num, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and expected in err[-1], err
    assert (not out.exists()) if case != "foreign out" else os.listdir(out) == ["mine.txt"]
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def select_outputs(out):
    return {name: (out / name).read_bytes() for name in ("provenance.tsv", "retrieved.txt", "retrieved.ids")}


def topic_corpus(tmp_path, seed, documents):
    rng = np.random.default_rng(seed)
    reviews = ["film", "actor", "plot", "boring", "great", "scene", "director", "movie"]
    news = ["market", "stock", "minister", "election", "bank", "trade", "court", "police"]
    corpus = write(tmp_path / "corpus.txt", topics(rng, documents // 4, reviews) + topics(rng, documents - documents // 4,
                                                                                          news))
    target = write(tmp_path / "task.txt", topics(rng, 40, reviews))
    return ["--corpus", str(corpus), "--target", str(target), "--num-docs", "50", "--buckets", "1000"]


def test_a_corpus_edited_after_the_document_shards_is_refused_at_the_merge(tmp_path, capsys):
    from preprocess import merge_shards

    args = topic_corpus(tmp_path, 5, 101)
    corpus = Path(args[args.index("--corpus") + 1])
    shard = ["--out", str(tmp_path / "k2"), "--num-shards", "2", "--shard-id"]
    for run in range(2):
        for i in ("0", "1"):
            assert select_main(args + shard + [i]) == 0
    stat = os.stat(corpus)
    text = corpus.read_text()
    corpus.write_text(text.replace(text[:5], "".join("z" if c.isalpha() else c for c in text[:5]), 1))
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    capsys.readouterr()
    assert merge_shards.main([str(tmp_path / "k2")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--corpus {corpus} changed after the document shards read it" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "k2").exists()


def test_select_in_shards_merged_is_the_one_process_output(tmp_path, capsys):
    """401 documents in 1, 2 and 3 shards (neither divides 401), each shard run twice as independent jobs (counts,
    then weights) and merged by merge-shards OUT: the one-process files byte for byte; a killed shard (its
    weights part missing) reruns alone; a part made with other options, a missing shard and a damaged part are
    refused in one line."""
    from preprocess import merge_shards

    args = topic_corpus(tmp_path, 5, 401)
    assert select_main(args + ["--out", str(tmp_path / "one")]) == 0
    whole = select_outputs(tmp_path / "one")
    assert select_main(args + ["--out", str(tmp_path / "k1"), "--num-shards", "1", "--shard-id", "0"]) == 0
    assert select_outputs(tmp_path / "k1") == whole
    for shards in (2, 3):
        capsys.readouterr()
        out = tmp_path / f"k{shards}"
        shard = ["--out", str(out), "--num-shards", str(shards), "--shard-id"]
        for run in range(2):
            for i in range(shards):
                assert select_main(args + shard + [str(i)]) == 0
        printed = capsys.readouterr().out
        assert "counts written; shard 1 has not written theirs" in printed or shards == 3
        assert f"merge-shards {out}" in printed and not out.exists()
        if shards == 3:  # shard 1 was killed before writing its weights: it reruns alone
            os.remove(f"{out}.shards/weights.shard1-of-3.json")
            assert merge_shards.main([str(out)]) == 2
            err = capsys.readouterr().err.strip()
            assert "shard 1 of 3 has not written its weights" in err and len(err.splitlines()) == 1
            assert select_main(args + shard + ["1"]) == 0
            assert "its counts are written already: skipped" in capsys.readouterr().out
        assert merge_shards.main([str(out)]) == 0
        assert select_outputs(out) == whole and not os.path.exists(f"{out}.shards")
    bad = ["--out", str(tmp_path / "bad"), "--num-shards", "2", "--shard-id"]
    assert select_main(args + bad + ["0"]) == 0
    assert select_main(args + ["--ngrams", "1"] + bad + ["0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "was made with other options or inputs" in err and len(err.splitlines()) == 1
    with open(tmp_path / "bad.shards" / "counts.shard0-of-2.bin", "r+b") as f:  # same length, other bytes
        f.seek(200)
        f.write(b"\x7f")
    assert select_main(args + bad + ["1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "other content" in err and "rerun shard 0" in err and len(err.splitlines()) == 1
    (tmp_path / "mine.shards").mkdir()
    (tmp_path / "mine.shards" / "notes.txt").write_text("not a part")  # a directory it did not make: never used
    assert select_main(args + ["--out", str(tmp_path / "mine"), "--num-shards", "2", "--shard-id", "0"]) == 2
    assert "was not made by fairseq-maskplug-select" in capsys.readouterr().err
    assert os.listdir(tmp_path / "mine.shards") == ["notes.txt"]


@pytest.mark.e2e
@pytest.mark.full
def test_two_torchrun_ranks_select_what_one_process_selects(tmp_path):
    from fairseq_helpers import BIN, check, run

    args = topic_corpus(tmp_path, 6, 301)
    check(run([BIN / "fairseq-maskplug-select", *args, "--out", tmp_path / "one"]))
    result = check(run([BIN / "torchrun", "--standalone", "--nproc-per-node", "2", BIN / "fairseq-maskplug-select",
                        *args, "--out", tmp_path / "ranks"], timeout=600))
    assert "shard 1 of 2" in result.stdout
    assert select_outputs(tmp_path / "ranks") == select_outputs(tmp_path / "one")
    assert not (tmp_path / "ranks.shards").exists()
