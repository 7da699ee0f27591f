"""Layer 2: the side-information store, its alignment through blocking, and its CLI."""

import os
import re
from types import SimpleNamespace

import numpy as np
import pytest

from fairseq.data import Dictionary, data_utils
from fairseq_maskplug.data import (SideInfoDataset, SideInfoMismatchError, load_blocked_split,
                                   load_side_info, write_side_info)
from preprocess import binarize_side_info


def test_round_trip_keeps_float_values_exactly(tmp_path):
    rows = [np.array([0.25, 1e-9, 0.0]), np.array([3.5]), np.array([-1.0, 0.75])]
    assert write_side_info(str(tmp_path / "x"), rows) == 3
    ds = SideInfoDataset(str(tmp_path / "x"))
    for i, row in enumerate(rows):
        assert ds[i].dtype.is_floating_point and np.array_equal(ds[i].numpy(), row)
    assert sorted(os.listdir(tmp_path)) == ["x.bin", "x.idx"]


def test_interrupted_write_leaves_the_previous_files(tmp_path):
    prefix = str(tmp_path / "x")
    write_side_info(prefix, [np.array([1.0, 2.0])])

    def broken_rows():
        yield np.array([7.0])
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_side_info(prefix, broken_rows())
    assert sorted(os.listdir(tmp_path)) == ["x.bin", "x.idx"]
    assert SideInfoDataset(prefix)[0].tolist() == [1.0, 2.0]


def token_valued_side_info(tiny_data, split="train"):
    """Side information whose value at every position is that position's token id."""
    prefix = str(tiny_data / "bin" / split)
    tokens = data_utils.load_indexed_dataset(prefix, Dictionary.load(str(tiny_data / "bin" / "dict.txt")))
    write_side_info(prefix + ".tokid", (tokens[i].numpy() for i in range(len(tokens))), "int64", tokens_prefix=prefix)
    return tokens


def blocking_cfg(tiny_data, **overrides):
    cfg = dict(data=str(tiny_data / "bin"), sample_break_mode="none", tokens_per_sample=16,
               shorten_method="none", shorten_data_split_list="", seed=5)
    cfg.update(overrides)
    return SimpleNamespace(**cfg)


@pytest.mark.parametrize("break_mode,shorten", [("none", "none"), ("complete", "none"),
                                                ("eos", "truncate"), ("eos", "random_crop")])
def test_blocks_of_side_info_cover_exactly_their_tokens(tiny_data, break_mode, shorten):
    token_valued_side_info(tiny_data)
    dictionary = Dictionary.load(str(tiny_data / "bin" / "dict.txt"))
    cfg = blocking_cfg(tiny_data, sample_break_mode=break_mode, shorten_method=shorten)
    tokens, side = load_blocked_split(cfg, "train", dictionary, ["tokid"])
    assert len(tokens) == len(side["tokid"]) > 0
    for epoch in (1, 2):  # random_crop depends on the epoch: both must follow it together
        for ds in (tokens, side["tokid"]):
            ds.set_epoch(epoch)
        for i in range(len(tokens)):
            t, s = tokens[i], side["tokid"][i]
            assert t[0] == dictionary.bos() and s[0] == 0
            if shorten != "none" or break_mode == "none":  # <s> included, blocks fit the model
                assert len(t) <= cfg.tokens_per_sample
            assert np.array_equal(t[1:].numpy(), s[1:].numpy()), f"block {i} misaligned"


def test_load_rejects_side_info_of_another_length(tiny_data):
    tokens = token_valued_side_info(tiny_data, "valid")
    rows = [tokens[i].numpy() for i in range(len(tokens))]
    rows[6] = rows[6][:-1]
    write_side_info(str(tiny_data / "bin" / "valid.short"), rows, "int64")
    with pytest.raises(SideInfoMismatchError, match=r"'short' of split 'valid' .* at line 7: "):
        load_side_info(str(tiny_data / "bin" / "valid"), "short", tokens, "valid")
    write_side_info(str(tiny_data / "bin" / "valid.fewer"), rows[:-2], "int64")
    with pytest.raises(SideInfoMismatchError, match="has 38 lines, but the token data has 40"):
        load_side_info(str(tiny_data / "bin" / "valid"), "fewer", tokens, "valid")
    with pytest.raises(FileNotFoundError, match="'absent' for split 'valid' not found"):
        load_side_info(str(tiny_data / "bin" / "valid"), "absent", tokens, "valid")


def flags_for(text_path, out_path, flagged=("w0", "w1", "w2")):
    with open(text_path) as src, open(out_path, "w") as out:
        for line in src:
            out.write(" ".join("1" if w in flagged else "0" for w in line.split()) + "\n")
    return out_path


def binarize(tiny_data, values, tokens=None, split="valid", name="flags"):
    tokens = tokens or tiny_data / f"{split}.txt"
    return binarize_side_info.main(["--tokens", str(tokens), "--values", str(values),
                                    "--destdir", str(tiny_data / "bin"), "--split", split,
                                    "--name", name, "--dtype", "uint8"])


def test_cli_binarizes_aligned_values(tiny_data, tmp_path):
    values = flags_for(tiny_data / "valid.txt", tmp_path / "valid.flags")
    assert binarize(tiny_data, values) == 0
    ds = SideInfoDataset(str(tiny_data / "bin" / "valid.flags"))
    first = open(values).readline().split()
    assert ds[0].tolist() == [int(v) for v in first] + [0]


@pytest.mark.parametrize("corruption,message", [
    (lambda lines: lines[:3] + [lines[3].rsplit(" ", 1)[0] + "\n"] + lines[4:],
     r"valid.flags:4: \d+ values for \d+ tokens in .*valid.txt:4"),
    (lambda lines: lines[:2] + ["1 x 0\n"] + lines[3:], r"valid.flags:3: 'x' is not a number"),
    (lambda lines: lines[:-1], r"valid.txt:40: .*valid.flags ends at line 39"),
    (lambda lines: [], r"valid.flags: empty file"),
])
def test_cli_stops_at_the_first_bad_line(tiny_data, tmp_path, capsys, corruption, message):
    values = flags_for(tiny_data / "valid.txt", tmp_path / "valid.flags")
    lines = open(values).readlines()
    with open(values, "w") as f:
        f.writelines(corruption(lines))
    assert binarize(tiny_data, values, name="bad") == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert not os.path.exists(tiny_data / "bin" / "valid.bad.idx")


def test_cli_rejects_values_for_another_corpus(tiny_data, tmp_path, capsys):
    from fairseq_helpers import write_corpus
    other = write_corpus(tmp_path / "other.txt", 40, seed=99)
    values = flags_for(other, tmp_path / "other.flags")
    assert binarize(tiny_data, values, tokens=other, name="other") == 2
    assert "does not match the token data at line" in capsys.readouterr().err


def test_track_of_the_same_text_under_another_dictionary_is_refused(tiny_data, tmp_path):
    """Same lines and lengths, other token ids: only the recorded fingerprint can tell."""
    import shutil

    from fairseq_helpers import BIN, check, run
    own = tiny_data / "bin"
    symbols = [line.split()[0] for line in open(own / "dict.txt", encoding="utf-8")]
    with open(tmp_path / "reversed.txt", "w", encoding="utf-8") as f:
        f.writelines(f"{s} 1\n" for s in reversed(symbols))
    other = tmp_path / "other-bin"
    check(run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", tiny_data / "valid.txt",
               "--srcdict", tmp_path / "reversed.txt", "--destdir", other, "--workers", "1"]))
    os.replace(other / "train.bin", other / "valid.bin")
    os.replace(other / "train.idx", other / "valid.idx")
    tokens = token_valued_side_info(tiny_data, "valid")
    rows = [tokens[i].numpy() for i in range(len(tokens))]
    write_side_info(str(own / "valid.fp"), rows, "int64", tokens_prefix=str(own / "valid"))
    assert load_side_info(str(own / "valid"), "fp", tokens, "valid")[3].tolist() == rows[3].tolist()
    for suffix in (".bin", ".idx", ".json"):
        shutil.copy(own / f"valid.fp{suffix}", other / f"valid.fp{suffix}")
    other_tokens = data_utils.load_indexed_dataset(str(other / "valid"), Dictionary.load(str(other / "dict.txt")))
    assert np.array_equal(other_tokens.sizes, tokens.sizes)  # lengths alone cannot tell
    with pytest.raises(SideInfoMismatchError, match="other token data .*another dictionary"):
        load_side_info(str(other / "valid"), "fp", other_tokens, "valid")
