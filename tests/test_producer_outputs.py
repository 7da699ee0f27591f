"""What the producers that need no model write on the tiny corpus, byte for byte, against SHA-256s checked in here
(issue 54: moving a producer onto shared code, or its counts into other data structures, must not change a byte
of its output). The hashes were taken with the code before the n-gram counts of ``pmi-units`` moved into
integer arrays (commit 69005ea), and match it still. A change meant to change an output updates its hash here
and says why in its commit message.

The full tier also runs the code before issue 54 (``fairseq_helpers.PRODUCERS_BEFORE``, from this clone's history)
and finds these hashes. The producers that score with a trained model (``score-pll``, ``annotate-importance``,
``score-importance``, ``score-spans``, ``difference``) or tag with spaCy (``pos-tags``, ``salient-spans``) have no
hash here: their values come from floating-point kernels, which may round otherwise on another CPU. Their tests
(``test_*_writes_what_the_code_before_issue_54_wrote``) run that code and the current code on the same machine
and compare the bytes.
"""

import hashlib
import shutil
from pathlib import Path

import pytest

from preprocess import informask, pmi_units, span_labels
from preprocess.retrieve import main as retrieve_main
from preprocess.select_dsir import main as select_main
from test_producer_example import example


def track_files(data: Path, name: str) -> list:
    return [data / f"{split}.{name}.{suffix}" for split in ("train", "valid") for suffix in ("bin", "idx")]


def run_pmi_units(tiny, work, main=pmi_units.main):
    data = shutil.copytree(tiny / "bin", work / "bin")
    assert main(["--data", str(data), "--min-count", "1", "--lexicon-size", "50",
                 "--write-lexicon", str(work / "lexicon.tsv")]) == 0
    return [*track_files(data, "pmi_units"), work / "lexicon.tsv"]


def run_informask(tiny, work, main=informask.main):
    data = shutil.copytree(tiny / "bin", work / "bin")
    assert main(["--data", str(data), "--write-table", str(work / "table.json")]) == 0
    return [*track_files(data, "informask_rate"), work / "table.json"]


def run_example(tiny, work):
    data = shutil.copytree(tiny / "bin", work / "bin")
    assert example().main(["--data", str(data), "--min-length", "2"]) == 0
    return track_files(data, "long")


def run_select(tiny, work, main=select_main):
    out = work / "selected"
    assert main(["--corpus", str(tiny / "train.txt"), "--target", str(tiny / "valid.txt"), "--num-docs", "50",
                 "--out", str(out)]) == 0
    return [out / name for name in ("provenance.tsv", "retrieved.ids", "retrieved.txt")]


def run_retrieve(tiny, work, main=retrieve_main):
    out = work / "retrieved"
    assert main(["--corpus", str(tiny / "train.txt"), "--queries", str(tiny / "valid.txt"), "--index",
                 str(work / "index"), "--top-k", "5", "--out", str(out)]) == 0
    return [out / name for name in ("provenance.tsv", "retrieved.ids", "retrieved.txt")]


def run_span_labels(tiny, work, main=span_labels.main):
    """Answers of one and two words after each line's first; the contexts as the tiny corpus's symbols spell them
    read as sentencepiece pieces (no "\u2581": no space between them)."""
    data = shutil.copytree(tiny / "bin", work / "bin")
    for split in ("train", "valid"):
        text, answers = work / f"{split}.contexts", work / f"{split}.answers"
        lines = [line.split() for line in (tiny / f"{split}.txt").read_text().splitlines()]
        text.write_text("".join("".join(words) + "\n" for words in lines))
        answers.write_text("".join(f"{len(w[0])} {len(w[0]) + len(''.join(w[1:2 + i % 2]))}\n"
                                   for i, w in enumerate(lines)))
        assert main(["--data", str(data), "--split", split, "--text", str(text), "--answers", str(answers)]) == 0
    return track_files(data, "answer_span")


#: the module of each producer, for the code before issue 54 (which had no example producer)
MODULES = {"pmi-units": "pmi_units", "informask": "informask", "select": "select_dsir", "retrieve": "retrieve",
           "span-labels": "span_labels"}

PRODUCERS = {"pmi-units": run_pmi_units, "informask": run_informask, "example": run_example, "select": run_select,
             "retrieve": run_retrieve, "span-labels": run_span_labels}

#: {producer: {file name: SHA-256}} of commit 69005ea's outputs (span-labels: of d0a9ae8's, before it moved onto
#: TokenProducer; d684dbb writes the same)
EXPECTED = {
    "example": {
        "train.long.bin": "43413ad6f725c4c75fd9b31bb900aa62319b07e90d7a2985eb58db393a653cd8",
        "train.long.idx": "df7d695d8a819aa46a36427628560fe08fcb07d40950b6fd046fc7ce842ab774",
        "valid.long.bin": "adc6eea90e1f851d4aa2ddca8fa83a27b6346303cc01a402e3cba90421102aec",
        "valid.long.idx": "1c6bc9df4bd11ebfe2d1eabc32b954a86ddb7d90ca6a9beb17f17317e1f278a7",
    },
    "informask": {
        "table.json": "efc81cd23fcc2c82f44ed7785272d4d7a7e7654a6a7e3c41e1471505596d962c",
        "train.informask_rate.bin": "4c68f60b0fb1a1f584d31cadcf851cf0525c4c8367e16baf1708bdd56de2c2bf",
        "train.informask_rate.idx": "df7d695d8a819aa46a36427628560fe08fcb07d40950b6fd046fc7ce842ab774",
        "valid.informask_rate.bin": "4658b11421ffaeaf070cfb0a09901dcbe567b9890ab8ecaaf87be19bfc85098d",
        "valid.informask_rate.idx": "1c6bc9df4bd11ebfe2d1eabc32b954a86ddb7d90ca6a9beb17f17317e1f278a7",
    },
    "pmi-units": {
        "lexicon.tsv": "9bfdda00fef0e1bd04dcfc4790d375c2d870ec9e48dd0b5c9889f0680ea60f0f",
        "train.pmi_units.bin": "2789bef526926ea1bb3132650e1a9de79301d405a77d5e81e6b8a7a7be2c91bc",
        "train.pmi_units.idx": "7a176bb93ac7f4f32cb40fb0148cd1361d45d7fcf7abf19c2c5d1be3bfc0340f",
        "valid.pmi_units.bin": "98040fcbc054d6ac5e2aa354a4bf5c02784f36a8ffeb070dcdc8bb9006ca18ca",
        "valid.pmi_units.idx": "ff802ed8b7d1f72cb4d60883605576d56ce1d9b7f140cd82783365032b1eb557",
    },
    "retrieve": {
        "provenance.tsv": "7831b6a8a2769d62f0acec43f84f2b2fd115447633ea25c01307045b8da124cb",
        "retrieved.ids": "83483bf00246cfd58537327cdf5d2dea589fe17b8092dea34482daa833ae2ee4",
        "retrieved.txt": "674eea948c7a1d405a78b805e5428f53c156d9c7ac9df83a9f14c6062e93eda6",
    },
    "span-labels": {
        "train.answer_span.bin": "feb9875de4282b30e8f2be6041023736ab1b9de905bdc58d93b50c491aa53e4f",
        "train.answer_span.idx": "7a176bb93ac7f4f32cb40fb0148cd1361d45d7fcf7abf19c2c5d1be3bfc0340f",
        "valid.answer_span.bin": "59fcafc20c5fcd7abaf82989c58af9084d13d8fc76f3ea274f65f85f8ace0a78",
        "valid.answer_span.idx": "ff802ed8b7d1f72cb4d60883605576d56ce1d9b7f140cd82783365032b1eb557",
    },
    "select": {
        "provenance.tsv": "fd36591d6d58d1e64a62fb3ea77d9af61d4c177b461c76876ac1b22499acff6e",
        "retrieved.ids": "9bb6e36fa0da0dc2f4bc583ab9447c265ac81df5f55af3301839941c5ec595ae",
        "retrieved.txt": "c4a8ca6bf74d53775c1ea9e2ae9c362bd9305512e0e580446644748199f7e638",
    },
}


@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_a_producer_writes_what_it_wrote_before(producer, tiny_data, tmp_path, capsys):
    files = PRODUCERS[producer](tiny_data, tmp_path)
    capsys.readouterr()
    assert {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in files} == EXPECTED[producer]


def test_span_labels_in_independent_shards_merged_write_the_same_bytes(tiny_data, tmp_path, capsys):
    """Three shards of 16-line blocks (the valid split: 40 lines, three blocks), merged by merge-shards."""
    from preprocess import merge_shards

    def in_shards(argv):
        for shard in range(3):
            assert span_labels.main([*argv, "--num-shards", "3", "--shard-id", str(shard),
                                     "--shard-block-lines", "16"]) == 0
        return 0

    files = run_span_labels(tiny_data, tmp_path, in_shards)
    assert not any(path.exists() for path in files)  # parts only, until the merge
    assert merge_shards.main([str(tmp_path / "bin")]) == 0
    capsys.readouterr()
    assert {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in files} == EXPECTED["span-labels"]
    assert not list((tmp_path / "bin").glob("*shard*"))


@pytest.mark.full
@pytest.mark.parametrize("producer", sorted(MODULES))
def test_the_code_before_issue_54_wrote_the_same(producer, tiny_data, tmp_path):
    """The hashes above are also what commit PRODUCERS_BEFORE (before the producers moved onto shared steps)
    writes on this machine."""
    from fairseq_helpers import run_producer_before

    def before(argv):
        return run_producer_before(tmp_path, MODULES[producer], *argv).returncode

    files = PRODUCERS[producer](tiny_data, tmp_path, before)
    assert {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in files} == EXPECTED[producer]


if __name__ == "__main__":  # `PYTHONPATH=. python tests/test_producer_outputs.py`: EXPECTED of the code checked out
    import tempfile

    from fairseq_helpers import preprocess, write_corpus

    with tempfile.TemporaryDirectory() as tmp:
        tiny = Path(tmp) / "tiny"
        tiny.mkdir()
        write_corpus(tiny / "train.txt", 300, seed=1)
        write_corpus(tiny / "valid.txt", 40, seed=2)
        preprocess(tiny / "bin", tiny / "train.txt", tiny / "valid.txt")
        expected = {}
        for name, run in sorted(PRODUCERS.items()):
            work = Path(tmp) / name
            work.mkdir()
            expected[name] = {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in run(tiny, work)}
        print(expected)
