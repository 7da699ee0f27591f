"""PLT scoring: the word-l2r pattern, batched = naive on a real model, the CLI's aligned output."""

import numpy as np
import pytest

from fairseq_helpers import BIN, check, run, train
from fairseq_maskplug.scoring.pll import PLTScorer, iterate_lines, masked_copies


def test_word_l2r_masks_the_token_and_the_rest_of_its_word():
    tokens = np.array([0, 11, 12, 13, 14, 15, 2])  # <s> [11 12 13] [14 15] </s>
    word_start = np.array([True, True, False, False, True, False, True])
    scored = np.array([False, True, True, True, True, True, False])
    assert [(j, m.tolist()) for j, m in masked_copies(tokens, scored, word_start)] == [
        (1, [1, 2, 3]), (2, [2, 3]), (3, [3]), (4, [4, 5]), (5, [5])]
    assert [(j, m.tolist()) for j, m in masked_copies(tokens, scored, word_start, "original")] == [
        (j, [j]) for j in range(1, 6)]


@pytest.fixture(scope="module")
def trained(tiny_data, tmp_path_factory):
    """A tiny roberta trained for 2 epochs with guided_mlm, and its task."""
    from fairseq import checkpoint_utils
    save = tmp_path_factory.mktemp("pll") / "ck"
    check(train(tiny_data / "bin", save, "--max-epoch", "2"))
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(save / "checkpoint_last.pt")], arg_overrides={"data": str(tiny_data / "bin")})
    return save / "checkpoint_last.pt", models[0], task


@pytest.mark.e2e
def test_batched_scorer_equals_the_naive_loop(tiny_data, trained):
    from fairseq.data import data_utils
    _, model, task = trained
    d = task.source_dictionary
    # pretend words: a token starts a word unless its id is odd (multi-subword words occur)
    word_starts = np.array([i < d.nspecial or i % 2 == 0 for i in range(len(d))])
    scorer = PLTScorer(model, task.mask_idx, d.pad(), word_starts)
    lines = list(iterate_lines(data_utils.load_indexed_dataset(str(tiny_data / "bin" / "valid"), d), d.bos()))[:12]
    special = (d.bos(), d.eos(), d.pad())
    naive = scorer.score_naive(lines, special)
    batched = scorer.score(lines, special, max_tokens=100, progress=False)
    for a, b, line in zip(naive, batched, lines):
        np.testing.assert_allclose(a, b, atol=1e-4)
        assert a[0] == 1 and a[-1] == 1 and ((a[1:-1] > 0) & (a[1:-1] < 1)).all()
    # word_l2r differs from original wherever a word has later subwords
    original = PLTScorer(model, task.mask_idx, d.pad(), word_starts, "original").score(lines, special, progress=False)
    assert any(not np.allclose(a, b) for a, b in zip(original, batched))


@pytest.mark.e2e
def test_cli_writes_aligned_plt(tiny_data, trained, tmp_path):
    import shutil
    from fairseq.data import Dictionary, data_utils
    from fairseq_maskplug.data import SideInfoDataset
    checkpoint, _, _ = trained
    data = tmp_path / "bin"
    shutil.copytree(tiny_data / "bin", data)
    result = check(run([BIN / "python", "-m", "preprocess.score_pll", "--checkpoint", checkpoint,
                        "--data", data, "--splits", "valid", "train", "--word-starts", "token"]))
    assert result.stdout.count("tokens/s") == 2  # both splits, the model loaded once
    for split in ("valid", "train"):
        plt = SideInfoDataset(str(data / f"{split}.plt"))
        tokens = data_utils.load_indexed_dataset(str(data / split), Dictionary.load(str(data / "dict.txt")))
        assert len(plt) == len(tokens)
        for i in range(len(tokens)):
            assert len(plt[i]) == len(tokens[i]) and plt[i][-1] == 1.0
            assert ((plt[i][:-1] > 0) & (plt[i][:-1] < 1)).all()


def test_gpt2_word_starts_from_fairseq_whole_word_helper(tmp_path):
    """A GPT-2 BPE dictionary holds BPE ids; 'Ġ' (a space byte) begins a word."""
    import json

    from fairseq.data import Dictionary
    from fairseq_maskplug.scoring.pll import word_starts_gpt2
    encoder = {"\u0120the": 0, "\u0120cat": 1, "s": 2, "\u0120sat": 3, "ting": 4}
    (tmp_path / "encoder.json").write_text(json.dumps(encoder))
    (tmp_path / "vocab.bpe").write_text("#version: 0.2\n\n")
    d = Dictionary()
    for symbol in ("2", "0", "4", "1", "3"):
        d.add_symbol(symbol)
    starts = word_starts_gpt2(d, str(tmp_path / "encoder.json"), str(tmp_path / "vocab.bpe"))
    assert starts[:d.nspecial].all()
    assert [bool(starts[d.index(s)]) for s in ("0", "1", "2", "3", "4")] == [True, True, False, True, False]


@pytest.mark.e2e
def test_lines_longer_than_the_model_are_scored_in_framed_windows(trained):
    """A 150-token line on a 64-position model: three windows of at most 62 tokens, each scored
    as <s> window </s>; short lines are scored whole. Before, the position embedding overflowed."""
    from fairseq_maskplug.scoring.pll import score_in_windows
    _, model, task = trained
    d = task.source_dictionary
    scorer = PLTScorer(model, task.mask_idx, d.pad(), np.ones(len(d), dtype=bool))
    rng = np.random.default_rng(0)
    special = (d.bos(), d.eos(), d.pad())
    long = np.concatenate([[d.bos()], rng.integers(d.nspecial, len(d) - 1, 150), [d.eos()]])
    short = long[:20].copy()
    short[-1] = d.eos()
    assert model.max_positions() == 64
    with pytest.raises(Exception):  # what happened before: the whole line reaches the embedding
        scorer.score([long], special, max_tokens=4096, progress=False)
    plt_long, plt_short = score_in_windows(scorer, [long, short], special, 64, 4096, progress=False)
    assert len(plt_long) == 152 and plt_long[0] == 1 and plt_long[-1] == 1
    assert ((plt_long[1:-1] > 0) & (plt_long[1:-1] < 1)).all()
    for start in (1, 63, 125):  # each window equals that window scored on its own
        inner = long[start:min(start + 62, 151)]
        alone = scorer.score([np.concatenate([[d.bos()], inner, [d.eos()]])], special, progress=False)[0]
        np.testing.assert_allclose(plt_long[start:start + len(inner)], alone[1:-1], atol=1e-6)
    np.testing.assert_allclose(plt_short, scorer.score([short], special, progress=False)[0], atol=1e-6)


@pytest.mark.e2e
def test_the_example_model_producer_writes_entropies_in_one_process_and_in_shards(tiny_data, trained, tmp_path, capsys):
    """examples/token_entropy.py (TokenProducer with a checkpoint reader): one value in [0, 1] per token, 0 at
    </s>, the model's own entropy at a position (checked on a line against a forward here); two shards as
    independent jobs merge into the one-process bytes; the difference policy trains on the track; a checkpoint
    with another dictionary is refused in one line before any work."""
    import importlib.util
    import math
    import shutil

    import torch
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    from fairseq_helpers import BIN, CPU_RUN, TINY_ROBERTA, REPO, json_logs, run
    from fairseq_maskplug.data import SideInfoDataset
    from preprocess import merge_shards

    spec = importlib.util.spec_from_file_location("token_entropy", REPO / "examples" / "token_entropy.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    checkpoint, model, task = trained
    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    assert example.main(["--checkpoint", str(checkpoint), "--data", str(data), "--splits", "valid"]) == 0
    tokens, track = MMapIndexedDataset(str(data / "valid")), SideInfoDataset(str(data / "valid.entropy"))
    rows = [track[i].numpy() for i in range(len(tokens))]
    assert [len(row) for row in rows] == [len(tokens[i]) for i in range(len(tokens))]
    assert all(row[-1] == 0.0 and 0 < row[:-1].min() and row.max() <= 1 for row in rows)
    line = tokens[0].numpy()
    with torch.no_grad():
        log_p = model.eval()(torch.as_tensor(np.concatenate([[task.source_dictionary.bos()], line]))[None])[0][0, 1:]
    log_p = log_p.float().log_softmax(-1)
    expected = (-(log_p.exp() * log_p).sum(-1) / math.log(log_p.shape[-1])).numpy()
    np.testing.assert_allclose(rows[0][:-1], expected[:-1], rtol=1e-5)
    for shard in ("0", "1"):
        assert example.main(["--checkpoint", str(checkpoint), "--data", str(data), "--splits", "valid", "--name",
                             "sharded", "--shard-block-lines", "8", "--num-shards", "2", "--shard-id", shard]) == 0
    assert merge_shards.main([str(data)]) == 0
    for suffix in ("bin", "idx"):
        assert (data / f"valid.sharded.{suffix}").read_bytes() == (data / f"valid.entropy.{suffix}").read_bytes()
    assert example.main(["--checkpoint", str(checkpoint), "--data", str(data), "--splits", "train"]) == 0
    result = check(run([BIN / "fairseq-maskplug-train", data, "--task", "guided_mlm", "--mask-policy", "difference",
                        "--difference-track", "entropy", "--tokens-per-sample", "32", "--save-dir", tmp_path / "ck",
                        "--max-update", "2", *TINY_ROBERTA, *CPU_RUN]))
    assert len(json_logs(result, "train_inner")) == 2
    other = tmp_path / "other"
    other.mkdir()
    (other / "dict.txt").write_text("".join(f"x{i} 1\n" for i in range(60)))  # every token id valid, another dictionary
    capsys.readouterr()
    shutil.copy(data / "valid.bin", other / "valid.bin")
    shutil.copy(data / "valid.idx", other / "valid.idx")
    assert example.main(["--checkpoint", str(checkpoint), "--data", str(other), "--splits", "valid"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not the dictionary" in err[0] and not list(other.glob("valid.entropy.*")), err


@pytest.mark.e2e
@pytest.mark.full
def test_two_torchrun_ranks_run_the_example_model_producer_and_rank_0_merges(tiny_data, trained, tmp_path):
    import shutil

    from fairseq_helpers import REPO

    checkpoint, _, _ = trained
    script = REPO / "examples" / "token_entropy.py"
    args = ["--checkpoint", checkpoint, "--splits", "valid", "--shard-block-lines", "8"]
    one = shutil.copytree(tiny_data / "bin", tmp_path / "one")
    check(run([BIN / "python", script, "--data", one, *args]))
    ranks = shutil.copytree(tiny_data / "bin", tmp_path / "ranks")
    result = check(run([BIN / "torchrun", "--standalone", "--nproc-per-node", "2", script, "--data", ranks, *args],
                       timeout=600))
    assert "merged 2 shards" in result.stdout
    for suffix in ("bin", "idx"):
        assert (ranks / f"valid.entropy.{suffix}").read_bytes() == (one / f"valid.entropy.{suffix}").read_bytes()
    assert not list(ranks.glob("*shard*"))
