"""PMI-Masking (Levine et al. 2021): Eq. 3 by hand, bounded counting, the lexicon and its units, the
policy's distribution over many seeds (budget, units never split, uniform order, 80/10/10 per unit),
the producer command, and training in fe_mlm (whole words) and tlm."""

import json
import math

import numpy as np
import pytest

from fairseq_helpers import check, json_logs, merge_gives_the_whole_tracks, refuses_a_shard_made_otherwise, train
from fairseq_maskplug.masking import Corruption, corrupt, maskable_positions
from fairseq_maskplug.masking.pmi import PMIPolicy, PMIPolicyOptions, pmi_mask, pmi_views, unit_ids
from fairseq_maskplug.scoring.pmi_lexicon import (LENGTH_SHARES, NGramCounts, build_lexicon, lowest_cut, merge_counts,
                                                  pack_grams, pmi_n, read_lexicon, renumber_keys, segment,
                                                  unit_start_track, unpack_grams)
from preprocess import pmi_units
from stats_helpers import assert_mean, assert_proportion, assert_uniform
from test_tlm import data as tlm_data, train_tlm  # noqa: F401  (the TLM fixture, reused)

SEEDS = 4000


# ---- the score and the lexicon -------------------------------------------------------------------

def test_pmi_n_is_equation_3_by_hand():
    counts = NGramCounts(5)
    for line in ["new york city is big", "new york is big", "the city is big", "york city"]:
        counts.add(line.split())
    held, _ = counts.as_dicts()
    p = {g: held[g] / counts.totals[len(g)] for g in held}
    bigram = ("new", "york")
    assert math.isclose(pmi_n(bigram, counts), math.log(p[bigram] / (p[("new",)] * p[("york",)])))
    trigram = ("new", "york", "city")
    segmentations = [p[("new",)] * p[("york",)] * p[("city",)], p[("new", "york")] * p[("city",)],
                     p[("new",)] * p[("york", "city")]]
    assert math.isclose(pmi_n(trigram, counts), math.log(p[trigram] / max(segmentations)))
    # the authors' lists: p(n-gram) multiplied in once more
    assert math.isclose(pmi_n(trigram, counts, "authors"), pmi_n(trigram, counts) + math.log(p[trigram]))


def test_bounded_counting_drops_the_rarest_and_reports_its_error_bound():
    rng = np.random.default_rng(0)
    lines = [[f"w{int(rng.zipf(1.5)) % 200}" for _ in range(12)] for _ in range(300)]
    exact, bounded = NGramCounts(3), NGramCounts(3, max_entries=500)
    for line in lines:
        exact.add(line)
        bounded.add(line)
    assert exact.threshold == 0 and bounded.threshold > 0 and len(bounded) <= 500
    assert bounded.totals == exact.totals
    (true, _), (held, deltas) = exact.as_dicts(), bounded.as_dicts()
    assert sum(len(line) - k + 1 for line in lines for k in (1, 2, 3)) == sum(true.values())  # exact: all there
    for gram, count in held.items():  # never above the truth, low by at most its delta <= threshold
        delta = deltas.get(gram, 0)
        assert delta <= bounded.threshold and count <= true[gram] <= count + delta
    for gram, count in true.items():  # what was dropped occurred at most `threshold` times
        assert gram in held or count <= bounded.threshold


def test_n_gram_keys_sort_as_their_words_and_renumber_as_them():
    """pack_grams: keys of 1- to 5-grams of 32-bit word numbers sort as the number tuples, unpack to them, and
    renumber (an increasing map) as the numbers do, the padding of odd lengths included."""
    rng = np.random.default_rng(4)
    renumber = np.sort(rng.choice(2**32 - 1, 2**12, replace=False)).astype(np.uint64)
    for k in range(1, 6):
        grams = rng.integers(0, 2**32 - 1, (500, k)).astype(np.uint64)
        grams[:100] = grams[100:200]  # equal n-grams, equal keys
        keys = pack_grams(grams)
        assert (unpack_grams(keys, k) == grams).all()
        assert grams[np.argsort(keys, kind="stable")].tolist() == sorted(grams.tolist())
        small = rng.integers(0, len(renumber), (500, k)).astype(np.uint64)
        assert (renumber_keys(pack_grams(small), k, renumber) == pack_grams(renumber[small])).all()
    with pytest.raises(ValueError, match="2\\*\\*32"):
        pack_grams(np.array([[2**32]], dtype=np.uint64))


def test_the_cap_raises_the_threshold_to_the_lowest_that_fits():
    """lowest_cut is the loop of lossy counting (raise by one until at most `most` are above), on small and
    large bounds (the histogram's range and the sort beyond it)."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        bounds = rng.integers(1, int(rng.choice([5, 50, 9000])), size=int(rng.integers(1, 60)))
        least, most = int(rng.integers(1, 30)), int(rng.integers(0, 40))
        expected = least
        while (bounds > expected).sum() > most:
            expected += 1
        assert lowest_cut(bounds, least, most) == expected


def test_the_lexicon_keeps_the_authors_length_shares_and_the_min_count():
    rng = np.random.default_rng(1)
    counts = NGramCounts(5)
    for _ in range(400):
        counts.add([f"w{int(x)}" for x in rng.integers(0, 12, 10)])
    lexicon = build_lexicon(counts, 40, min_count=3)
    by_length = {n: [g for g in lexicon if len(g) == n] for n in LENGTH_SHARES}
    assert len(by_length[2]) == 20 and len(by_length[3]) == 10
    held, _ = counts.as_dicts()
    assert all(held[g] > 3 for g in lexicon)
    assert all(lexicon[g] == pmi_n(g, counts) for g in lexicon)  # the table-at-a-time scores are pmi_n's
    bigram_scores = sorted((pmi_n(g, counts) for g, c in held.items() if len(g) == 2 and c > 3), reverse=True)
    assert sorted((lexicon[g] for g in by_length[2]), reverse=True) == bigram_scores[:20]  # the top ranked


def test_a_published_list_is_read_and_a_bad_line_is_named():
    assert set(read_lexicon(["new york\t3.2\n", "\n", "The United States\n"], "list.txt")) == {
        ("new", "york"), ("the", "united", "states")}
    with pytest.raises(ValueError, match="list.txt:2: 'york' has 1 word"):
        read_lexicon(["new york\n", "york\n"], "list.txt")


def test_segmentation_prefers_the_longer_match_and_chooses_among_overlaps_at_random():
    lexicon = {("the", "united", "states"), ("united", "states"), ("by", "the", "way"), ("the", "way", "out")}
    words = "the united states said by the way out".split()
    outcomes = set()
    for seed in range(200):
        starts = segment(words, lexicon, 5, np.random.default_rng(seed))
        assert starts[:2] == [0, 3]  # "the united states" holds "united states": one unit
        outcomes.add(tuple(starts[2:]))
    assert outcomes == {(4, 7), (4, 5)}  # "by the way" + "out", or "by" + "the way out"
    assert unit_start_track(6, np.array([0, 2, 3]), [0, 2]).tolist() == [1, 0, 0, 1, 0, 0]


# ---- the policy's distribution -------------------------------------------------------------------

def block_of_units(lengths):
    """(<s> + units of these lengths + </s>) as tokens 5.., its unit-start track, its maskable flags."""
    starts = [0]
    for n in lengths:
        starts += [1] + [0] * (n - 1)
    starts += [0]
    tokens = np.array([0] + list(range(5, 5 + sum(lengths))) + [2])
    return tokens, np.array(starts), maskable_positions(tokens, (0, 1, 2))


def test_units_are_never_split_the_budget_holds_and_every_unit_left_out_did_not_fit():
    lengths = [1, 2, 3, 1, 1, 4, 2, 1, 5, 1, 2, 1, 3, 1, 1]
    tokens, starts, maskable = block_of_units(lengths)
    ids = unit_ids(starts, maskable)
    sizes = np.bincount(ids)
    counts, budgets = [], []
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        mask = pmi_mask(starts, maskable, 0.15, rng)
        budget = int(0.15 * maskable.sum() + np.random.default_rng(seed).random())
        per_unit = np.bincount(ids, weights=mask, minlength=len(sizes))
        assert set(np.flatnonzero(per_unit)) == set(np.flatnonzero(per_unit == sizes)), "a unit was split"
        count = int(mask.sum())
        assert count <= budget
        left_out = (per_unit == 0) & np.isin(np.arange(len(sizes)), ids[maskable])
        assert (sizes[left_out] > budget - count).all()  # BERT's rule: a unit is skipped only when it does not fit
        counts.append(count)
        budgets.append(budget)
    assert 0 <= np.mean(budgets) - np.mean(counts) < 1  # the realised rate stays under the budget, close to it


def test_units_of_equal_length_are_drawn_uniformly_and_the_rate_is_met():
    lengths = [2] * 20
    tokens, starts, maskable = block_of_units(lengths)
    ids = unit_ids(starts, maskable)
    hits, counts = np.zeros(len(lengths)), []
    for seed in range(SEEDS):
        mask = pmi_mask(starts, maskable, 0.3, np.random.default_rng(seed))
        hits += np.bincount(ids, weights=mask, minlength=len(lengths) + 2)[1:-1] > 0
        counts.append(int(mask.sum()))
    assert_uniform(hits, "units chosen")
    # units of 2 fill an even budget exactly and an odd one to one less: E = 0.3 n - P(odd budget)
    n = int(maskable.sum())
    odd = sum(1 for b in (int(0.3 * n), int(0.3 * n) + 1) if b % 2) and (0.3 * n - int(0.3 * n))
    assert_mean(counts, 0.3 * n - odd, "tokens masked")


def test_single_token_units_meet_the_random_policys_count_exactly():
    tokens, starts, maskable = block_of_units([1] * 30)
    for seed in range(200):
        count = int(pmi_mask(starts, maskable, 0.15, np.random.default_rng(seed)).sum())
        assert count == int(0.15 * 30 + np.random.default_rng(seed).random())


def test_views_are_disjoint_whole_units_and_the_first_is_the_policys_mask():
    tokens, starts, maskable = block_of_units([1, 2, 3, 1, 1, 2, 1, 1, 2, 1, 1, 3, 1, 1, 2])
    ids = unit_ids(starts, maskable)
    for seed in range(300):
        views = pmi_views(starts, maskable, 0.2, np.random.default_rng(seed), 4)
        assert views.sum(axis=0).max() <= 1
        for view in views:
            per_unit = np.bincount(ids, weights=view)
            assert set(np.flatnonzero(per_unit)) == set(np.flatnonzero(per_unit == np.bincount(ids)))
        assert np.array_equal(views[0], pmi_mask(starts, maskable, 0.2, np.random.default_rng(seed)))
    with pytest.raises(ValueError, match="k \\* rate <= 1"):
        pmi_views(starts, maskable, 0.3, np.random.default_rng(0), 4)


def test_the_80_10_10_fate_is_drawn_once_per_unit():
    tokens, starts, maskable = block_of_units([3] * 10)
    ids = unit_ids(starts, maskable)
    corruption = Corruption(mask_idx=4, replacement_ids=np.arange(100, 200))
    masked_units = units = 0
    for seed in range(2000):
        rng = np.random.default_rng(seed)
        mask = pmi_mask(starts, maskable, 0.3, rng)
        source = corrupt(tokens, mask, rng, corruption, ids)
        for unit in np.unique(ids[mask]):
            fates = {"mask" if s == 4 else "keep" if s == t else "random"
                     for s, t in zip(source[ids == unit], tokens[ids == unit])}
            assert len(fates) == 1, f"unit {unit} has fates {fates}"
            units += 1
            masked_units += fates == {"mask"}
    assert_proportion(masked_units, units, 0.8, "units masked")


def test_the_policy_reads_its_track_and_declares_units():
    policy = PMIPolicy(PMIPolicyOptions(pmi_track="pmi_units", pmi_mask_prob=0.15))
    tokens, starts, maskable = block_of_units([2, 1, 3])
    assert policy.side_info_names == ("pmi_units",) and policy.corrupts_units
    assert policy.units(tokens, maskable, {"pmi_units": starts}).tolist() == [0, 1, 1, 2, 3, 3, 3, 4]


# ---- the producer and training -------------------------------------------------------------------

def test_pmi_units_command_writes_a_track_of_whole_word_units(tiny_data, tmp_path, capsys):
    import shutil

    from fairseq.data import Dictionary, data_utils

    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    lexicon = tmp_path / "lexicon.tsv"
    assert pmi_units.main(["--data", str(data), "--min-count", "1", "--lexicon-size", "50",
                           "--write-lexicon", str(lexicon)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["word_boundaries"] == "whitespace" and summary["lexicon"]["2"] == 25
    d = Dictionary.load(str(data / "dict.txt"))
    tokens = data_utils.load_indexed_dataset(str(data / "train"), d)
    track = data_utils.load_indexed_dataset(str(data / "train.pmi_units"), None)
    listed = {tuple(line.split("\t")[0].split()) for line in lexicon.read_text().splitlines()}
    multi = 0
    for i in range(len(tokens)):
        line, starts = tokens[i].numpy(), track[i].numpy()
        assert starts[0] == 1 and starts[-1] == 0  # the first word starts a unit; </s> is none
        cuts = np.append(np.flatnonzero(starts), len(line) - 1)
        for a, b in zip(cuts, cuts[1:]):
            if b - a > 1:  # a unit of several words is a lexicon n-gram
                assert tuple(d.symbols[t] for t in line[a:b]) in listed
                multi += 1
    assert multi > 0 and summary["train"]["units"] == int(sum(track[i].sum() for i in range(len(track))))
    # the written list reads back as the same lexicon, and gives the same units
    assert pmi_units.main(["--data", str(data), "--splits", "valid", "--lexicon", str(lexicon),
                           "--name", "again"]) == 0
    again = data_utils.load_indexed_dataset(str(data / "valid.again"), None)
    first = data_utils.load_indexed_dataset(str(data / "valid.pmi_units"), None)
    assert all(np.array_equal(again[i].numpy(), first[i].numpy()) for i in range(len(first)))


def pmi_tracks(data, name="pmi_units"):
    return {p.name: p.read_bytes() for p in sorted(data.glob(f"*.{name}.*")) if p.is_file()}


def stored(counts):
    """``counts`` written as a shard's part and read back (preprocess/pmi_units.py's save_counts/load_counts)."""
    import io

    from preprocess.pmi_units import load_counts, save_counts

    f = io.BytesIO()
    save_counts(counts, f)
    f.seek(0)
    return load_counts(f)


def test_counts_stored_as_arrays_read_back_whole():
    """A part's arrays hold every count, delta, total and the threshold, words of any script included."""
    rng = np.random.default_rng(3)
    vocabulary = ["a", "été", "数据", "x\ty", "", "naïve"]
    counts = NGramCounts(4, max_entries=40)
    for _ in range(60):
        counts.add([vocabulary[i] for i in rng.integers(len(vocabulary), size=int(rng.integers(0, 9)))])
    assert counts.threshold > 0 and counts.as_dicts()[1]  # pruned: the deltas are stored too
    back = stored(counts)
    assert (back.as_dicts(), back.words(), back.totals, back.threshold, back.max_n, back.max_entries) == (
        counts.as_dicts(), counts.words(), counts.totals, counts.threshold, counts.max_n, counts.max_entries)
    empty = stored(NGramCounts(5))
    assert not len(empty) and empty.totals == [0] * 6


def test_merged_counts_of_shards_are_the_one_process_counts_and_keep_the_bounds_when_pruned():
    rng = np.random.default_rng(7)
    lines = [[f"w{int(rng.zipf(1.5)) % 200}" for _ in range(12)] for _ in range(300)]
    whole = NGramCounts(3)
    for words in lines:
        whole.add(words)
    for cuts in ([150], [37, 200], [0, 1, 299]):  # 2, 3 and 4 shards, one of them empty
        parts = []
        for a, b in zip([0, *cuts], [*cuts, len(lines)]):
            part = NGramCounts(3)
            for words in lines[a:b]:
                part.add(words)
            parts.append(stored(part))
        merged = merge_counts(parts)
        assert merged.as_dicts() == whole.as_dicts() and merged.totals == whole.totals and merged.threshold == 0
        assert merged.words() == whole.words()  # numbered as one process numbers them
    bounded = [NGramCounts(3, max_entries=300), NGramCounts(3, max_entries=300)]
    for i, words in enumerate(lines):
        bounded[i * 2 // len(lines)].add(words)
    merged = merge_counts(bounded)
    assert 0 < merged.threshold == sum(part.threshold for part in bounded) and len(merged) <= 300
    held, deltas = merged.as_dicts()
    for gram, true in whole.as_dicts()[0].items():  # count <= true <= count + delta <= threshold; dropped: rare
        if gram in held:
            assert held[gram] <= true <= held[gram] + deltas.get(gram, 0)
            assert deltas.get(gram, 0) <= merged.threshold
        else:
            assert true <= merged.threshold
    with pytest.raises(ValueError, match="different shapes"):
        merge_counts([NGramCounts(3), NGramCounts(4)])


def test_pmi_units_in_shards_merge_into_the_one_process_tracks(tiny_data, tmp_path, capsys):
    """300 + 40 lines in blocks of 16 (19 and 3 blocks, which 2 and 3 shards do not divide), each shard run
    twice as an independent job (n-gram counts, then units), merged by merge-shards DATA: the one-process
    tracks byte for byte, and the counts removed; a killed shard reruns alone; counts made with other options
    are refused in one line."""
    import shutil

    args = ["--min-count", "1", "--lexicon-size", "50", "--shard-block-lines", "16"]
    one = shutil.copytree(tiny_data / "bin", tmp_path / "one")
    assert pmi_units.main(["--data", str(one), *args]) == 0
    whole = pmi_tracks(one)
    assert len(whole) == 6 and json.loads(capsys.readouterr().out)["lexicon"]["2"] == 25
    for shards in (2, 3):
        data = shutil.copytree(tiny_data / "bin", tmp_path / f"shards{shards}")
        shard = ["--data", str(data), *args, "--num-shards", str(shards), "--shard-id"]
        for i in range(shards):
            assert pmi_units.main(shard + [str(i)]) == 0
        first = capsys.readouterr().out
        assert "n-gram counts written; shard 1 has not written theirs" in first or shards == 3
        assert "n-gram counts written; shards 1, 2 have not written theirs" in first or shards == 2
        assert pmi_tracks(data) and all(f".shard{shards - 1}-of-" in name for name in pmi_tracks(data))  # the last
        for i in range(shards):
            assert pmi_units.main(shard + [str(i)]) == 0
            out = capsys.readouterr().out
            assert "its n-gram counts are written already: skipped" in out
            summary = json.loads(out.strip().splitlines()[-1])
            assert summary["lexicon"]["2"] == 25 and ("train" in summary) == (i < shards - 1)  # the last: written
        if shards == 3:  # shard 2 was killed while writing its units: it reruns alone, the others skip theirs
            for path in data.glob("*.pmi_units.shard2-of-3.json"):
                path.unlink()
            for i in (0, 2):
                assert pmi_units.main(shard + [str(i)]) == 0
                assert ("is already written: skipped" in capsys.readouterr().out) == (i == 0)
        merge_gives_the_whole_tracks(capsys, data, pmi_tracks, whole)
    refuses_a_shard_made_otherwise(capsys, pmi_units.main, shutil.copytree(tiny_data / "bin", tmp_path / "other"), args,
                                   ["--max-ngrams", "100"])


@pytest.mark.e2e
@pytest.mark.full
def test_two_torchrun_ranks_write_the_one_process_pmi_units(tiny_data, tmp_path):
    import shutil

    from fairseq_helpers import BIN, run

    args = ["--min-count", "1", "--lexicon-size", "50", "--shard-block-lines", "16"]
    one = shutil.copytree(tiny_data / "bin", tmp_path / "one")
    check(run([BIN / "fairseq-maskplug-pmi-units", "--data", one, *args]))
    ranks = shutil.copytree(tiny_data / "bin", tmp_path / "ranks")
    result = check(run([BIN / "torchrun", "--standalone", "--nproc-per-node", "2", BIN / "fairseq-maskplug-pmi-units",
                        "--data", ranks, *args], timeout=600))
    assert "merged 2 shards" in result.stdout
    assert "fairseq-maskplug-merge-shards" not in result.stdout  # rank 0 merges: no rank tells the user to
    assert pmi_tracks(ranks) == pmi_tracks(one) and not list(ranks.glob("*shard*"))


@pytest.mark.parametrize("flags, message", [
    (["--splits", "nope"], "no split 'nope'"),
    (["--lexicon", "{tmp}/bad.txt"], "bad.txt:1: 'york' has 1 word"),
    (["--write-lexicon", "/proc/lexicon.tsv"], "cannot write /proc/lexicon.tsv"),
    (["--gpt2-encoder-json", "encoder.json"], "read only for GPT-2"),
])
def test_pmi_units_refuses_bad_input_before_writing(tiny_data, tmp_path, capsys, flags, message):
    import shutil

    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    (tmp_path / "bad.txt").write_text("york\n")
    assert pmi_units.main(["--data", str(data), *[f.format(tmp=tmp_path) for f in flags]]) == 2
    assert message in capsys.readouterr().err
    assert not list(data.glob("*.pmi_units.*"))


@pytest.fixture(scope="module")
def pmi_data(tiny_data, tmp_path_factory):
    import shutil

    data = shutil.copytree(tiny_data / "bin", tmp_path_factory.mktemp("pmi") / "bin")
    assert pmi_units.main(["--data", str(data), "--min-count", "2"]) == 0
    return data


@pytest.mark.e2e
def test_fe_mlm_trains_on_pmi_units_of_whole_words(pmi_data, tmp_path):
    result = check(train(pmi_data, tmp_path / "ck", "--mask-policy", "pmi", "--mask-unit", "word", "--fe-views", "3",
                         "--max-update", "4", task="fe_mlm"))
    record = json_logs(result, "train")[-1]
    assert 0 < float(record["train_mask_rate"]) < 0.3 and float(record["train_unit_mask_rate"]) > 0


@pytest.mark.e2e
def test_tlm_trains_with_pmi_units_on_both_sources(tlm_data, tmp_path):  # noqa: F811
    for directory, splits in (("task/input0", "train,valid"), ("ext", "train")):
        assert pmi_units.main(["--data", str(tlm_data / directory), "--splits", splits, "--count-split", "train",
                               "--min-count", "2"]) == 0
    result = check(train_tlm(tlm_data, tmp_path / "ck", "--mask-policy", "pmi", "--max-update", "4"))
    assert json_logs(result, "train")[-1]["train_num_updates"] == "4"


def test_unit_lookups_equal_numpy_s_set_operations():
    """The one-comparison forms (non-decreasing unit ids) give what ``np.unique`` and ``np.isin`` give: the maskable
    units, a chosen set's positions, and the corruption's unit of each chosen position (sorted or not)."""
    from fairseq_maskplug.masking.corruption import _unit_order
    from fairseq_maskplug.masking.pmi import _covering, _units

    rng = np.random.default_rng(4)
    for _ in range(1000):
        n = int(rng.integers(1, 30))
        starts, maskable = (rng.random(n) < 0.5).astype(np.uint8), rng.random(n) < rng.uniform(0.0, 1.0)
        ids, candidates, lengths = _units(starts, maskable)
        np.testing.assert_array_equal(candidates, np.unique(ids[maskable]))
        chosen = candidates[rng.random(len(candidates)) < 0.5]
        np.testing.assert_array_equal(_covering(ids, chosen, len(lengths)), np.isin(ids, chosen))
        units = rng.integers(0, 6, n)
        for order in (units, np.sort(units)):
            np.testing.assert_array_equal(_unit_order(order), np.unique(order, return_inverse=True)[1])
