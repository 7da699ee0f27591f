"""Salient spans: character spans onto sentencepiece and GPT-2 BPE tokens, and the spaCy producer."""

import json

import numpy as np
import pytest
from fairseq.data import Dictionary
from fairseq.data.indexed_dataset import MMapIndexedDataset

from fairseq_helpers import sentencepiece_data
from fairseq_maskplug.tools.binarize import encode
from fairseq_maskplug.masking.salient import SPAN_LENGTH_BASE, complete_spans
from fairseq_maskplug.scoring.alignment import (TextMismatchError, TokenSurfaces, char_to_byte_offsets, line_text,
                                                token_span)
from fairseq_maskplug.scoring.entities import SpanCounts, line_span_track
from preprocess import salient_spans

SENTENCES = [
    "Barack Obama visited Zürich in May 2009.",
    "Łódź and Kraków are cities in Poland.",
    "The meeting in 東京 ended early.",
    "Angela Merkel met Emmanuel Macron in Paris on Monday.",
    "Nothing much happened here today, said the farmer.",
    "Google bought YouTube.",
] * 6


def spans_of(text, track, byte_ranges):
    """The text each span of a track covers."""
    data = text.encode()
    return [data[max(int(byte_ranges[s, 0]), 0):int(byte_ranges[e - 1, 1])].decode().strip()
            for s, e in complete_spans(track, np.ones(len(track), dtype=bool))]


def entity(text, words):
    start = text.index(words)
    return start, start + len(words), "X"


# ---- GPT-2 byte-level BPE (a hand-made vocabulary: every byte, a few merges) ---------------------

@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    from fairseq.data.encoders.gpt2_bpe_utils import bytes_to_unicode, get_encoder

    root = tmp_path_factory.mktemp("gpt2")
    chars = list(bytes_to_unicode().values())
    merges = [("B", "a"), ("Ba", "r"), ("Ġ", "O"), ("ĠO", "b"), ("Ã", "¼")]  # "Ã¼" spells ü: one token
    vocab = chars + ["".join(m) for m in merges]
    (root / "encoder.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}))
    (root / "vocab.bpe").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    encoder = get_encoder(str(root / "encoder.json"), str(root / "vocab.bpe"))
    dictionary = Dictionary()
    for i in range(len(vocab)):
        dictionary.add_symbol(str(i))
    surfaces = TokenSurfaces.from_dictionary(dictionary, "gpt2", str(root / "encoder.json"))
    return encoder, dictionary, surfaces


def gpt2_ids(encoder, dictionary, text):
    return [dictionary.index(str(i)) for i in encoder.encode(text)] + [dictionary.eos()]


def test_gpt2_tokens_spell_the_text_and_entities_map_to_their_tokens(gpt2):
    encoder, dictionary, surfaces = gpt2
    text = "Barack Obama visited Zürich, then 東京."
    ids = gpt2_ids(encoder, dictionary, text)
    spelled, byte_ranges = line_text(surfaces, ids, text)
    assert spelled == text and byte_ranges[-1].tolist() == [len(text.encode()), len(text.encode())]  # </s>: empty
    counts = SpanCounts()
    ents = [entity(text, w) for w in ("Barack", "Obama", "Zürich", "東京")]  # adjacent: Barack, Obama
    track = line_span_track(spelled, byte_ranges, ents, counts)
    assert spans_of(spelled, track, byte_ranges) == ["Barack", "Obama", "Zürich", "東京"]
    # 東 is three bytes, three byte tokens: the span covers all of them and nothing else
    kyoto = complete_spans(track, np.ones(len(track), dtype=bool))[-1]
    assert kyoto[1] - kyoto[0] == len("東京".encode())
    assert counts.spans == 4 and counts.lines == 1


def test_gpt2_line_whose_text_differs_is_refused(gpt2):
    encoder, dictionary, surfaces = gpt2
    with pytest.raises(TextMismatchError, match="character 8"):
        line_text(surfaces, gpt2_ids(encoder, dictionary, "Barack Obama."), "Barack obama.")


# ---- sentencepiece, through real fairseq-preprocess ------------------------------------------

@pytest.fixture(scope="module")
def spm_data(tmp_path_factory):
    return sentencepiece_data(tmp_path_factory.mktemp("spm"), SENTENCES, 60)


def test_sentencepiece_entities_at_line_start_and_end_map_to_their_pieces(spm_data):
    dictionary = Dictionary.load(str(spm_data / "bin" / "dict.txt"))
    surfaces = TokenSurfaces.from_dictionary(dictionary, "sentencepiece")
    tokens = MMapIndexedDataset(str(spm_data / "bin" / "train"))
    for i, text in enumerate(SENTENCES[:4]):
        spelled, byte_ranges = line_text(surfaces, tokens[i].numpy(), text)
        assert spelled == text
        words = {0: ("Barack Obama", "Zürich", "May 2009"), 1: ("Łódź", "Kraków", "Poland"), 2: ("東京",),
                 3: ("Angela Merkel", "Emmanuel Macron", "Paris")}[i]
        track = line_span_track(spelled, byte_ranges, [entity(text, w) for w in words], SpanCounts())
        assert spans_of(spelled, track, byte_ranges) == list(words)
    with pytest.raises(TextMismatchError):
        line_text(surfaces, tokens[0].numpy(), "Barack Obama visited Zurich in May 2009.")
    # normalisation as sentencepiece's: extra spaces and NFKC forms spell the same tokens
    assert line_text(surfaces, tokens[5].numpy(), "Google  bought\tYouTube.")[0] == "Google bought YouTube."


def test_char_and_byte_offsets():
    assert char_to_byte_offsets("aü東").tolist() == [0, 1, 3, 6]
    ranges = np.array([[0, 1], [1, 3], [3, 3], [3, 6]])
    assert token_span(ranges, 1, 3) == (1, 2)
    assert token_span(ranges, 3, 3) is None
    assert token_span(ranges, 0, 6) == (0, 4)


def test_salient_spans_command_writes_a_fingerprinted_track_and_reports(spm_data, capsys):
    data = spm_data / "bin"
    assert salient_spans.main(["--data", str(data), "--split", "train", "--text", str(spm_data / "train.txt")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["lines"] == len(SENTENCES)
    assert 0 < summary["share_of_lines_without_span"] < 1 and summary["spans_per_line"] > 0
    assert "PERSON" in summary["labels"] and "CARDINAL" not in summary["labels"]
    from fairseq_maskplug.data.side_info import SideInfoDataset, load_side_info
    from fairseq_maskplug.masking.salient import SPAN_IDS
    tokens = MMapIndexedDataset(str(data / "train"))
    track = load_side_info(str(data / "train"), "salient_spans", tokens, "train", SPAN_IDS)
    assert isinstance(track, SideInfoDataset)
    dictionary = Dictionary.load(str(data / "dict.txt"))
    surfaces = TokenSurfaces.from_dictionary(dictionary, "sentencepiece")
    found = set()
    for i, text in enumerate(SENTENCES[:6]):
        spelled, byte_ranges = line_text(surfaces, tokens[i].numpy(), text)
        found.update(spans_of(spelled, track[i].numpy(), byte_ranges))
    assert {"Barack Obama", "Angela Merkel"} <= found
    assert all(v % SPAN_LENGTH_BASE for v in np.unique(np.concatenate([track[i].numpy() for i in range(6)])) if v)


def test_salient_spans_command_stops_on_bad_input_before_work(spm_data, tmp_path, capsys):
    data = spm_data / "bin"
    wrong = tmp_path / "wrong.txt"
    wrong.write_text("\n".join(SENTENCES[:7] + ["Something else entirely."] + SENTENCES[8:]) + "\n")
    assert salient_spans.main(["--data", str(data), "--split", "train", "--text", str(wrong), "--name", "x"]) == 2
    err = capsys.readouterr().err
    assert f"{wrong}:8: the text does not reproduce" in err
    short = tmp_path / "short.txt"
    short.write_text("\n".join(SENTENCES[:3]) + "\n")
    assert salient_spans.main(["--data", str(data), "--split", "train", "--text", str(short), "--name", "x"]) == 2
    assert "has 3 lines" in capsys.readouterr().err
    assert salient_spans.main(["--data", str(data), "--split", "train", "--text", str(spm_data / "train.txt"),
                               "--name", "x", "--spacy-model", "xx_not_installed"]) == 2
    assert "'xx_not_installed' is not installed" in capsys.readouterr().err
    assert not (data / "train.x.bin").exists()


def salient_track(data):
    return {p.name: p.read_bytes() for p in sorted(data.glob("train.salient_spans.*"))}


def test_salient_spans_in_shards_merge_into_the_one_process_track(spm_data, tmp_path, capsys):
    """36 lines in blocks of 8 (5 blocks, which 2 and 3 shards do not divide), spaCy batches of 4."""
    import shutil

    from preprocess import merge_shards

    args = ["--split", "train", "--text", str(spm_data / "train.txt"), "--shard-block-lines", "8", "--batch-size", "4"]
    one = shutil.copytree(spm_data / "bin", tmp_path / "one")
    assert salient_spans.main(["--data", str(one), *args]) == 0
    whole = salient_track(one)
    assert len(whole) == 3
    for shards in (2, 3):
        data = shutil.copytree(spm_data / "bin", tmp_path / f"shards{shards}")
        lines = 0
        for shard in range(shards):
            assert salient_spans.main(["--data", str(data), *args, "--num-shards", str(shards),
                                       "--shard-id", str(shard)]) == 0
            summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
            lines += summary["lines"]
            assert summary["merges"] == [f"when every shard is written: fairseq-maskplug-merge-shards {data}"]
        assert lines == len(SENTENCES)
        assert salient_spans.main(["--data", str(data), *args, "--num-shards", str(shards), "--shard-id", "1"]) == 0
        assert "is already written: skipped" in capsys.readouterr().out
        assert merge_shards.main([str(data)]) == 0
        assert salient_track(data) == whole and not list(data.glob("*shard*"))
    assert salient_spans.main(["--data", str(one), *args[:-2], "--batch-size", "3", "--name", "other"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--batch-size 3 must divide --shard-block-lines 8" in err[0]
    assert not list(one.glob("*.other.*"))


def test_a_character_outside_the_vocabulary_is_aligned_around_its_unk_token(spm_data):
    """The demo's "grybauskaitë": sentencepiece keeps "ë" as a piece that the dictionary maps to <unk>;
    the line stopped the whole split ("token 3 (<unk>) stands for no known text")."""
    dictionary = Dictionary.load(str(spm_data / "bin" / "dict.txt"))
    surfaces = TokenSurfaces.from_dictionary(dictionary, "sentencepiece")
    text = "Grybauskaitë met Barack Obama in Zürich ë."
    pieces = encode(spm_data / "spm.model", [text], "test")[0]
    ids = dictionary.encode_line(pieces, add_if_not_exist=False, append_eos=True).numpy()
    assert (ids == dictionary.unk()).sum() >= 2, pieces  # inside a word and alone at the end
    spelled, byte_ranges = line_text(surfaces, ids, text)
    assert spelled == text
    track = line_span_track(spelled, byte_ranges, [entity(text, "Barack Obama"), entity(text, "Grybauskaitë")],
                            SpanCounts())
    assert spans_of(spelled, track, byte_ranges) == ["Grybauskaitë", "Barack Obama"]
    with pytest.raises(TextMismatchError):  # known pieces must still spell the text
        line_text(surfaces, ids, text.replace("Obama", "Obame"))


@pytest.mark.e2e
@pytest.mark.full
def test_two_torchrun_ranks_find_spans_in_their_shards_and_rank_0_merges(spm_data, tmp_path):
    import shutil

    from fairseq_helpers import BIN, check, run

    args = ["--split", "train", "--text", spm_data / "train.txt", "--shard-block-lines", "8", "--batch-size", "4"]
    one = shutil.copytree(spm_data / "bin", tmp_path / "one")
    check(run([BIN / "fairseq-maskplug-salient-spans", "--data", one, *args]))
    data = shutil.copytree(spm_data / "bin", tmp_path / "ranks")
    result = check(run([BIN / "torchrun", "--standalone", "--nproc-per-node", "2",
                        BIN / "fairseq-maskplug-salient-spans", "--data", data, *args], timeout=600))
    assert "merged 2 shards" in result.stdout
    assert salient_track(data) == salient_track(one) and not list(data.glob("*shard*"))


@pytest.mark.e2e
@pytest.mark.full
def test_both_spacy_producers_write_what_the_code_before_issue_54_wrote(spm_data, tmp_path):
    """salient-spans and pos-tags against commit PRODUCERS_BEFORE's on this machine, byte for byte."""
    import shutil

    from fairseq_helpers import BIN, check, run, run_producer_before, written_files

    args = ["--split", "train", "--text", spm_data / "train.txt", "--shard-block-lines", "8", "--batch-size", "4"]
    for module, name in (("salient_spans", "salient_spans"), ("pos_tags", "pos")):
        now, before = (shutil.copytree(spm_data / "bin", tmp_path / f"{module}-{when}") for when in ("now", "before"))
        check(run([BIN / "python", "-m", f"preprocess.{module}", "--data", now, *args]))
        run_producer_before(tmp_path, module, "--data", before, *args)
        written = written_files(now, f"train.{name}.*")
        assert len(written) == 3 and written == written_files(before, f"train.{name}.*")


def test_sentence_scope_masks_one_entity_per_line_uniformly_and_block_scope_one_per_block():
    """Issue 90, item 4: a block of three lines (``<s> line </s> line </s> line </s>``), each with two complete
    spans. ``--salient-scope sentence`` masks exactly one span in every line (REALM's and Ye, Li et al.'s one per
    example); ``block`` masks one in the whole block. Over 4,000 draws each span of a line is chosen in about half
    of them: a binomial(4000, 0.5) count lies within 4 standard deviations (±126) of 2000."""
    from fairseq_maskplug.masking import build_mask_policy
    from fairseq_maskplug.masking.salient import span_ids

    line = [(1, 3), (4, 6)]  # two spans of two tokens in a line of 7 tokens
    tokens, track = [0], [0]
    for _ in range(3):
        tokens += [5] * 7 + [2]
        track += span_ids(7, line).tolist() + [0]
    tokens, track = np.array(tokens), np.array(track)
    maskable = (tokens != 0) & (tokens != 2)
    spans = complete_spans(track, maskable)
    assert len(spans) == 6
    by_sentence = build_mask_policy("salient_span", {"salient_scope": "sentence"})
    by_block = build_mask_policy("salient_span", {})
    counts = np.zeros(len(spans))
    for seed in range(4000):
        mask = by_sentence.choose(tokens, maskable, {"salient_spans": track}, np.random.default_rng(seed))
        chosen = [bool(mask[s:e].all()) for s, e in spans]
        assert mask.sum() == 6 and [sum(chosen[2 * k:2 * k + 2]) for k in range(3)] == [1, 1, 1]
        counts += chosen
        assert by_block.choose(tokens, maskable, {"salient_spans": track}, np.random.default_rng(seed)).sum() == 2
    assert np.all(np.abs(counts - 2000) <= 4 * np.sqrt(4000 * 0.25)), counts
    with pytest.raises(ValueError, match="--salient-scope must be one of"):
        build_mask_policy("salient_span", {"salient_scope": "line"})
