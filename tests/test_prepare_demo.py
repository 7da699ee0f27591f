"""The demo-data parsing, splitting and atomic output (no download: inputs are made here)."""

import numpy as np
import pytest
from sklearn.metrics import f1_score

from fairseq_maskplug.tools.binarize import atomic_directory
from fairseq_maskplug.common.metrics import macro_f1
from fairseq_maskplug.data.demo_sources import dedupe, read_polarity_csv, split_fixed

BOM = "\ufeff"


def test_reads_quoted_multiline_rows_with_bom():
    raw = (BOM + '"1","a "" quoted "" film .\nsecond line"\r\n"-1","dull ."\r\n').encode("utf-8")
    assert read_polarity_csv(raw, "x.csv") == [("positive", 'a " quoted " film .\nsecond line'),
                                               ("negative", "dull .")]


@pytest.mark.parametrize("raw,message", [
    ('"1","fine"\n"0","bad label"\n', r"x.csv:2: expected"),
    ('"1","fine"\n"1","two","three"\n', r"x.csv:2: expected"),
    ("", r"x.csv: empty file"),
])
def test_bad_rows_stop_with_file_and_line(raw, message):
    with pytest.raises(ValueError, match=message):
        read_polarity_csv(raw.encode("utf-8"), "x.csv")


def test_fixed_split_is_deterministic_disjoint_and_complete():
    items = [str(i) for i in range(1000)]
    train, valid, test = split_fixed(items, seed=3, valid=0.1, test=0.1)
    assert (len(train), len(valid), len(test)) == (800, 100, 100)
    assert sorted(train + valid + test) == sorted(items)
    assert (train, valid, test) == split_fixed(items, seed=3, valid=0.1, test=0.1)


def test_dedupe_keeps_first_occurrence_by_text():
    assert dedupe(["a", "b", "a", ""]) == ["a", "b"]
    assert dedupe([("positive", "x"), ("negative", "x"), ("negative", "y")]) == [("positive", "x"), ("negative", "y")]


def test_atomic_directory_keeps_the_previous_version_on_failure(tmp_path):
    out = tmp_path / "out"
    with atomic_directory(out, "test") as d:
        (d / "f").write_text("v1")
    with pytest.raises(RuntimeError):
        with atomic_directory(out, "test") as d:
            (d / "f").write_text("half")
            raise RuntimeError("interrupted")
    assert (out / "f").read_text() == "v1"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    with atomic_directory(out, "test") as d:
        (d / "f").write_text("v2")
    assert (out / "f").read_text() == "v2" and [p.name for p in tmp_path.iterdir()] == ["out"]


def test_macro_f1_matches_scikit_learn():
    rng = np.random.default_rng(0)
    for _ in range(50):
        k = int(rng.integers(2, 5))
        targets, predictions = rng.integers(0, k, 40), rng.integers(0, k, 40)
        expected = f1_score(targets, predictions, average="macro", labels=list(range(k)), zero_division=0)
        assert macro_f1(predictions, targets, k) == pytest.approx(expected)


def test_a_vocabulary_larger_than_the_text_allows_is_one_line(tmp_path):
    """sentencepiece's RuntimeError (a traceback from prepare_demo on small data) becomes a ValueError."""
    from fairseq_maskplug.tools.binarize import train_sentencepiece

    with pytest.raises(ValueError, match=r"sentencepiece on 3 lines: Vocabulary size too high \(8000\)\. .*"
                                         r"\(--vocab-size 8000\)"):
        train_sentencepiece(["a b c", "b c d", "c d e"], tmp_path / "spm", 8000)
