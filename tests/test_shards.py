"""Producers in shards (--num-shards/--shard-id, or torchrun ranks): the merged track is the one a single
process writes, byte for byte; finished shards are skipped on a rerun; mismatched or missing parts are
refused in one line."""

import shutil

import pytest

from fairseq_helpers import BIN, check, one_line_error, run, train

pytestmark = pytest.mark.e2e
BLOCK = ["--shard-block-lines", "64"]  # 300 lines: 5 blocks, which 2 and 3 shards do not divide


@pytest.mark.parametrize("lines, block", [(0, 4), (1, 4), (300, 64), (256, 64), (1000, 7)])
def test_shards_tile_the_lines_in_whole_blocks(lines, block):
    from fairseq_maskplug.data.track_shards import blocks_of, shard_lines

    for shards in range(1, 8):
        ranges = [shard_lines(lines, shards, i, block) for i in range(shards)]
        assert [x for r in ranges for x in r] == list(range(lines))
        for r in ranges:
            assert r.start % block == 0 or r.start == lines
            assert [x for b in blocks_of(r, block) for x in b] == list(r)
            assert all(len(b) == block for b in blocks_of(r, block)[:-1])
        sizes = [len(blocks_of(r, block)) for r in ranges]
        assert max(sizes) - min(sizes) <= 1  # as even as whole blocks allow


@pytest.fixture(scope="module")
def scored(tiny_data, tmp_path_factory):
    """The data, an MLM checkpoint, and the track one process writes."""
    root = tmp_path_factory.mktemp("shards")
    check(train(tiny_data / "bin", root / "ck", "--max-epoch", "1"))
    data = shutil.copytree(tiny_data / "bin", root / "one")
    check(run(score_pll(root / "ck" / "checkpoint_last.pt", data)))
    return root / "ck" / "checkpoint_last.pt", data, track(data)


def score_pll(checkpoint, data, *extra):
    return [BIN / "fairseq-maskplug-score-pll", "--checkpoint", checkpoint, "--data", data, "--splits", "train",
            "--word-starts", "token", *BLOCK, *extra]


def track(data):
    return {p.name: p.read_bytes() for p in sorted(data.glob("train.plt.*"))}


@pytest.mark.parametrize("shards", [1, 2, 3, 7])  # 7: more shards than blocks, two of them empty
def test_shards_merged_give_the_one_process_track_byte_for_byte(scored, tmp_path, shards):
    checkpoint, one, whole = scored
    data = shutil.copytree(one, tmp_path / "data", ignore=shutil.ignore_patterns("train.plt.*"))
    for shard in range(shards):
        check(run(score_pll(checkpoint, data, "--num-shards", shards, "--shard-id", shard)))
    if shards > 1:
        assert not (data / "train.plt.bin").exists()
        check(run([BIN / "fairseq-maskplug-merge-shards", data]))
    assert track(data) == whole
    assert not list(data.glob("*shard*"))


def test_a_rerun_skips_written_shards_and_mismatched_or_missing_parts_are_refused(scored, tmp_path):
    checkpoint, one, whole = scored
    data = shutil.copytree(one, tmp_path / "data", ignore=shutil.ignore_patterns("train.plt.*"))
    shard = ["--num-shards", "3", "--shard-id"]
    check(run(score_pll(checkpoint, data, *shard, "0")))
    check(run(score_pll(checkpoint, data, *shard, "1")))
    one_line_error(run([BIN / "fairseq-maskplug-merge-shards", data]),  # shard 2 was killed, or not yet run
                   f"shard 2 of 3 of {data}/train.plt is missing", "--num-shards 3 --shard-id 2")
    one_line_error(run(score_pll(checkpoint, data, *shard, "1", "--metric", "original")),
                   f"shard part {data}/train.plt.shard1-of-3.bin was made with other options")
    rerun = check(run(score_pll(checkpoint, data, *shard, "1")))
    assert "shard 1 of 3 of" in rerun.stdout and "already written: skipped" in rerun.stdout
    check(run(score_pll(checkpoint, data, *shard, "2")))
    (data / "train.plt.shard0-of-2.json").write_text("{}")  # a part of another run, with 2 shards
    one_line_error(run([BIN / "fairseq-maskplug-merge-shards", data]), "has parts of 2 and 3 shards: they overlap")
    (data / "train.plt.shard0-of-2.json").unlink()
    check(run([BIN / "fairseq-maskplug-merge-shards", data]))
    assert track(data) == whole


@pytest.mark.full
def test_two_torchrun_ranks_score_their_shards_and_rank_0_merges(scored, tmp_path):
    checkpoint, one, whole = scored
    data = shutil.copytree(one, tmp_path / "data", ignore=shutil.ignore_patterns("train.plt.*"))
    result = check(run([BIN / "torchrun", "--standalone", "--nproc-per-node", "2",
                        *score_pll(checkpoint, data)], timeout=600))
    assert "merged 2 shards" in result.stdout
    assert track(data) == whole and not list(data.glob("*shard*"))


@pytest.mark.full
def test_score_pll_writes_what_the_code_before_issue_54_wrote(scored, tmp_path):
    from fairseq_helpers import run_producer_before, written_files

    checkpoint, one, _ = scored
    data = shutil.copytree(one, tmp_path / "data", ignore=shutil.ignore_patterns("train.plt.*"))
    run_producer_before(tmp_path, "score_pll", *score_pll(checkpoint, data)[1:])
    assert written_files(data, "train.plt.*") == written_files(one, "train.plt.*")


def test_rows_that_do_not_fit_the_lines_are_refused_naming_the_line():
    import numpy as np

    from fairseq_maskplug.tools.sharding import rows_as_long_as_lines

    lengths, lines = np.array([3, 2, 4]), range(10, 13)
    rows = [np.zeros(3), np.zeros(2), np.zeros(4)]
    assert list(rows_as_long_as_lines(rows, lengths, "t", lines)) == rows
    assert list(rows_as_long_as_lines(iter(rows), lengths, "t", lines)) == rows  # lazy rows too
    for bad, message in (([np.zeros(3), np.zeros(3), np.zeros(4)], "t: line 12 has 2 tokens but 3 values"),
                         (rows[:2], "the producer gave fewer rows of values than the 3 lines"),
                         ([*rows, np.zeros(1)], "the producer gave more rows of values than the 3 lines")):
        with pytest.raises(ValueError, match=message):
            list(rows_as_long_as_lines(bad, lengths, "t", lines))
