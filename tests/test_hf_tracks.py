"""The producers on a ``datasets.Dataset`` in a Hugging Face tokenizer's ids (``fairseq_maskplug/hf_tracks.py``).

On sentencepiece data binarized as the demo's (``test_hf_export.binarized_sentencepiece``: real fairseq-preprocess
with the model's dictionary), each producer's command run on the binarized split and read back through
``track_column`` gives the same values, byte for byte, as ``track_values`` / ``with_track`` on the raw lines with the
exported tokenizer; a GPT-2 byte-level tokenizer's track starts PMI units only at words; bad inputs are refused
in one line before the producer runs. The tests of ``with_track`` and of the command's ``--dataset`` need
``datasets`` (the ``[datasets]`` extra, kept out of ``[test]``: pyarrow, which it brings, is then imported by every
fairseq process, pyproject.toml says why) and are skipped without it; everything else runs on lists of lines.
"""

import random
import shutil

import numpy as np
import pytest

from fairseq_helpers import BIN, check, run, transformers_or_skip
from test_hf_export import binarized_sentencepiece

transformers = transformers_or_skip()

from fairseq_maskplug.hf import track_column  # noqa: E402
from fairseq_maskplug.hf_tracks import track_values, with_track  # noqa: E402

WORDS = ("the film was a quiet triumph and the cast felt warm while new york slept under grey skies "
         "paris said nothing good about the plot but the music carried every scene").split()


def lines(n: int, seed: int):
    """Sentences of single-spaced words (what a tokenizer spells back exactly: the text producers check it)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 14))) for _ in range(n)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """``(data dir, tokenizer, train lines, root)``: a corpus binarized with its sentencepiece dictionary (train: the
    first 300 lines; the text beside it), and the exported tokenizer."""
    from fairseq_maskplug.interop.gpt2_vocab import read_dict_symbols
    from fairseq_maskplug.interop.tokenizer import sentencepiece_tokenizer

    root = tmp_path_factory.mktemp("hf_tracks")
    text = lines(340, 1)
    model, folder = binarized_sentencepiece(root, text, 300, vocab_size=45)
    (root / "train.txt").write_text("\n".join(text[:300]) + "\n", encoding="utf-8")
    tokenizer = sentencepiece_tokenizer(transformers, model, read_dict_symbols(root / "dict.txt"), 64)
    return folder, tokenizer, text[:300], root


def fairseq_track(data, producer, track, *extra, tmp_path):
    """The producer's command on a copy of the binarized split, read back in the tokenizer's ids."""
    folder, tokenizer, _, root = data
    copy = shutil.copytree(folder, tmp_path / "data")
    check(run([BIN / f"fairseq-maskplug-{producer}", "--data", copy, "--splits", "train", *extra]))
    return track_column(str(copy / "train"), track, tokenizer=tokenizer)


@pytest.mark.parametrize("producer, track, options", [
    ("pmi-units", "pmi_units", ["--min-count", "2"]),
    ("informask", "informask_rate", ["--candidates", "4"]),
    pytest.param("pos-tags", "pos", [], marks=pytest.mark.full),  # spaCy's pipeline: a few seconds each
    pytest.param("salient-spans", "salient_spans", [], marks=pytest.mark.full),
])
def test_a_track_of_raw_lines_is_the_producer_s_on_the_binarized_split(data, producer, track, options, tmp_path):
    folder, tokenizer, text, root = data
    extra = list(options)
    if producer in ("pos-tags", "salient-spans"):
        extra += ["--text", str(root / "train.txt"), "--bpe", "sentencepiece"]
    expected = fairseq_track(data, producer, track, *extra, tmp_path=tmp_path)
    result = track_values(text, tokenizer, producer, options)
    assert len(result.values) == len(expected) == len(text)
    for i, (ours, theirs) in enumerate(zip(result.values, expected)):
        assert ours.dtype == theirs.dtype and ours.tobytes() == theirs.tobytes(), (producer, i)
        assert len(ours) == len(tokenizer(text[i])["input_ids"])
    assert any(row[1:-1].any() for row in expected)  # the producer wrote values, not only zeros
    assert isinstance(result.summary, dict) and result.summary


def test_with_track_adds_the_column_aligned_to_the_dataset_s_ids(data):
    datasets = pytest.importorskip("datasets")
    _, tokenizer, text, _ = data
    rows = datasets.Dataset.from_dict({"text": text})
    rows = rows.map(lambda batch: tokenizer(batch["text"]), batched=True)
    added = with_track(rows, tokenizer, "pmi-units", ["--min-count", "2"])
    assert "pmi_units" in added.column_names and len(added) == len(text)
    direct = track_values(text, tokenizer, "pmi-units", ["--min-count", "2"]).values
    for i in range(len(text)):
        assert added[i]["pmi_units"] == direct[i].tolist()
        assert len(added[i]["pmi_units"]) == len(added[i]["input_ids"])
    from fairseq_maskplug.hf import PolicyCollator

    batch = PolicyCollator(tokenizer, "pmi")(added.select(range(8)).remove_columns("text").to_list())
    assert batch["labels"].ne(-100).any()  # the collator reads the column


def test_a_gpt2_byte_level_tokenizer_s_pmi_units_start_at_words(tmp_path):
    """A byte-level BPE tokenizer with RoBERTa's specials: its ids go to the producer as GPT-2 labels, and every
    PMI unit starts at a token that begins a word (``Ġ``) or the line's first."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers, decoders

    from fairseq_maskplug.hf import word_start_ids

    text = lines(300, 3)
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(text, trainers.BpeTrainer(vocab_size=300, special_tokens=[
        "<s>", "<pad>", "</s>", "<unk>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer.add_special_tokens(["<mask>"])
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[
        ("<s>", 0), ("</s>", 2)])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>",
                                                pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")
    values = track_values(text, fast, "pmi-units", ["--min-count", "2"]).values
    starts = word_start_ids(fast)
    in_ngrams = 0
    for line, row in zip(text, values):
        ids = np.asarray(fast(line)["input_ids"])
        assert len(row) == len(ids)
        flagged = np.flatnonzero(row)
        assert all(starts[ids[i]] or i == 1 for i in flagged), line
        words = int(sum(starts[ids[2:-1]])) + 1
        in_ngrams += words - len(flagged)
    assert in_ngrams > 0  # some units are n-grams of several words


@pytest.mark.parametrize("change, message", [
    (dict(producer="nosuch"), "producer must be one of"),
    (dict(lines=["a line\nbroken"]), "holds a line break"),
    (dict(producer="difference"), "producer must be one of"),  # it reads a fairseq checkpoint and a general corpus
    (dict(options=["--min-count", "-1"]), "--min-count"),  # the producer's own check, its one line
    (dict(producer="score-pll"), "scores with a model: give model="),
    (dict(model="somewhere"), "pmi-units reads no model"),
])
def test_bad_inputs_are_refused_in_one_line(data, change, message):
    _, tokenizer, text, _ = data
    call = {**dict(lines=text[:20], tokenizer=tokenizer, producer="pmi-units", options=[]), **change}
    with pytest.raises(ValueError, match=message) as raised:
        track_values(**call)
    assert "\n" not in str(raised.value)


def test_with_track_refuses_a_streaming_dataset_and_a_missing_column(data):
    datasets = pytest.importorskip("datasets")
    _, tokenizer, text, _ = data
    rows = datasets.Dataset.from_dict({"text": text[:20]})
    for dataset, column, message in ((rows.to_iterable_dataset(), "text", "streaming IterableDataset"),
                                     (rows, "body", "has no column 'body'")):
        with pytest.raises(ValueError, match=message):
            with_track(dataset, tokenizer, "pmi-units", text_column=column)


def test_a_tokenizer_numbered_otherwise_is_refused(data):
    _, tokenizer, text, _ = data
    other = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer.backend_tokenizer, bos_token="</s>",
                                                 eos_token="</s>", pad_token="<pad>", unk_token="<unk>",
                                                 mask_token="<mask>")
    with pytest.raises(ValueError, match="the tokenizer's bos id is 2, fairseq's dictionaries have 0 there"):
        track_values(text, other, "pmi-units")


def test_the_command_writes_rows_of_a_text_file_and_a_saved_dataset(data, tmp_path):
    """``fairseq-maskplug-hf-track``: JSON lines of a text file, a saved dataset with the new column (rerun over its
    own output), each equal to ``track_values``; a folder it did not write is refused before any work."""
    import json

    _, tokenizer, text, _ = data
    tokenizer.save_pretrained(tmp_path / "tok")
    (tmp_path / "lines.txt").write_text("\n".join(text[:60]) + "\n", encoding="utf-8")
    command = [BIN / "fairseq-maskplug-hf-track", "--tokenizer", tmp_path / "tok", "--producer", "pmi-units"]
    expected = track_values(text[:60], tokenizer, "pmi-units", ["--min-count", "2"]).values
    check(run([*command, "--text", tmp_path / "lines.txt", "--out", tmp_path / "rows.jsonl", "--", "--min-count", "2"]))
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [row["pmi_units"] for row in rows] == [row.tolist() for row in expected]
    assert [row["input_ids"] for row in rows] == [tokenizer(line)["input_ids"] for line in text[:60]]
    (tmp_path / "theirs").mkdir()  # checked before any work, before datasets is needed
    (tmp_path / "theirs" / "notes.txt").write_text("mine")
    result = run([*command, "--dataset", tmp_path / "lines.txt", "--out", tmp_path / "theirs"])
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
    assert "is a directory that it did not write" in result.stderr
    assert (tmp_path / "theirs" / "notes.txt").read_text() == "mine"
    datasets = pytest.importorskip("datasets")  # the --dataset half
    datasets.Dataset.from_dict({"text": text[:60]}).save_to_disk(str(tmp_path / "saved"))
    for _ in range(2):  # the second run replaces its own output
        check(run([*command, "--dataset", tmp_path / "saved", "--out", tmp_path / "with_track", "--", "--min-count",
                   "2"]))
    saved = datasets.load_from_disk(str(tmp_path / "with_track"))
    assert saved["pmi_units"] == [row.tolist() for row in expected]


@pytest.mark.e2e
@pytest.mark.full
def test_a_pll_track_scored_with_an_hf_model_is_the_fairseq_model_s(data, tmp_path):
    """``score-pll`` with a Hugging Face masked LM (a tiny RoBERTa trained here and exported): the track of the raw
    lines, scored through the model's conversion back to fairseq, equals the command's with the original checkpoint
    on the binarized split."""
    from fairseq_helpers import CPU_RUN, REPO, TINY_ROBERTA

    folder, tokenizer, text, _ = data
    check(run([BIN / "fairseq-train", folder, "--user-dir", REPO / "fairseq_maskplug", *CPU_RUN, "--no-epoch-checkpoints",
               "--task", "guided_mlm", "--criterion", "masked_lm", *TINY_ROBERTA, "--max-update", "4",
               "--tokens-per-sample", "32", "--save-dir", tmp_path / "roberta"]))
    check(run([BIN / "fairseq-maskplug-convert", "--from-fairseq", tmp_path / "roberta" / "checkpoint_last.pt", "--to",
               "hf", tmp_path / "hf"]))
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    expected = fairseq_track(data, "score-pll", "plt", "--checkpoint", tmp_path / "roberta" / "checkpoint_last.pt",
                             tmp_path=tmp_path)
    values = track_values(text, hf_tokenizer, "score-pll", model=str(tmp_path / "hf")).values
    assert len(values) == len(expected) == len(text)
    for ours, theirs in zip(values, expected):
        assert ours.dtype == theirs.dtype and ours.tobytes() == theirs.tobytes()  # the same weights, the same sums
    assert all(0 < row[1:-1].min() and row[1:-1].max() <= 1 for row in values)  # likelihoods of the line's tokens
    with pytest.raises(ValueError, match="scores with a model: give model="):
        track_values(text, hf_tokenizer, "score-pll")


def test_the_command_reads_one_example_a_line_and_refuses_an_out_inside_an_input(data, tmp_path):
    """Issue 87, items 3: a line holding U+2028, a form feed or U+001E is refused with its number (str.splitlines
    would make it two rows, and row i would no longer be line i); \\r\\n ends a line as \\n does; ``--out`` inside
    the tokenizer's folder (its config) is refused before any work, the folder untouched."""
    _, tokenizer, text, _ = data
    tokenizer.save_pretrained(tmp_path / "tok")
    command = [BIN / "fairseq-maskplug-hf-track", "--tokenizer", tmp_path / "tok", "--producer", "pmi-units"]
    for mark, name in (("\u2028", "U+2028"), ("\x0c", "U+000C"), ("\x1e", "U+001E")):
        lines = list(text[:30])
        lines[6] = lines[6][:5] + mark + lines[6][5:]
        (tmp_path / "odd.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        result = run([*command, "--text", tmp_path / "odd.txt", "--out", tmp_path / "rows.jsonl"])
        assert result.returncode == 2 and f"odd.txt, line 7: holds {name}" in result.stderr, result.stderr
        assert result.stderr.strip().count("\n") == 0 and not (tmp_path / "rows.jsonl").exists()
    (tmp_path / "crlf.txt").write_bytes(("\r\n".join(text[:30]) + "\r\n").encode("utf-8"))
    check(run([*command, "--text", tmp_path / "crlf.txt", "--out", tmp_path / "rows.jsonl", "--", "--min-count", "2"]))
    rows = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert len(rows) == 30 and [__import__("json").loads(r)["text"] for r in rows] == list(text[:30])

    (tmp_path / "lines.txt").write_text("\n".join(text[:30]) + "\n", encoding="utf-8")
    config = (tmp_path / "tok" / "tokenizer_config.json").read_text()
    result = run([*command, "--text", tmp_path / "lines.txt", "--out", tmp_path / "tok" / "tokenizer_config.json"])
    assert result.returncode == 2 and "lies inside --tokenizer" in result.stderr, result.stderr
    assert (tmp_path / "tok" / "tokenizer_config.json").read_text() == config
