"""InforMask (Sadeq et al. 2022): the co-occurrence PMI, the informative score, the sample-and-score rates and
the policy that masks by them; the producer on real binarized data and a training run."""

import json
import shutil

import numpy as np
import pytest

from fairseq_helpers import (BIN, CPU_RUN, TINY_ROBERTA, check, json_logs, merge_gives_the_whole_tracks, one_line_error,
                             refuses_a_shard_made_otherwise, run)
from fairseq_maskplug.masking import build_mask_policy
from fairseq_maskplug.scoring.informask import (CooccurrencePMI, best_of_candidates, covered_occurrences,
                                                informative_scores, rates_of, token_rates)


def test_pmi_is_the_log_ratio_of_line_co_occurrence_to_independence():
    lines = [np.array([5, 6]), np.array([5, 6, 7]), np.array([7, 8]), np.array([5, 8, 8])]
    counts = CooccurrencePMI(lines, 10, chunk_lines=2)  # two chunks merged
    pmi = counts.pmi(np.array([5, 6, 7]))
    p5, p6, p7, p8 = 3 / 4, 2 / 4, 2 / 4, 2 / 4
    assert pmi[0, 1] == pytest.approx(np.log((2 / 4) / (p5 * p6)))  # 5 and 6 share two of four lines
    assert pmi[0, 2] == pytest.approx(np.log((1 / 4) / (p5 * p7)))
    assert pmi[1, 0] == pmi[0, 1] and np.all(np.diag(pmi) == 0)
    assert counts.pmi(np.array([8, 8]))[0, 1] == pytest.approx(np.log(p8 / (p8 * p8)))  # a token with itself
    with pytest.raises(ValueError, match="does not hold"):
        counts.pmi(np.array([6, 8]))  # never on one line


def test_the_informative_score_sums_pmi_from_masked_to_unmasked_tokens():
    rng = np.random.default_rng(0)
    pmi = rng.normal(size=(7, 7))
    masks = rng.random((5, 7)) < 0.4
    expected = [sum(pmi[i, j] for i in range(7) for j in range(7) if m[i] and not m[j]) for m in masks]
    assert np.allclose(informative_scores(pmi, masks), expected)


def test_the_kept_mask_scores_best_among_same_size_candidates():
    pmi = np.random.default_rng(1).normal(size=(20, 20))
    for seed in range(30):
        kept = best_of_candidates(pmi, 0.15, 8, np.random.default_rng(seed))
        one = best_of_candidates(pmi, 0.15, 1, np.random.default_rng(seed))
        assert kept.sum() == one.sum() in (3, 4)  # floor(0.15 * 20 + U): one count per line
        assert informative_scores(pmi, kept)[0] >= informative_scores(pmi, one)[0]


def corpus(seed, n_lines=600):
    """Lines of 8 to 15 filler tokens (ids 10..39, uniform) and, in half of them, the pair 5 and 6 together."""
    rng = np.random.default_rng(seed)
    lines = []
    for k in range(n_lines):
        line = list(rng.integers(10, 40, rng.integers(8, 16)))
        if k % 2 == 0:
            line[1:1] = [5, 6]
        lines.append(np.array(line))
    return lines


def test_rates_keep_the_mean_rate_and_favour_tokens_their_context_predicts():
    """The count of each line is drawn as random masking draws it, so the rate over all tokens is p within 4
    standard errors (per line the count's variance is at most 1/4: SE <= sqrt(600/4)/tokens). Tokens 5 and 6 always
    come together (PMI log 2 with each other) while fillers are independent: a mask that takes 5 and leaves 6
    scores higher, so both are masked well above the fillers' rate."""
    lines = corpus(0)
    counts = CooccurrencePMI(lines, 50)
    rates = token_rates(lines, counts, 0.15, 10, seed=3, default=0.15)
    tokens = np.concatenate(lines)
    assert abs(rates[tokens].mean() - 0.15) < 4 * np.sqrt(len(lines) / 4) / len(tokens)
    fillers = rates[10:40].mean()
    assert rates[5] > 1.5 * fillers and rates[6] > 1.5 * fillers
    assert rates[45] == 0.15  # never seen: the default


def test_the_policy_masks_each_token_at_its_rate():
    """Bernoulli(rate_i) per maskable token: over 2000 draws each position's frequency lies within 4 standard
    errors of its rate; fe_mlm's views are disjoint and each follows the same rates."""
    policy = build_mask_policy("informask", {})
    rates = np.linspace(0.0, 0.3, 12)
    maskable = np.ones(12, dtype=bool)
    maskable[0] = False
    side = {"informask_rate": rates}
    hits, views = np.zeros(12), np.zeros(12)
    for seed in range(2000):
        hits += policy.choose(np.arange(12), maskable, side, np.random.default_rng(seed))
        v = policy.views(np.arange(12), maskable, side, np.random.default_rng(seed), 3)
        assert (v.sum(axis=0) <= 1).all()
        views += v[1]
    expected = np.where(maskable, rates, 0)
    se = np.sqrt(expected * (1 - expected) / 2000) + 1e-12
    assert np.all(np.abs(hits / 2000 - expected) <= 4 * se)
    assert np.all(np.abs(views / 2000 - expected) <= 4 * se)


def test_counts_and_occurrences_of_a_corpus_cut_anywhere_sum_to_the_one_pass_ones():
    """The shards' exchange (preprocess/informask.py): pair counts merged from parts, and each part's covered
    occurrences with its lines numbered from the part's first, give the one-pass counts and rates exactly."""
    rng = np.random.default_rng(3)
    lines = [rng.integers(4, 40, size=rng.integers(2, 30)) for _ in range(60)]
    whole = CooccurrencePMI(lines, 40, window=16)
    rates = token_rates(lines, whole, 0.15, 5, seed=7, default=0.15, window=16)
    for cuts in ([0, 60], [0, 1, 60], [0, 17, 18, 45, 60]):
        parts = [CooccurrencePMI(lines[a:b], 40, window=16) for a, b in zip(cuts, cuts[1:])]
        merged = CooccurrencePMI.merged([parts[0]] + [p.to_arrays() for p in parts[1:]])
        for name in ("keys", "pair_lines", "token_lines"):
            assert np.array_equal(getattr(merged, name), getattr(whole, name))
        assert merged.lines == whole.lines and merged.keys.dtype == whole.keys.dtype
        covered = [covered_occurrences(lines[a:b], merged, 0.15, 5, 7, 16, first_line=a) for a, b in zip(cuts, cuts[1:])]
        assert np.array_equal(rates_of(sum(c[0] for c in covered), sum(c[1] for c in covered), 0.15), rates)
    with pytest.raises(ValueError, match="vocabularies of"):
        CooccurrencePMI.merged([CooccurrencePMI(lines, 40), CooccurrencePMI(lines, 41)])


@pytest.fixture(scope="module")
def rated_data(tiny_data, tmp_path_factory):
    return shutil.copytree(tiny_data / "bin", tmp_path_factory.mktemp("informask") / "bin")


def test_producer_writes_the_tracks_and_the_table(rated_data, capsys):
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    from fairseq_maskplug.data.side_info import load_side_info
    from fairseq_maskplug.masking.values import PROBABILITY
    from preprocess import informask

    assert informask.main(["--data", str(rated_data), "--write-table", str(rated_data / "table.json")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["lines"] == 300 and abs(summary["mean_rate_over_tokens"] - 0.15) < 0.02
    table = json.loads((rated_data / "table.json").read_text())
    for split in ("train", "valid"):
        tokens = MMapIndexedDataset(str(rated_data / split))
        track = load_side_info(str(rated_data / split), "informask_rate", tokens, split, PROBABILITY)
        for i in range(5):
            ids, values = tokens[i].numpy(), track[i].numpy()
            assert values[-1] == 0.0  # </s>
            assert all(values[k] == pytest.approx(table[str(t)]) for k, t in enumerate(ids[:-1]))


def test_producer_refuses_a_missing_split_before_any_work(rated_data, capsys):
    from preprocess import informask

    assert informask.main(["--data", str(rated_data), "--splits", "train,test", "--name", "x"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "test" in err
    assert not (rated_data / "train.x.bin").exists()


def test_informask_in_shards_writes_the_one_process_tracks(tiny_data, tmp_path, capsys):
    """300 + 40 lines in blocks of 16, 2 shards run as independent jobs, three runs each (pair counts, covered
    occurrences, their lines of the tracks), merged by merge-shards DATA: the one-process tracks byte for byte,
    and the parts removed; parts made with other options are refused in one line."""
    from preprocess import informask

    def tracks(data):
        return {p.name: p.read_bytes() for p in sorted(data.glob("*.informask_rate.*")) if p.is_file()}

    args = ["--shard-block-lines", "16"]
    one = shutil.copytree(tiny_data / "bin", tmp_path / "one")
    assert informask.main(["--data", str(one), *args]) == 0
    whole = tracks(one)
    assert len(whole) == 6
    data = shutil.copytree(tiny_data / "bin", tmp_path / "shards")
    shard = ["--data", str(data), *args, "--num-shards", "2", "--shard-id"]
    said = []
    for run_ in range(3):
        for i in (0, 1):
            capsys.readouterr()
            assert informask.main(shard + [str(i)]) == 0
            said.append(capsys.readouterr().out)
    assert "pair counts written; shard 1 has not written theirs" in said[0]
    assert "covered occurrences written; shard 0 has not written theirs" in said[1]
    assert "its pair counts are written already: skipped" in said[2] and "merge-shards" in said[2]
    assert "its covered occurrences are written already: skipped" in said[5]
    assert tracks(data) != whole  # parts only, until the merge
    merge_gives_the_whole_tracks(capsys, data, tracks, whole)
    refuses_a_shard_made_otherwise(capsys, informask.main, shutil.copytree(tiny_data / "bin", tmp_path / "other"), args,
                                   ["--window", "8"])


@pytest.mark.e2e
def test_guided_mlm_trains_with_informask(rated_data, tmp_path):
    from preprocess import informask

    if not (rated_data / "train.informask_rate.bin").exists():
        assert informask.main(["--data", str(rated_data)]) == 0
    result = check(run([BIN / "fairseq-maskplug-train", rated_data, "--task", "guided_mlm", "--mask-policy",
                        "informask", "--tokens-per-sample", "32", "--save-dir", tmp_path / "ck", "--max-update", "3",
                        *TINY_ROBERTA, *CPU_RUN]))
    rates = [float(r["mask_rate"]) for r in json_logs(result, "train_inner")]
    assert len(rates) == 3 and all(0.05 < r < 0.3 for r in rates)
    schedule = run([BIN / "fairseq-maskplug-train", rated_data, "--task", "guided_mlm", "--mask-policy", "informask",
                    "--mask-prob-schedule", "linear", "--mask-prob-schedule-updates", "4", "--save-dir",
                    tmp_path / "s", *TINY_ROBERTA, *CPU_RUN])
    one_line_error(schedule, "--mask-prob-schedule linear needs a --mask-policy with a rate")


def test_the_authors_full_replacement_puts_the_mask_at_every_chosen_position(rated_data):
    """--leave-unmasked-prob 0 --random-token-prob 0: the authors' objective replaces 100% of the chosen tokens."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from preprocess import informask

    if not (rated_data / "train.informask_rate.bin").exists():
        assert informask.main(["--data", str(rated_data)]) == 0
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(rated_data), "--task", "guided_mlm", "--mask-policy", "informask", "--tokens-per-sample", "32",
        "--arch", "roberta_base", "--leave-unmasked-prob", "0", "--random-token-prob", "0"])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    task.load_dataset("train")
    dataset, pad = task.dataset("train"), task.dictionary.pad()
    chosen = 0
    for i in range(len(dataset)):
        item = dataset[i]
        where = item["target"] != pad
        chosen += int(where.sum())
        assert (item["source"][where] == task.mask_idx).all()
    assert chosen > 100
