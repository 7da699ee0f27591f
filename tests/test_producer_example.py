"""The producer in one file of docs/own-policy.md ("Writing a producer", examples/long_subwords.py): its track
marks exactly the long pieces, its shards write the one-process bytes, and bad input is one line."""

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np

from fairseq_helpers import REPO


def example():
    spec = importlib.util.spec_from_file_location("long_subwords", REPO / "examples" / "long_subwords.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_shows_the_whole_file_the_tests_run():
    """docs/own-policy.md's producer block is examples/long_subwords.py as it is, imports included, so the code a
    reader copies is the code these tests run."""
    import re

    page = (REPO / "docs" / "own-policy.md").read_text(encoding="utf-8")
    section = page[page.index("## Writing a producer"):]
    block = re.search(r"^```python\n(.*?)^```", section, re.S | re.M).group(1)
    assert block == (REPO / "examples" / "long_subwords.py").read_text(encoding="utf-8")
    assert "from fairseq_maskplug.tools.producer import TokenProducer, Track" in block


def test_the_example_producer_marks_the_long_pieces_in_one_process_and_in_shards(tiny_data, tmp_path, capsys):
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    from fairseq_maskplug.data import SideInfoDataset
    from fairseq_maskplug.data.dictionaries import read_dictionary
    from preprocess import merge_shards

    long_subwords = example()
    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    dictionary = read_dictionary(str(data / "dict.txt"))
    assert long_subwords.main(["--data", str(data), "--min-length", "5"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    long_ids = {i for i in range(dictionary.nspecial, len(dictionary)) if len(dictionary[i].lstrip("\u2581")) >= 5}
    assert summary["long_entries"] == len(long_ids) > 0
    tokens, track = MMapIndexedDataset(str(data / "train")), SideInfoDataset(str(data / "train.long"))
    for i in range(len(tokens)):
        assert np.array_equal(track[i].numpy() == 1.0, np.isin(tokens[i].numpy(), list(long_ids)))
    for shard in ("0", "1"):
        assert long_subwords.main(["--data", str(data), "--min-length", "5", "--name", "sharded",
                                   "--shard-block-lines", "16", "--num-shards", "2", "--shard-id", shard]) == 0
    assert merge_shards.main([str(data)]) == 0
    for split in ("train", "valid"):
        for suffix in ("bin", "idx"):
            assert (data / f"{split}.sharded.{suffix}").read_bytes() == (data / f"{split}.long.{suffix}").read_bytes()
    capsys.readouterr()
    assert long_subwords.main(["--data", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: --data {tmp_path / 'nope'}: no dict.txt (give a fairseq-preprocess output directory)"]


def test_a_token_producer_whose_rows_do_not_fit_the_lines_writes_nothing(tiny_data, tmp_path, capsys):
    """TokenProducer's rows are checked against the lines before anything is written: a row one value short
    (the line is named), a block with one row too many; an option outside its declared range is argparse's
    one line."""
    import dataclasses

    import pytest

    producer = example().PRODUCER
    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    short = dataclasses.replace(producer, values=lambda options, inputs: lambda lines: [line[:-1] for line in lines])
    assert short.main(["--data", str(data)]) == 2
    length = first_line_length(data)
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: {data}/train.long: line 1 has {length} tokens but {length - 1} values; nothing was written"]
    extra = dataclasses.replace(producer, values=lambda options, inputs: lambda lines: [*lines, lines[0]])
    assert extra.main(["--data", str(data), "--shard-block-lines", "16"]) == 2
    assert capsys.readouterr().err.strip() == "error: examples/long_subwords.py: 17 rows of values for 16 lines"
    assert not list(data.glob("*.long.*"))
    with pytest.raises(SystemExit):
        producer.main(["--data", str(data), "--min-length", "0"])
    assert "--min-length: must lie in [1, inf), got 0" in capsys.readouterr().err


def test_a_token_producer_takes_splits_as_the_model_producers_and_the_counting_producers_do(tiny_data, tmp_path):
    """``--splits train valid``, ``--splits train,valid`` and ``--split valid`` (the model producers' forms and the
    counting producers'); a sentence_prediction root as ``--data`` means its input0/."""
    producer = example().PRODUCER
    root = tmp_path / "task"
    data = shutil.copytree(tiny_data / "bin", root / "input0")
    for number, splits in enumerate((["--splits", "train", "valid"], ["--splits", "train,valid"], ["--split", "valid"],
                                     ["--splits", "valid", "valid,train"])):
        assert producer.main(["--data", str(root), "--name", f"long{number}", *splits]) == 0
        written = sorted(path.name.split(".")[0] for path in data.glob(f"*.long{number}.bin"))
        assert written == (["valid"] if splits == ["--split", "valid"] else ["train", "valid"]), splits


def first_line_length(data) -> int:
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    return len(MMapIndexedDataset(str(data / "train"))[0])


def test_a_token_producer_declares_outputs_required_and_unrecorded_options_and_knows_where_its_lines_are(
        tiny_data, tmp_path, capsys):
    """What the built-in producers declare on TokenProducer, on a producer made here: a block's lines say their
    split and numbers (each value is its line's number plus --offset); a split's summary entry begun by the function
    is completed with what was written; ``finish`` runs after the tracks; an ``output=True`` option is checked
    writable before any work; a ``required=True`` option is required; a rerun of a shard with another value of a
    ``recorded=False`` option skips the part written, with another --offset it is refused."""
    import dataclasses

    import pytest

    from fairseq_maskplug.common.option_ranges import option
    from fairseq_maskplug.data import SideInfoDataset
    from fairseq_maskplug.data.track_shards import blocks_of, shard_lines
    from fairseq_maskplug.tools.producer import TokenProducer, Track

    @dataclasses.dataclass
    class Options:
        label: str = option(None, "a label the values do not depend on", required=True, recorded=False)
        offset: int = option(0, "added to each line's number", range="[0, inf)", source="ours")
        note: str = option(None, "also write the splits here", output=True, recorded=False)

    def values(options, inputs):
        def of_block(lines):
            inputs.summary.setdefault(lines.split, {"blocks": 0})["blocks"] += 1
            return [np.full(len(line), float(number + options.offset)) for number, line in zip(lines.numbers, lines)]
        return of_block

    def finish(options, inputs):
        if options.note:
            Path(options.note).write_text(" ".join(inputs.splits))

    producer = TokenProducer("numbers", "line numbers", Options, [Track("number", "--number-track")], "float64",
                             values, finish=finish)
    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    with pytest.raises(SystemExit):
        producer.main(["--data", str(data)])
    assert "the following arguments are required: --label" in capsys.readouterr().err
    assert producer.main(["--data", str(data), "--label", "a", "--note", str(tmp_path / "no" / "dir" / "x")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1 and not list(data.glob("*.number.*"))

    shard = ["--data", str(data), "--splits", "valid", "--offset", "3", "--shard-block-lines", "16",
             "--num-shards", "2", "--shard-id"]
    assert producer.main([*shard, "0", "--label", "a", "--note", str(tmp_path / "note.txt")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    n_valid = len(SideInfoDataset(str(data / "valid")))
    blocks = blocks_of(shard_lines(n_valid, 2, 0, 16), 16)
    assert summary["valid"] == {"blocks": len(blocks), "wrote": f"shard 0 of 2 (lines 1 to {blocks[-1].stop})"}
    assert (tmp_path / "note.txt").read_text() == "valid"
    assert producer.main([*shard, "0", "--label", "b"]) == 0  # --label is not recorded: the part is kept
    assert "already written: skipped" in capsys.readouterr().out
    assert producer.main([*shard, "0", "--label", "a", "--offset", "4"]) == 2
    assert "made with other options" in capsys.readouterr().err
    assert producer.main([*shard, "1", "--label", "a"]) == 0
    from preprocess import merge_shards
    assert merge_shards.main([str(data)]) == 0
    track = SideInfoDataset(str(data / "valid.number"))
    assert [float(track[i][0]) for i in range(len(track))] == [i + 3.0 for i in range(n_valid)]
