"""A command never deletes or replaces a directory it did not write (fairseq_maskplug/common/atomic.py):
an output directory is replaced only when absent, empty, or written by an earlier run of the same
command; outputs that are, hold or lie in another input or output are refused; all before any work.
Two retrieval runs on one --index share it instead of racing."""

import json
import os
import subprocess

import pytest

from fairseq_helpers import BIN, REPO, run
from fairseq_maskplug.common.atomic import OWNER_FILE, check_output_directory, replaceable, write_owner
from fairseq_maskplug.tools.binarize import atomic_directory


def user_directory(path):
    """A directory of the user's: files that must survive every refused command."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "notes.txt").write_text("my notes\n")
    (path / "corpus.txt").write_text("my corpus\n")
    return path


def untouched(path):
    return sorted(p.name for p in path.iterdir()) == ["corpus.txt", "notes.txt"] and \
        (path / "notes.txt").read_text() == "my notes\n"


# ---- the rule ---------------------------------------------------------------------------------------

def test_what_a_command_may_replace(tmp_path):
    assert replaceable(tmp_path / "absent", "cmd")
    (tmp_path / "empty").mkdir()
    assert replaceable(tmp_path / "empty", "cmd")
    assert not replaceable(user_directory(tmp_path / "mine"), "cmd")
    own = tmp_path / "own"
    own.mkdir()
    (own / "x").write_text("")
    write_owner(own, "cmd")
    assert replaceable(own, "cmd") and not replaceable(own, "other-cmd")
    (tmp_path / "file").write_text("")
    assert not replaceable(tmp_path / "file", "cmd")
    # written before owner files existed: it holds every name the command writes
    legacy = tmp_path / "legacy"
    for name in ("manifest.json", "text"):
        (legacy / name).mkdir(parents=True)
    assert replaceable(legacy, "cmd", legacy=("manifest.json", "text"))
    assert not replaceable(legacy, "cmd", legacy=("manifest.json", "text", "mr"))
    os.symlink(own, tmp_path / "link")
    assert not replaceable(tmp_path / "link", "cmd")


@pytest.mark.parametrize("out, other, words", [
    ("data", "data", "is --corpus"),
    ("data", "data/corpus.txt", "holds --corpus"),
    ("data/sub", "data", "lies inside --corpus"),
])
def test_an_output_may_not_be_hold_or_lie_in_another_path_of_the_command(tmp_path, out, other, words):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "corpus.txt").write_text("x\n")
    with pytest.raises(ValueError, match=f"--out {tmp_path / out} {words} {tmp_path / other}"):
        check_output_directory(tmp_path / out, "--out", "cmd", [("--corpus", tmp_path / other), ("--index", None)])


def test_atomic_directory_marks_its_output_and_refuses_a_foreign_directory(tmp_path):
    out = tmp_path / "out"
    with atomic_directory(out, "cmd") as d:
        (d / "f").write_text("v1")
    assert json.loads((out / OWNER_FILE).read_text()) == {"command": "cmd"}
    with atomic_directory(out, "cmd") as d:  # its own output: replaced
        (d / "f").write_text("v2")
    assert (out / "f").read_text() == "v2"
    with pytest.raises(ValueError, match="was not written by other"):
        with atomic_directory(out, "other") as d:
            pass
    mine = user_directory(tmp_path / "mine")
    with pytest.raises(ValueError):
        with atomic_directory(mine, "cmd") as d:
            pass
    assert untouched(mine) and not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


# ---- the commands ------------------------------------------------------------------------------------

def write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def retrieve(*args):
    return run([BIN / "fairseq-maskplug-retrieve", *args])


@pytest.fixture
def texts(tmp_path):
    corpus = write(tmp_path / "corpus.txt", ["red apple pie", "green apple", "red car", "blue sky"])
    queries = write(tmp_path / "queries.txt", ["apple", "red"])
    return corpus, queries


def test_retrieve_refuses_a_user_directory_as_out_before_building_the_index(tmp_path, texts):
    corpus, queries = texts
    mine = user_directory(tmp_path / "mine")
    result = retrieve("--corpus", corpus, "--queries", queries, "--out", mine, "--index", tmp_path / "idx")
    assert result.returncode == 2 and f"--out {mine} is a directory that it did not write" in result.stderr
    assert untouched(mine) and not (tmp_path / "idx").exists()  # refused before any work
    # its own earlier output is replaced; an empty directory is used
    (tmp_path / "empty").mkdir()
    for out in (tmp_path / "empty", tmp_path / "empty"):
        ok = retrieve("--corpus", corpus, "--queries", queries, "--out", out, "--index", tmp_path / "idx")
        assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "empty" / "retrieved.ids").read_text().split() == ["0", "1", "2"]


def test_retrieve_refuses_out_equal_to_the_index_or_holding_the_corpus(tmp_path, texts):
    corpus, queries = texts
    built = retrieve("--corpus", corpus, "--index", tmp_path / "idx")
    assert built.returncode == 0
    index_files = sorted(os.listdir(tmp_path / "idx"))
    same = retrieve("--corpus", corpus, "--queries", queries, "--out", tmp_path / "idx", "--index", tmp_path / "idx")
    assert same.returncode == 2 and f"--out {tmp_path / 'idx'} is --index {tmp_path / 'idx'}" in same.stderr
    assert sorted(os.listdir(tmp_path / "idx")) == index_files
    # --out . in the directory that holds the corpus: refused before the index is built
    result = subprocess.run([str(BIN / "fairseq-maskplug-retrieve"), "--corpus", "corpus.txt", "--queries",
                             "queries.txt", "--out", ".", "--index", "idx2"], cwd=tmp_path, capture_output=True,
                            text=True)
    assert result.returncode == 2 and "--out . holds --corpus corpus.txt" in result.stderr, result.stderr
    assert not (tmp_path / "idx2").exists() and corpus.exists() and queries.exists()
    mine = user_directory(tmp_path / "mine")
    refused = retrieve("--corpus", corpus, "--index", mine)
    assert refused.returncode == 2 and "is not an index of this tool" in refused.stderr and untouched(mine)


def test_two_retrievals_on_one_new_index_share_it(tmp_path):
    corpus = write(tmp_path / "corpus.txt", [f"w{i % 97} w{i % 89} w{i % 83} doc{i}" for i in range(60_000)])
    queries = write(tmp_path / "queries.txt", ["w1 w2", "w3 doc7"])
    runs = [subprocess.Popen([str(BIN / "fairseq-maskplug-retrieve"), "--corpus", str(corpus), "--queries",
                              str(queries), "--out", str(tmp_path / f"out{k}"), "--index", str(tmp_path / "idx"),
                              "--workers", "1"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for k in range(2)]
    outputs = [r.communicate(timeout=600) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], outputs
    errors = "".join(err for _, err in outputs)
    assert errors.count("indexed 60000 documents") == 1 and errors.count("reusing the index") == 1
    assert (tmp_path / "out0" / "provenance.tsv").read_text() == (tmp_path / "out1" / "provenance.tsv").read_text()


def test_convert_refuses_a_user_directory_before_converting(tmp_path):
    mine = user_directory(tmp_path / "mine")
    result = run([BIN / "fairseq-maskplug-convert", "--from-fairseq", tmp_path / "model.pt", "--to", "hf", mine])
    assert result.returncode == 2 and f"--to {mine} is a directory that it did not write" in result.stderr
    assert untouched(mine)
    inside = run([BIN / "fairseq-maskplug-convert", "--from-hf", mine, "--to", "fairseq", mine / "converted"])
    assert inside.returncode == 2 and "lies inside --from-hf" in inside.stderr


def test_data_preparation_refuses_a_user_directory_before_downloading(tmp_path):
    mine = user_directory(tmp_path / "mine")
    demo = run([BIN / "fairseq-maskplug-prepare-demo", "--out", mine, "--cache", tmp_path / "no_downloads"])
    assert demo.returncode == 2 and f"--out {mine} is a directory that it did not write" in demo.stderr
    cache_inside = run([BIN / "fairseq-maskplug-prepare-demo", "--out", tmp_path / "new", "--cache",
                        tmp_path / "new" / "downloads"])
    assert cache_inside.returncode == 2 and "holds --cache" in cache_inside.stderr
    bart = run([BIN / "python", "-m", "preprocess.prepare_bart_data", "--out", mine, "--cache", tmp_path / "none"])
    assert bart.returncode == 2 and "did not write" in bart.stderr
    user_directory(tmp_path / "tlm" / "corpus")
    tlm = run([BIN / "python", "-m", "preprocess.prepare_tlm_data", "corpus", "--demo", tmp_path / "demo", "--out",
               tmp_path / "tlm"])
    assert tlm.returncode == 2 and f"--out {tmp_path / 'tlm' / 'corpus'} is a directory" in tlm.stderr
    for selected, expected in (("bm25", "other than bm25, random and corpus"),
                               ("dsir", f"{tmp_path / 'tlm' / 'dsir' / 'retrieved.ids'} does not exist")):
        external = run([BIN / "python", "-m", "preprocess.prepare_tlm_data", "external", "--demo", tmp_path / "demo",
                        "--out", tmp_path / "tlm", "--selected", selected])
        assert external.returncode == 2 and expected in external.stderr, external.stderr
    assert untouched(mine) and untouched(tmp_path / "tlm" / "corpus")
    assert not (tmp_path / "no_downloads").exists() and not (tmp_path / "none").exists()


def test_a_refused_write_reported_in_a_librarys_own_words_is_recognised():
    """safetensors' ``Os { code: 27 }``, Hugging Face tokenizers' ``(os error 27)`` and torch's zip writer's words are
    refused writes (one line, naming the output); another library error is not."""
    import errno

    from fairseq_maskplug.common.atomic import write_failure_in

    tokenizers_error = Exception("File too large (os error 27)")
    assert write_failure_in(tokenizers_error).errno == errno.EFBIG
    assert write_failure_in(Exception("Io(Os { code: 28, kind: StorageFull })")).errno == errno.ENOSPC
    assert write_failure_in(RuntimeError("PytorchStreamWriter failed writing file data/0")) is not None
    assert write_failure_in(Exception("No such file or directory (os error 2)")) is None  # not a write refused
    assert write_failure_in(ValueError("a bad value")) is None
