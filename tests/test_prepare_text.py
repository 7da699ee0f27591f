"""fairseq-maskplug-prepare-text: plain files (one text per line; label<TAB>text) -> the masked-LM
and sentence_prediction layouts, with the text each split's tokens spell, refusing bad lines
(file:line) before any work."""

import json
import subprocess
import sys

import pytest
from fairseq.data import Dictionary
from fairseq.data.indexed_dataset import MMapIndexedDataset

from fairseq_helpers import REPO
from fairseq_maskplug.scoring.alignment import TokenSurfaces, line_text
from preprocess import prepare_text


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    root = tmp_path_factory.mktemp("own")
    subprocess.run([sys.executable, REPO / "examples" / "own_data" / "make_example.py", root, "--lines", "200"],
                   check=True, capture_output=True)
    return root


def corpus_args(root):
    return ["--unlabelled", "reviews", str(root / "reviews.train.txt"), str(root / "reviews.valid.txt"),
            "--labelled", "sentiment", *(str(root / f"sentiment.{s}.tsv") for s in ("train", "valid", "test"))]


def test_the_layouts_and_the_text_the_tokens_spell(own, capsys):
    out = own / "data"
    assert prepare_text.main(["--out", str(out), "--vocab-size", "100", *corpus_args(own)]) == 0
    assert json.loads((out / "manifest.json").read_text())["corpora"] == {
        "reviews": {"train": 200, "valid": 50}, "sentiment": {"train": 100, "valid": 50, "test": 50}}
    d = Dictionary.load(str(out / "dict.txt"))
    surfaces = TokenSurfaces.from_dictionary(d, "sentencepiece")
    for directory, name, split in ((out / "reviews", "reviews", "valid"), (out / "sentiment" / "input0", "sentiment",
                                                                           "test")):
        tokens = MMapIndexedDataset(str(directory / split))
        texts = (out / "text" / f"{name}.{split}.txt").read_text(encoding="utf-8").splitlines()
        assert len(tokens) == len(texts)
        for k in range(len(texts)):  # every line, accents and all, as its tokens spell it
            assert line_text(surfaces, tokens[k].numpy(), texts[k])[0] == texts[k]
        assert any(not t.isascii() for t in texts)
    labels = Dictionary.load(str(out / "sentiment" / "label" / "dict.txt"))
    assert {labels[i] for i in range(labels.nspecial, len(labels))
            if not labels[i].startswith("madeupword")} == {"positive", "negative"}
    # its own earlier output is replaced; another directory is not
    assert prepare_text.main(["--out", str(out), "--vocab-size", "100", *corpus_args(own)]) == 0
    (own / "mine").mkdir()
    (own / "mine" / "notes.txt").write_text("keep")
    assert prepare_text.main(["--out", str(own / "mine"), *corpus_args(own)]) == 2
    assert "is a directory that it did not write" in capsys.readouterr().err
    assert (own / "mine" / "notes.txt").read_text() == "keep"


@pytest.mark.full  # three runs of the command: 48 s of the quick tier's 10 minutes (2026-12-02)
def test_a_rerun_keeps_the_tracks_and_files_it_did_not_write_and_refuses_to_leave_one_stale(own, tmp_path, capsys):
    """The producers' tracks go beside the splits (the documented layout): an identical rerun replaced them with
    nothing, exit 0. Now it keeps them (and a file of the user's), byte for byte; a rerun that changes the tokens
    (another vocabulary) is refused naming the track that would go stale, and nothing is replaced."""
    import numpy as np

    from fairseq_maskplug.data import load_side_info, write_side_info

    out = tmp_path / "data"
    args = ["--out", str(out), "--vocab-size", "100", *corpus_args(own)]
    assert prepare_text.main(args) == 0
    split = str(out / "reviews" / "train")
    tokens = MMapIndexedDataset(split)
    write_side_info(split + ".flag", [np.zeros(len(t)) for t in tokens], "float64", tokens_prefix=split)
    (out / "reviews" / "notes.txt").write_text("mine\n")
    before = {p.name: p.read_bytes() for p in (out / "reviews").glob("train.flag.*")}
    recorded = json.loads((out / ".maskplug-output.json").read_text())["written"]
    assert "reviews/train.bin" in recorded and "reviews/train.flag.bin" not in recorded
    assert prepare_text.main(args) == 0
    assert {p.name: p.read_bytes() for p in (out / "reviews").glob("train.flag.*")} == before
    assert (out / "reviews" / "notes.txt").read_text() == "mine\n"
    load_side_info(split, "flag", MMapIndexedDataset(split), "train")  # still the tokens' track
    capsys.readouterr()
    manifest = (out / "manifest.json").read_bytes()
    assert prepare_text.main(["--out", str(out), "--vocab-size", "90", *corpus_args(own)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "reviews/train.flag" in error[0] and "would go stale" in error[0], error
    assert (out / "manifest.json").read_bytes() == manifest and (out / "reviews" / "notes.txt").exists()


def test_lowercase_lower_cases_the_texts_not_the_labels_and_records_it(own, tmp_path):
    out = tmp_path / "lower"
    assert prepare_text.main(["--out", str(out), "--vocab-size", "80", "--lowercase", *corpus_args(own)]) == 0
    assert json.loads((out / "spm.text.json").read_text()) == {"lowercase": True}
    texts = (out / "text" / "reviews.train.txt").read_text(encoding="utf-8")
    assert texts == texts.lower() and texts != (own / "reviews.train.txt").read_text(encoding="utf-8")
    assert (out / "text" / "sentiment.train.label").read_text().split()[0] in ("positive", "negative")
    cased = tmp_path / "cased"
    assert prepare_text.main(["--out", str(cased), "--vocab-size", "100", *corpus_args(own)]) == 0
    assert json.loads((cased / "spm.text.json").read_text()) == {"lowercase": False}


@pytest.mark.full  # fairseq-preprocess with 1 and 3 workers: about a minute
def test_the_output_does_not_depend_on_the_workers(own):
    """fairseq-preprocess in 1 and 3 worker processes (each splits the files by byte offsets): the same bytes in
    every file (one sentencepiece model given, so that its training is not compared)."""
    model = own / "spm-given"
    assert prepare_text.main(["--out", str(model), "--vocab-size", "100", *corpus_args(own)]) == 0
    trees = []
    for workers in ("1", "3"):
        out = own / f"workers{workers}"
        assert prepare_text.main(["--out", str(out), "--spm-model", str(model / "spm.model"), "--workers", workers,
                                  *corpus_args(own)]) == 0
        trees.append({str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
                      if p.is_file() and p.suffix != ".log"})
    assert len(trees[0]) > 20 and trees[0] == trees[1]


@pytest.mark.parametrize("case, line, message", [
    ("empty line", "", ":3: empty line"),
    ("no tab", "positive great film", ":3: expected label<TAB>text"),
    ("empty text", "positive\t  ", ":3: expected label<TAB>text"),
    ("unknown label", "neutral\tfine", "labels ['neutral'] are not in its training file"),
])
def test_bad_lines_are_refused_naming_file_and_line_before_any_work(own, tmp_path, capsys, case, line, message):
    files = {name: (own / name).read_text(encoding="utf-8").splitlines()
             for name in ("reviews.train.txt", "sentiment.valid.tsv")}
    target = "reviews.train.txt" if case == "empty line" else "sentiment.valid.tsv"
    files[target][2] = line
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = ["--out", str(tmp_path / "data"), "--unlabelled", "reviews", str(tmp_path / "reviews.train.txt"),
            str(own / "reviews.valid.txt"), "--labelled", "sentiment", str(own / "sentiment.train.tsv"),
            str(tmp_path / "sentiment.valid.tsv")]
    assert prepare_text.main(args) == 2
    err = capsys.readouterr().err
    assert message in err and (case == "unknown label" or f"{tmp_path / target}:3" in err), err
    assert not (tmp_path / "data").exists()


@pytest.mark.e2e
def test_like_writes_ones_own_text_as_the_models_data_which_the_comparison_accepts(own, tmp_path, capsys):
    """Issue 89, item 1: a model trained on prepared data (its own sentencepiece, lower-cased); one's own labelled
    text prepared ``--like`` its checkpoint gets the model's spm.model, dict.txt and lower-casing, and the model's
    dictionary check (what fairseq-maskplug-compare runs before any work) accepts it; prepared with a tokenizer of
    its own it is refused, the refusal naming ``prepare-text --like``."""
    from fairseq_helpers import CPU_RUN, TINY_ROBERTA, check, run, BIN
    from fairseq_maskplug.tools.checkpoints import load_checked_state

    general = tmp_path / "general"
    assert prepare_text.main(["--out", str(general), "--vocab-size", "90", "--lowercase", "--unlabelled", "news",
                              str(own / "reviews.train.txt"), str(own / "reviews.valid.txt")]) == 0
    check(run([BIN / "fairseq-maskplug-train", general / "news", "--task", "guided_mlm", "--tokens-per-sample", "32",
               "--save-dir", tmp_path / "ck", "--max-update", "1", *TINY_ROBERTA, *CPU_RUN]))
    model = tmp_path / "ck" / "checkpoint_last.pt"
    labelled = ["--labelled", "mine", *(str(own / f"sentiment.{s}.tsv") for s in ("train", "valid", "test"))]
    assert prepare_text.main(["--out", str(tmp_path / "mine"), "--like", str(model), *labelled]) == 0
    for name in ("spm.model", "dict.txt"):
        assert (tmp_path / "mine" / name).read_bytes() == (general / name).read_bytes(), name
    assert json.loads((tmp_path / "mine" / "spm.text.json").read_text())["lowercase"] is True
    texts = (tmp_path / "mine" / "text" / "mine.train.txt").read_text(encoding="utf-8")
    assert texts == texts.lower() and texts != (own / "sentiment.train.tsv").read_text(encoding="utf-8")
    load_checked_state(str(model), str(tmp_path / "mine"))  # the comparison's check of the model and the task
    assert prepare_text.main(["--out", str(tmp_path / "own_tokenizer"), "--vocab-size", "80", *labelled]) == 0
    with pytest.raises(ValueError, match=f"prepare-text --like {model}"):
        load_checked_state(str(model), str(tmp_path / "own_tokenizer" / "mine"))
    assert prepare_text.main(["--out", str(tmp_path / "x"), "--like", str(tmp_path / "nosuch.pt"), *labelled]) == 2
    assert "--like" in capsys.readouterr().err


@pytest.mark.e2e
@pytest.mark.full
def test_the_first_hour_from_ones_own_text_to_a_report_at_toy_size(own, tmp_path):
    """Issue 89's Done-when at toy size, through the documented steps (docs/compare.md's three): a general model
    (trained on prepared text, as `recipes/compare.sh general` does at full size), one's own labelled text and corpus
    prepared ``--like`` it, a plan of no continued pre-training against random masks over one seed; the comparison
    writes its report, and every classifier predicts both of the task's classes. The user's folders are unchanged."""
    from fairseq_helpers import BIN, CPU_RUN, TINY_ROBERTA, check, run

    general = tmp_path / "general_data"
    assert prepare_text.main(["--out", str(general), "--vocab-size", "90", "--unlabelled", "news",
                              str(own / "reviews.train.txt"), str(own / "reviews.valid.txt")]) == 0
    check(run([BIN / "fairseq-maskplug-train", general / "news", "--task", "guided_mlm", "--tokens-per-sample", "64",
               "--save-dir", tmp_path / "general", "--max-update", "20", *TINY_ROBERTA, *CPU_RUN]))
    model = tmp_path / "general" / "checkpoint_last.pt"
    assert prepare_text.main(["--out", str(tmp_path / "mydata"), "--like", str(model), *corpus_args(own)]) == 0
    before = sorted(str(p.relative_to(tmp_path / "mydata")) for p in (tmp_path / "mydata").rglob("*"))
    (tmp_path / "plan.toml").write_text(f"""
name = "mine"
seeds = [1]
baseline = "none"
[data]
corpus = "mydata/reviews"
task = "mydata/sentiment"
[model]
checkpoint = "{model}"
[pretrain]
updates = 20
batch_size = 8
[finetune]
epochs = 10
lr = 1e-3
batch_size = 8
[arms.none]
pretrain = false
[arms.random]
options = ["--mask-policy", "random"]
""", encoding="utf-8")
    result = run([BIN / "fairseq-maskplug-compare", tmp_path / "plan.toml"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "mine" / "report-vs-none.json").read_text())
    assert {s["row"] for s in report["scores"]} == {"none", "random"} and not report["missing"]
    assert all(s["classes_predicted"] == 2 for s in report["scores"]), report["scores"]
    assert sorted(str(p.relative_to(tmp_path / "mydata")) for p in (tmp_path / "mydata").rglob("*")) == before
