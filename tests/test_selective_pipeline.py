"""Selective masking end to end on real fairseq models: GenePT -> classifier -> Downstream Mask ->
tagger -> In-domain Mask -> TaskPT."""

import json
from types import SimpleNamespace

import numpy as np
import pytest

from fairseq_helpers import BIN, CPU_RUN, REPO, TINY_ROBERTA, check, json_logs, run, train
from test_finetune_e2e import write_task

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def pipeline(tiny_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline")
    check(train(tiny_data / "bin", root / "genept", "--max-epoch", "2"))
    genept = root / "genept" / "checkpoint_last.pt"
    task = write_task(tiny_data, root)
    check(run([BIN / "fairseq-maskplug-train", task, "--task", "sentence_prediction",
               "--criterion", "sentence_prediction", "--num-classes", "2", "--init-token", "0",
               "--separator-token", "2", *TINY_ROBERTA, *CPU_RUN, "--max-epoch", "4",
               "--finetune-from-model", genept, "--best-checkpoint-metric", "accuracy",
               "--maximize-best-checkpoint-metric", "--save-dir", root / "cls", "--no-epoch-checkpoints"]))
    scoring = check(run([BIN / "python", "-m", "preprocess.score_importance", "--checkpoint",
                         root / "cls" / "checkpoint_best.pt", "--data", task, "--splits", "train", "valid",
                         "--batch-size", "16"]))  # both splits, the classifier loaded once
    return SimpleNamespace(root=root, genept=genept, task=task, classifier=root / "cls" / "checkpoint_best.pt",
                           scoring=scoring)


def side_rows(prefix):
    from fairseq_maskplug.data import SideInfoDataset
    ds = SideInfoDataset(str(prefix))
    return [ds[i].numpy() for i in range(len(ds))]


def test_downstream_mask_labels_are_aligned_and_batching_does_not_change_them(pipeline):
    from fairseq.data import Dictionary, data_utils
    input0 = pipeline.task / "input0"
    d = Dictionary.load(str(input0 / "dict.txt"))
    tokens = data_utils.load_indexed_dataset(str(input0 / "train"), d)
    labels = side_rows(input0 / "train.importance")
    assert len(labels) == len(tokens) == 300
    assert all(len(row) == len(tokens[i]) and row[-1] == 0 for i, row in enumerate(labels))
    assert set(np.concatenate(labels).tolist()) <= {0, 1} and sum(row.sum() for row in labels) > 0
    out = pipeline.scoring.stdout
    assert out.count("sentences/s") == 2 and "classified correctly and scored" in out
    assert (input0 / "valid.importance.bin").is_file() and (input0 / "valid.importance.preview.txt").is_file()
    preview = (input0 / "train.importance.preview.txt").read_text().splitlines()
    assert len(preview) == 300 and any("[" in line for line in preview)
    for line, row in zip(preview, labels):  # misclassified sentences are not scored
        assert ("not scored" in line) <= (row.sum() == 0)
        assert line.count("[") == row.sum()
    # one sentence at a time (one forward per token) gives the very same labels
    check(run([BIN / "python", "-m", "preprocess.score_importance", "--checkpoint", pipeline.classifier,
               "--data", pipeline.task, "--split", "train", "--batch-size", "1", "--name", "single"]))
    assert all(np.array_equal(a, b) for a, b in zip(labels, side_rows(input0 / "train.single")))


def test_scoring_needs_a_sentence_classifier(pipeline, tmp_path):
    result = run([BIN / "python", "-m", "preprocess.score_importance", "--checkpoint", pipeline.genept,
                  "--data", pipeline.task, "--split", "train"])
    assert result.returncode == 2 and "guided_mlm checkpoint without a classification head" in result.stderr, result.stderr[-1500:]


@pytest.fixture(scope="module")
def tagger(pipeline):
    result = check(run([BIN / "fairseq-maskplug-train", pipeline.task / "input0", "--task", "token_importance",
                        "--criterion", "token_importance", "--label-track", "importance",
                        "--tokens-per-sample", "64",
                        *TINY_ROBERTA, *CPU_RUN, "--max-epoch", "3", "--finetune-from-model", pipeline.genept,
                        "--best-checkpoint-metric", "f1", "--maximize-best-checkpoint-metric",
                        "--save-dir", pipeline.root / "tagger", "--no-epoch-checkpoints"]))
    return SimpleNamespace(result=result, checkpoint=pipeline.root / "tagger" / "checkpoint_best.pt")


def test_tagger_trains_and_reports_class_1_scores(tagger):
    valid = json_logs(tagger.result, "valid")
    assert len(valid) == 3
    for record in valid:
        for key in ("valid_loss", "valid_precision", "valid_recall", "valid_f1"):
            assert key in record, record
        p, r, f1 = (float(record[f"valid_{k}"]) for k in ("precision", "recall", "f1"))
        assert f1 == pytest.approx(2 * p * r / (p + r) if p + r else 0.0, abs=0.02)
    train_losses = [float(r["train_loss"]) for r in json_logs(tagger.result, "train")]
    assert train_losses[-1] < train_losses[0]
    assert tagger.checkpoint.exists()


@pytest.fixture(scope="module")
def annotated(tiny_data, tmp_path_factory, tagger):
    import shutil
    corpus = tmp_path_factory.mktemp("annotated") / "bin"
    shutil.copytree(tiny_data / "bin", corpus)
    result = check(run([BIN / "python", "-m", "preprocess.annotate_importance", "--checkpoint", tagger.checkpoint,
                        "--data", corpus, "--splits", "train", "valid", "--max-tokens", "256"]))
    return SimpleNamespace(corpus=corpus, result=result)


def load_tagger(checkpoint, corpus):
    from fairseq_maskplug.scoring.tagger import TokenTagger
    from fairseq_maskplug.tools.checkpoints import load_checked_model
    model, task, _ = load_checked_model(str(checkpoint), str(corpus), tasks=("token_importance",))
    d = task.source_dictionary
    return TokenTagger(model, task.cfg.tagger_head_name, d.bos(), d.eos(), d.pad()), d


@pytest.mark.parametrize("break_mode", ["none", "complete"])
def test_annotation_is_aligned_through_token_blocks(annotated, tagger, break_mode):
    import torch
    from fairseq.data import data_utils
    from fairseq_maskplug.data import load_blocked_split
    scorer, d = load_tagger(tagger.checkpoint, annotated.corpus)
    lines = data_utils.load_indexed_dataset(str(annotated.corpus / "train"), d)
    lines = [lines[i].numpy() for i in range(len(lines))]
    with torch.no_grad():  # each line alone, in process: what the file must hold, token for token
        expected = [scorer.score([line], progress=False)[0] for line in lines]
    assert all(e[-1] == 0 and ((e[:-1] > 0) & (e[:-1] < 1)).all() for e in expected)
    cfg = SimpleNamespace(data=str(annotated.corpus), tokens_per_sample=32, sample_break_mode=break_mode,
                          shorten_method="none", shorten_data_split_list="", seed=1)
    blocks, side = load_blocked_split(cfg, "train", d, ["importance"])
    got_tokens = np.concatenate([blocks[i].numpy()[1:] for i in range(len(blocks))])
    got_scores = np.concatenate([side["importance"][i].numpy()[1:] for i in range(len(blocks))])
    assert np.array_equal(got_tokens, np.concatenate(lines))
    np.testing.assert_allclose(got_scores, np.concatenate(expected), atol=1e-6)
    meta = json.loads((annotated.corpus / "train.importance.json").read_text())
    assert meta["lines"] == len(lines) and "token_fingerprint" in meta


def test_long_lines_are_tagged_in_windows(annotated, tagger):
    import torch
    scorer, d = load_tagger(tagger.checkpoint, annotated.corpus)
    rng = np.random.default_rng(0)
    line = np.append(rng.integers(d.nspecial, len(d) - 1, 150), d.eos())  # 150 words, window 62
    scores = scorer.score([line, line[-10:]], max_tokens=128, progress=False)
    with torch.no_grad():
        for start in (0, 62, 124):
            window = line[start:min(start + 62, 150)]
            alone = scorer.score([np.append(window, d.eos())], progress=False)[0][:-1]
            np.testing.assert_allclose(scores[0][start:start + len(window)], alone, atol=1e-6)
    assert scores[0][-1] == 0 and len(scores[1]) == 10


def test_taskpt_on_the_annotated_corpus(annotated, tmp_path):
    result = check(train(annotated.corpus, tmp_path / "taskpt", "--max-epoch", "1", task="selective_mlm"))
    (epoch,) = json_logs(result, "train")
    assert 0 < float(epoch["train_mask_rate"]) <= 0.15 + 1e-4 + 1 / 32  # the cap, with max(1, .) per block
    # what random masking at that rate would also meet; the signature of selective masking: every position
    # predicted is one the tagger selected (importance >= --selective-threshold), in the very items trained on
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_maskplug.masking import maskable_positions
    from test_policy_task_matrix import predicted_positions

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(annotated.corpus), "--task", "selective_mlm", "--tokens-per-sample", "32", "--arch", "roberta_base"])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    task.load_dataset("train")
    threshold, predicted_any = task.policy.options.selective_threshold, 0
    for tokens, predicted, side in predicted_positions(task, "train"):
        tagged = (side["importance"] >= threshold) & maskable_positions(tokens, task.special_ids)
        assert not (predicted & ~tagged).any()
        predicted_any += int(predicted.sum())
    assert predicted_any > 0


def test_annotation_refuses_a_corpus_with_another_dictionary(tiny_data, tagger, tmp_path):
    symbols = [line.split()[0] for line in open(tiny_data / "bin" / "dict.txt", encoding="utf-8")]
    (tmp_path / "reversed.txt").write_text("".join(f"{s} 1\n" for s in reversed(symbols)))
    check(run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", tiny_data / "valid.txt",
               "--srcdict", tmp_path / "reversed.txt", "--destdir", tmp_path / "other", "--workers", "1"]))
    result = run([BIN / "python", "-m", "preprocess.annotate_importance", "--checkpoint", tagger.checkpoint,
                  "--data", tmp_path / "other", "--splits", "train"])
    assert result.returncode == 2 and "is not the dictionary" in result.stderr
    assert f"{tagger.checkpoint} was trained with" in result.stderr
    assert not (tmp_path / "other" / "train.importance.idx").exists()


def test_checkpoints_whose_training_data_moved_still_score(pipeline, tagger, annotated, tmp_path):
    """--data replaces the data path stored in the checkpoint (it may not exist on this machine).
    The tagger records its dictionary's fingerprint; fairseq's sentence_prediction classifier records
    none, so with its training data gone its dictionary cannot be checked: refused unless
    --trust-dictionary."""
    import torch
    for name, path in (("cls", pipeline.classifier), ("tagger", tagger.checkpoint)):
        state = torch.load(path, map_location="cpu", weights_only=False)
        state["cfg"]["task"]["data"] = str(tmp_path / "gone")
        torch.save(state, tmp_path / f"{name}.pt")
    score = [BIN / "python", "-m", "preprocess.score_importance", "--checkpoint", tmp_path / "cls.pt",
             "--data", pipeline.task, "--split", "valid", "--name", "moved"]
    refused = run(score)
    assert refused.returncode == 2 and "its training data" in refused.stderr and "--trust-dictionary" in refused.stderr
    check(run(score + ["--trust-dictionary"]))
    assert np.array_equal(np.concatenate(side_rows(pipeline.task / "input0" / "valid.moved")),
                          np.concatenate(side_rows(pipeline.task / "input0" / "valid.importance")))
    check(run([BIN / "python", "-m", "preprocess.annotate_importance", "--checkpoint", tmp_path / "tagger.pt",
               "--data", annotated.corpus, "--splits", "valid", "--name", "moved", "--max-tokens", "256"]))
    np.testing.assert_array_equal(np.concatenate(side_rows(annotated.corpus / "valid.moved")),
                                  np.concatenate(side_rows(annotated.corpus / "valid.importance")))


def test_annotation_in_shards_is_the_one_process_track(tiny_data, tagger, tmp_path):
    """2 and 3 shards (300 lines in blocks of 64: shards that do not divide them), merged: the bytes one
    process writes; shard 0 writes the preview."""
    import shutil

    def annotate(corpus, *extra):
        return check(run([BIN / "python", "-m", "preprocess.annotate_importance", "--checkpoint", tagger.checkpoint,
                          "--data", corpus, "--splits", "train", "--max-tokens", "256", "--shard-block-lines", "64",
                          *extra]))

    def track(corpus):
        return {p.name: p.read_bytes() for p in sorted(corpus.glob("train.importance.*")) if "preview" not in p.name}

    whole = shutil.copytree(tiny_data / "bin", tmp_path / "whole")
    annotate(whole)
    for shards in (2, 3):
        corpus = shutil.copytree(tiny_data / "bin", tmp_path / f"shards{shards}")
        for shard in range(shards):
            annotate(corpus, "--num-shards", str(shards), "--shard-id", str(shard))
        check(run([BIN / "fairseq-maskplug-merge-shards", corpus]))
        assert track(corpus) == track(whole) and (corpus / "train.importance.preview.txt").is_file()


def test_downstream_mask_in_shards_is_the_one_process_track(pipeline, tmp_path):
    """score-importance in 2 and 3 shards (300 lines in blocks of 64), merged from the sentence_prediction root:
    the bytes one process writes; a rerun skips a written shard."""
    import shutil

    def score(task, *extra):
        return check(run([BIN / "python", "-m", "preprocess.score_importance", "--checkpoint", pipeline.classifier,
                          "--data", task, "--splits", "train", "--batch-size", "16", "--shard-block-lines", "64",
                          "--name", "sharded", *extra]))

    def track(task):
        return {p.name: p.read_bytes() for p in sorted((task / "input0").glob("train.sharded.*"))
                if "preview" not in p.name}

    whole = shutil.copytree(pipeline.task, tmp_path / "whole")
    score(whole)
    assert len(track(whole)) == 3
    for shards in (2, 3):
        task = shutil.copytree(pipeline.task, tmp_path / f"shards{shards}")
        for shard in range(shards):
            score(task, "--num-shards", str(shards), "--shard-id", str(shard))
        assert "is already written: skipped" in score(task, "--num-shards", str(shards), "--shard-id", "0").stdout
        check(run([BIN / "fairseq-maskplug-merge-shards", task]))
        assert track(task) == track(whole) and (task / "input0" / "train.sharded.preview.txt").is_file()
        assert not list((task / "input0").glob("*shard*-of-*"))


@pytest.mark.full
def test_both_importance_producers_write_what_the_code_before_issue_54_wrote(pipeline, tagger, annotated, tmp_path):
    """score-importance's labels (and preview) and annotate-importance's track, against commit
    PRODUCERS_BEFORE's on this machine, byte for byte."""
    import shutil

    from fairseq_helpers import run_producer_before, written_files

    def files(directory, name):
        return written_files(directory, f"train.{name}.*")

    scores = ["--checkpoint", pipeline.classifier, "--splits", "train", "--batch-size", "16", "--name", "before"]
    now, before = (shutil.copytree(pipeline.task, tmp_path / name) for name in ("now", "before"))
    check(run([BIN / "python", "-m", "preprocess.score_importance", "--data", now, *scores]))
    run_producer_before(tmp_path, "score_importance", "--data", before, *scores)
    assert files(now / "input0", "before") == files(before / "input0", "before") != {}
    tags = ["--checkpoint", tagger.checkpoint, "--splits", "train", "--max-tokens", "256", "--name", "before"]
    now, before = (shutil.copytree(annotated.corpus, tmp_path / f"corpus-{name}") for name in ("now", "before"))
    check(run([BIN / "python", "-m", "preprocess.annotate_importance", "--data", now, *tags]))
    run_producer_before(tmp_path, "annotate_importance", "--data", before, *tags)
    assert files(now, "before") == files(before, "before") != {}
