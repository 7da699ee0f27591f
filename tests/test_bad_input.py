"""Bad input stops with one line naming the file, line or option, before any training or
scoring work, and leaves nothing half-written."""

import shutil
import signal
import subprocess
import time

import numpy as np
import pytest
import torch

from fairseq_helpers import (BIN, CPU_RUN, REPO, TINY_BART, TINY_ROBERTA, binarize_with_reordered_dictionary, check,
                             model_params, one_line_error, run, train, write_corpus)
from test_finetune_e2e import write_task

pytestmark = pytest.mark.e2e


def maskplug_train(data, save, *extra, task="guided_mlm", criterion="masked_lm", model=TINY_ROBERTA):
    return run([BIN / "fairseq-maskplug-train", data, "--task", task, "--criterion", criterion,
                "--tokens-per-sample", "32", "--save-dir", save, *model, *CPU_RUN, "--max-epoch", "1", *extra])


def no_checkpoint(save):
    return not save.exists() or not any(save.glob("*.pt"))


def write_track(split_prefix, name, values_for_line, dtype="float64"):
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    from fairseq_maskplug.data import write_side_info

    tokens = MMapIndexedDataset(str(split_prefix))
    rows = [values_for_line(i, n) for i, n in enumerate(tokens.sizes)]
    write_side_info(f"{split_prefix}.{name}", rows, dtype, tokens_prefix=str(split_prefix))


@pytest.fixture(scope="module")
def task_dir(tiny_data, tmp_path_factory):
    return write_task(tiny_data, tmp_path_factory.mktemp("bad"))


@pytest.fixture(scope="module")
def mlm_checkpoint(tiny_data, tmp_path_factory):
    save = tmp_path_factory.mktemp("bad_ck")
    check(train(tiny_data / "bin", save, "--max-epoch", "1"))
    return save / "checkpoint_last.pt"


# ---- settings that mask nothing -----------------------------------------------------------

@pytest.mark.parametrize("flags, message", [
    (["--mask-prob", "0"], "--mask-prob must lie in (0, 1]"),
    (["--mask-policy", "l3", "--l3-mean", "0"], "--l3-mean must lie in (0, 1]"),
    (["--mask-policy", "selective", "--selective-threshold", "2"], "--selective-threshold must lie in (0, 1]"),
    (["--mask-policy", "nope"], "unknown mask policy 'nope'"),
])
def test_options_that_mask_nothing_are_refused_before_fairseq_starts(tiny_data, tmp_path, flags, message):
    result = maskplug_train(tiny_data / "bin", tmp_path / "ck", *flags)
    one_line_error(result, message)
    assert "distributed_world_size" not in result.stdout  # refused before fairseq printed its configuration
    assert no_checkpoint(tmp_path / "ck")


def test_an_epoch_that_masks_nothing_is_an_error_not_a_nan(tiny_data, tmp_path):
    data = tmp_path / "bin"
    shutil.copytree(tiny_data / "bin", data)
    for split in ("train", "valid"):  # scores below the threshold everywhere: nothing is selected
        write_track(data / split, "importance", lambda i, n: np.full(n, 0.2))
    result = maskplug_train(data, tmp_path / "ck", "--mask-policy", "selective", "--selective-threshold", "0.9")
    one_line_error(result, "epoch 1: the mask policy chose no position in 97 training sequences")  # 32-token blocks
    assert not (tmp_path / "ck" / "checkpoint_best.pt").exists()


# ---- per-item problems, found when the split is loaded ---------------------------------------

def test_out_of_range_likelihood_names_the_file_and_line(tiny_data, tmp_path):
    data = tmp_path / "bin"
    shutil.copytree(tiny_data / "bin", data)
    write_track(data / "valid", "plt", lambda i, n: np.full(n, 0.5))
    write_track(data / "train", "plt", lambda i, n: np.full(n, 1.5 if i == 30 else 0.5))
    result = maskplug_train(data, tmp_path / "ck", "--mask-policy", "l3")
    one_line_error(result, f"{data / 'train.plt'}.bin, line 31, value 1: 1.5 is not a probability in [0, 1]")
    assert no_checkpoint(tmp_path / "ck")


def test_nan_in_a_track_is_refused_at_write_and_at_load(tiny_data, tmp_path):
    from fairseq.data.indexed_dataset import MMapIndexedDatasetBuilder
    from fairseq_maskplug.data import load_side_info, write_side_info
    from fairseq_maskplug.data.side_info import token_fingerprint

    prefix = tmp_path / "valid"
    for suffix in (".bin", ".idx"):
        shutil.copy(tiny_data / "bin" / f"valid{suffix}", str(prefix) + suffix)
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    tokens = MMapIndexedDataset(str(prefix))
    rows = [np.full(n, 0.5) for n in tokens.sizes]
    rows[3][2] = np.nan
    with pytest.raises(ValueError, match="line 4, value 3: nan is not a finite number; nothing was written"):
        write_side_info(str(prefix) + ".plt", rows, tokens_prefix=str(prefix))
    assert not list(tmp_path.glob("valid.plt*"))
    builder = MMapIndexedDatasetBuilder(str(prefix) + ".plt.bin", dtype=np.float64)  # written by other tools
    for row in rows:
        builder.add_item(torch.from_numpy(row))
    builder.finalize(str(prefix) + ".plt.idx")
    (tmp_path / "valid.plt.json").write_text('{"token_fingerprint": "%s"}' % token_fingerprint(str(prefix)))
    with pytest.raises(ValueError, match=r"valid.plt.bin, line 4, value 3: nan is not a finite number"):
        load_side_info(str(prefix), "plt", tokens, "valid")


def test_unknown_class_label_stops_training_and_evaluation(tiny_data, task_dir, tmp_path):
    data = tmp_path / "task"
    shutil.copytree(task_dir, data)
    labels = (tiny_data / "valid.txt").read_text().splitlines()
    (tmp_path / "valid.label").write_text("".join("maybe\n" if i == 6 else ("yes\n" if "w0" in l.split() else "no\n")
                                                  for i, l in enumerate(labels)))
    for f in (data / "label").glob("valid.*"):
        f.unlink()
    check(run([BIN / "fairseq-preprocess", "--only-source", "--validpref", tmp_path / "valid.label", "--srcdict",
               data / "label" / "dict.txt", "--destdir", data / "label", "--workers", "1"]))
    result = maskplug_train(data, tmp_path / "ck", "--num-classes", "2", task="joint_mlm_classification",
                            criterion="joint_mlm_classification")
    one_line_error(result, f"{data / 'label' / 'valid'}: line 7 has label '<unk>', not one of the 2 classes")
    assert no_checkpoint(tmp_path / "ck")
    check(maskplug_train(task_dir, tmp_path / "good", "--num-classes", "2", task="joint_mlm_classification",
                         criterion="joint_mlm_classification"))
    scored = run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate", "--checkpoint",
                  tmp_path / "good" / "checkpoint_last.pt", "--data", data, "--split", "valid"])
    one_line_error(scored, "line 7 has label '<unk>'")


def test_token_importance_label_2_names_the_line(task_dir, tmp_path):
    data = tmp_path / "input0"
    shutil.copytree(task_dir / "input0", data)
    write_track(data / "valid", "importance", lambda i, n: np.zeros(n), "uint8")
    write_track(data / "train", "importance",
                lambda i, n: np.concatenate([[2 if i == 249 else 1], np.zeros(n - 1)]), "uint8")
    result = maskplug_train(data, tmp_path / "ck", task="token_importance", criterion="token_importance")
    one_line_error(result, f"{data / 'train.importance'}.bin, line 250, value 1: 2 is not a label 0 or 1")


def test_binarize_refuses_values_the_dtype_cannot_hold(tiny_data, tmp_path):
    text = (tiny_data / "valid.txt").read_text().splitlines()
    for bad, shown in (("0.7", "0.7"), ("300", "300.0")):
        values = [" ".join(bad if (i, j) == (2, 1) else "1" for j in range(len(l.split()))) for i, l in enumerate(text)]
        (tmp_path / "valid.flags").write_text("\n".join(values) + "\n")
        result = run([BIN / "python", "-m", "preprocess.binarize_side_info", "--tokens", tiny_data / "valid.txt",
                      "--values", tmp_path / "valid.flags", "--destdir", tiny_data / "bin", "--split", "valid",
                      "--name", "flags_bad", "--dtype", "uint8"])
        line = one_line_error(result, f"line 3, value 2: {shown} is not a whole number in [0, 255] (uint8)")
        assert "nothing was written" in line
    assert not list((tiny_data / "bin").glob("valid.flags_bad*"))


def test_non_utf8_values_file_is_named(tiny_data, tmp_path):
    (tmp_path / "valid.flags").write_bytes(b"1 1\n\xff\xfe 1\n")
    result = run([BIN / "python", "-m", "preprocess.binarize_side_info", "--tokens", tiny_data / "valid.txt",
                  "--values", tmp_path / "valid.flags", "--destdir", tiny_data / "bin", "--split", "valid",
                  "--name", "flags_bad", "--dtype", "uint8"])
    one_line_error(result, f"{tmp_path / 'valid.flags'}:2: not UTF-8 text")


def test_a_track_without_its_fingerprint_needs_an_explicit_flag(tiny_data, tmp_path):
    data = tmp_path / "bin"
    shutil.copytree(tiny_data / "bin", data)
    for split in ("train", "valid"):
        write_track(data / split, "plt", lambda i, n: np.full(n, 0.5))
    (data / "train.plt.json").unlink()  # copied without it
    result = maskplug_train(data, tmp_path / "ck", "--mask-policy", "l3")
    one_line_error(result, "has no", "train.plt.json fingerprint", "--side-info-without-fingerprint")
    check(maskplug_train(data, tmp_path / "ck", "--mask-policy", "l3", "--side-info-without-fingerprint"))


# ---- dictionaries --------------------------------------------------------------------------------

def reordered_copy(tiny_data, tmp_path):
    """The valid split binarized with the same dictionary, two symbols swapped (same size)."""
    return binarize_with_reordered_dictionary(tiny_data / "bin" / "dict.txt", tiny_data / "valid.txt",
                                              tmp_path / "other")


def test_score_pll_refuses_a_reordered_dictionary_and_words_without_word_starts(tiny_data, mlm_checkpoint, tmp_path):
    other = reordered_copy(tiny_data, tmp_path)
    result = run([BIN / "python", "-m", "preprocess.score_pll", "--checkpoint", mlm_checkpoint, "--data", other,
                  "--split", "train", "--word-starts", "token"])
    one_line_error(result, f"{other / 'dict.txt'} is not the dictionary {mlm_checkpoint} was trained with")
    assert not list(other.glob("train.plt*"))
    data = tmp_path / "same"
    shutil.copytree(tiny_data / "bin", data)
    result = run([BIN / "python", "-m", "preprocess.score_pll", "--checkpoint", mlm_checkpoint, "--data", data,
                  "--split", "valid"])  # default --word-starts sentencepiece on data without '▁'
    one_line_error(result, "has no sentencepiece word starts", "--word-starts token")


def test_the_dictionary_is_checked_from_the_recorded_fingerprint_when_the_training_data_is_gone(
        tiny_data, mlm_checkpoint, tmp_path):
    from fairseq import checkpoint_utils
    from fairseq_maskplug.data.dictionaries import check_checkpoint_dictionary

    state = checkpoint_utils.load_checkpoint_to_cpu(str(mlm_checkpoint))
    assert "dictionary_sha256" in state["task_state"]
    state["cfg"]["task"]["data"] = "relative/path/that/does/not/exist"
    other = reordered_copy(tiny_data, tmp_path)
    with pytest.raises(ValueError, match="is not the dictionary"):
        check_checkpoint_dictionary(state, str(mlm_checkpoint), str(other))
    check_checkpoint_dictionary(state, str(mlm_checkpoint), str(tiny_data / "bin"))  # the same: accepted
    del state["task_state"]["dictionary_sha256"]  # e.g. fairseq's own sentence_prediction checkpoints
    with pytest.raises(ValueError, match="--trust-dictionary"):
        check_checkpoint_dictionary(state, str(mlm_checkpoint), str(tiny_data / "bin"))
    check_checkpoint_dictionary(state, str(mlm_checkpoint), str(tiny_data / "bin"), trust=True)


def reordered_task(task_dir, tmp_path):
    """The task's input0 binarized with its dict.txt with two symbols swapped (same size); the same labels."""
    lines = (task_dir / "input0" / "dict.txt").read_text().splitlines()
    lines[0], lines[1] = lines[1], lines[0]
    (tmp_path / "reordered.txt").write_text("\n".join(lines) + "\n")
    other = tmp_path / "reordered_task"
    shutil.copytree(task_dir / "label", other / "label")
    text = task_dir.parent / "valid.input0"
    check(run([BIN / "fairseq-preprocess", "--only-source", "--validpref", text, "--srcdict",
               tmp_path / "reordered.txt", "--destdir", other / "input0", "--workers", "1"]))
    return other


@pytest.fixture(scope="module")
def fairseq_classifier(task_dir, tmp_path_factory):
    """fairseq's own sentence_prediction checkpoint (it records no dictionary fingerprint)."""
    save = tmp_path_factory.mktemp("sp")
    check(run([BIN / "fairseq-train", task_dir, "--task", "sentence_prediction", "--criterion", "sentence_prediction",
               "--num-classes", "2", "--init-token", "0", "--separator-token", "2", "--max-epoch", "1",
               "--save-dir", save, "--no-epoch-checkpoints", *TINY_ROBERTA, *CPU_RUN]))
    return save / "checkpoint_last.pt"


def test_tools_refuse_fairseq_s_own_classifier_on_a_reordered_dictionary(task_dir, fairseq_classifier, tmp_path):
    """The check read --data's dictionary twice (the data path was overridden before it was read)."""
    other = reordered_task(task_dir, tmp_path)
    message = f"{other / 'input0' / 'dict.txt'} is not the dictionary {fairseq_classifier} was trained with"
    evaluated = run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate", "--checkpoint", fairseq_classifier,
                     "--data", other, "--split", "valid"])
    one_line_error(evaluated, message, f"its training data's {task_dir / 'input0' / 'dict.txt'}")
    scored = run([BIN / "python", "-m", "preprocess.score_importance", "--checkpoint", fairseq_classifier,
                  "--data", other, "--split", "valid"])
    one_line_error(scored, message)
    assert not list((other / "input0").glob("valid.importance*"))
    check(run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate", "--checkpoint", fairseq_classifier,
               "--data", task_dir, "--split", "valid"]))  # its own dictionary: accepted


def test_convert_refuses_a_reordered_dict(tmp_path):
    """A release (model.pt + dict.txt beside it) exported with --dict of the same size in another order
    would give a tokenizer with other ids (and 'difference 0', both sides reading the same file)."""
    from release_helpers import make_release

    release = make_release(tmp_path / "release", ["the film felt dull to me .", "a fine film ."] * 20, merges=30)
    lines = (release / "dict.txt").read_text().splitlines()
    lines[0], lines[1] = lines[1], lines[0]
    (tmp_path / "reordered.txt").write_text("\n".join(lines) + "\n")
    result = run([BIN / "fairseq-maskplug-convert", "--from-fairseq", release, "--dict", tmp_path / "reordered.txt",
                  "--to", "hf", tmp_path / "hf"])
    one_line_error(result, f"{tmp_path / 'reordered.txt'} is not the dictionary", str(release / "dict.txt"))
    assert not (tmp_path / "hf").exists()


TASK_ARGS = {"guided_mlm": ("masked_lm", TINY_ROBERTA), "guided_denoising": ("cross_entropy", TINY_BART),
             "joint_mlm_classification": ("joint_mlm_classification", TINY_ROBERTA + ["--num-classes", "2"])}


def binarize(destdir, srcdict, valid_text, train_text):
    check(run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", train_text, "--validpref", valid_text,
               "--srcdict", srcdict, "--destdir", destdir, "--workers", "1"]))


def first_id_at_least(prefix, limit):
    """``(line, token, id)`` (1-based) of the first id >= limit in the split ``prefix``."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    lines = MMapIndexedDataset(str(prefix))
    return next((n + 1, k + 1, i) for n in range(len(lines)) for k, i in enumerate(lines[n].tolist()) if i >= limit)


@pytest.mark.parametrize("task", ["guided_mlm", "guided_denoising"])
def test_data_with_ids_beyond_a_cut_dictionary_is_refused_at_load(tiny_data, tmp_path, task):
    data = tmp_path / "bin"
    shutil.copytree(tiny_data / "bin", data)
    dict_lines = (data / "dict.txt").read_text().splitlines()
    (data / "dict.txt").write_text("\n".join(dict_lines[:20]) + "\n")  # 4 specials + 20 symbols + <mask>
    line, token, value = first_id_at_least(data / "valid", 25)
    criterion, model = TASK_ARGS[task]
    result = maskplug_train(data, tmp_path / "ck", task=task, criterion=criterion, model=model)
    one_line_error(result, f"{data / 'valid'}.bin, line {line}, token {token}: id {value} is beyond the 25 symbols")
    assert no_checkpoint(tmp_path / "ck")


@pytest.mark.parametrize("literal", ["<mask>", "<s>", "<pad>", "</s>"])
@pytest.mark.parametrize("task", sorted(TASK_ARGS))
def test_special_symbols_in_the_text_are_refused_naming_file_and_line(tiny_data, task_dir, tmp_path, literal, task):
    """fairseq-preprocess turns a literal special symbol into its id: the model would read a mask, a
    sentence start or end the text never had."""
    lines = (tiny_data / "valid.txt").read_text().splitlines()
    words = lines[4].split()
    lines[4] = " ".join(words[:2] + [literal] + words[2:])
    (tmp_path / "valid.txt").write_text("\n".join(lines) + "\n")
    dictionary = tmp_path / "dict.txt"  # a corpus that holds <mask> gives it an entry of its own
    dictionary.write_text((tiny_data / "bin" / "dict.txt").read_text() + ("<mask> 1\n" if literal == "<mask>" else ""))
    data = tmp_path / "data"
    tokens = data / "input0" if task == "joint_mlm_classification" else data
    binarize(tokens, dictionary, tmp_path / "valid.txt", tiny_data / "train.txt")
    if task == "joint_mlm_classification":
        shutil.copytree(task_dir / "label", data / "label")
    criterion, model = TASK_ARGS[task]
    result = maskplug_train(data, tmp_path / "ck", task=task, criterion=criterion, model=model)
    one_line_error(result, f"{tokens / 'valid'}.bin, line 5, token 3: the special symbol {literal}")
    assert no_checkpoint(tmp_path / "ck")


# ---- tools and paths -----------------------------------------------------------------------------

def test_score_pll_missing_or_classifier_checkpoint_and_unwritable_output(tiny_data, task_dir, mlm_checkpoint,
                                                                          tmp_path):
    pll = [BIN / "python", "-m", "preprocess.score_pll", "--split", "valid", "--word-starts", "token"]
    one_line_error(run(pll + ["--checkpoint", tmp_path / "nope.pt", "--data", tiny_data / "bin"]),
                   f"checkpoint not found: {tmp_path / 'nope.pt'}")
    check(maskplug_train(task_dir, tmp_path / "cls", "--num-classes", "2", task="joint_mlm_classification",
                         criterion="joint_mlm_classification"))
    one_line_error(run(pll + ["--checkpoint", tmp_path / "cls" / "checkpoint_last.pt", "--data", task_dir]),
                   "is a joint_mlm_classification checkpoint; a masked-LM checkpoint")
    data = tmp_path / "copy"
    shutil.copytree(tiny_data / "bin", data)
    unwritable = run(pll + ["--checkpoint", mlm_checkpoint, "--data", data, "--name", "no_such_dir/plt"])
    # a path in the track name (it wrote into a missing directory): refused as a name, before scoring
    one_line_error(unwritable, "argument --name: track name 'no_such_dir/plt': use letters, digits")
    assert "scored" not in unwritable.stdout


def test_read_only_save_dir_and_empty_train_file(tiny_data, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    one_line_error(maskplug_train(tiny_data / "bin", blocker / "ck"), f"--save-dir {blocker / 'ck'} is not writable")
    (tmp_path / "empty.txt").write_text("")
    write_corpus(tmp_path / "valid.txt", 5, seed=3)
    check(run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", tmp_path / "empty.txt", "--validpref",
               tmp_path / "valid.txt", "--srcdict", tiny_data / "bin" / "dict.txt", "--destdir", tmp_path / "e",
               "--workers", "1"]))
    one_line_error(maskplug_train(tmp_path / "e", tmp_path / "ck"), "has no lines: was its text file empty?")


def test_fe_views_zero_and_lines_too_short_for_the_views_are_refused(tiny_data, tmp_path):
    one_line_error(maskplug_train(tiny_data / "bin", tmp_path / "ck", "--fe-views", "0", task="fe_mlm"),
                   "--fe-views must lie in [1, inf), got 0")
    # the tiny corpus has lines of 3..15 words: 6 views do not fit the shortest
    result = maskplug_train(tiny_data / "bin", tmp_path / "ck", "--fe-views", "6", "--mask-prob", "0.15",
                            "--sample-break-mode", "eos", task="fe_mlm")
    one_line_error(result, "--fe-views 6 with --sample-break-mode eos:", "have fewer than 6 tokens")
    # the paper's view flags are gone: the line names the policy options that replace them
    one_line_error(maskplug_train(tiny_data / "bin", tmp_path / "ck", "--fe-granularity", "span", task="fe_mlm"),
                   "--fe-granularity is gone: --task fe_mlm draws the views of --mask-policy random (the default) or "
                   "span: use --mask-policy random (subword) or --mask-policy span")


def test_a_run_without_batch_size_or_max_tokens_is_one_line(tiny_data, tmp_path):
    """fairseq's own check is a bare AssertionError with a traceback."""
    at = CPU_RUN.index("--batch-size")
    result = run([BIN / "fairseq-maskplug-train", tiny_data / "bin", "--task", "guided_mlm", "--tokens-per-sample",
                  "32", "--save-dir", tmp_path / "ck", *TINY_ROBERTA, *CPU_RUN[:at], *CPU_RUN[at + 2:],
                  "--max-update", "1"])
    one_line_error(result, "give --batch-size N (sentences per batch) or --max-tokens N (tokens per batch)")
    assert no_checkpoint(tmp_path / "ck")


def test_a_checkpoint_of_another_vocabulary_size_is_one_line(tiny_data, mlm_checkpoint, tmp_path):
    write_corpus(tmp_path / "train.txt", 50, seed=4, vocab=60)  # more word types: a larger dictionary
    check(run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", tmp_path / "train.txt", "--validpref",
               tmp_path / "train.txt", "--destdir", tmp_path / "bin", "--workers", "1"]))
    result = maskplug_train(tmp_path / "bin", tmp_path / "ck", "--finetune-from-model", mlm_checkpoint)
    one_line_error(result, f"{mlm_checkpoint} does not fit this run's model: its embedding has ",
                   "binarized with another dict.txt than the checkpoint's")
    assert "its model has" not in result.stderr  # the shape is the same: only the vocabulary is named


@pytest.mark.parametrize("entry", ["fairseq-maskplug-train", "fairseq-train"])
def test_a_checkpoint_of_another_shape_names_what_differs_and_the_options(tiny_data, mlm_checkpoint, tmp_path,
                                                                          entry):
    """A QUICK=1 quickstart's model fine-tuned with the full model's options (issue 42): the line names the
    differing shape options with the checkpoint's values (not "another dictionary"), through both entry
    points (fairseq-train: the last line of its traceback)."""
    saved = model_params(mlm_checkpoint)
    width = saved["encoder.sentence_encoder.embed_tokens.weight"].shape[1]
    bigger = ["--arch", "roberta_base", "--encoder-layers", "3", "--encoder-embed-dim", str(2 * width),
              "--encoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2", "--max-positions", "64"]
    args = [tiny_data / "bin", "--task", "guided_mlm", "--criterion", "masked_lm", *bigger, "--tokens-per-sample",
            "32", "--finetune-from-model", mlm_checkpoint, "--save-dir", tmp_path / "ck", *CPU_RUN, "--max-update", "1"]
    if entry == "fairseq-train":
        result = run([BIN / "fairseq-train", *args, "--user-dir", REPO / "fairseq_maskplug"], new_process=True)
        assert result.returncode != 0
        last = result.stderr.strip().splitlines()[-1]
    else:
        result = run([BIN / "fairseq-maskplug-train", *args])
        one_line_error(result, "does not fit this run's model")
        last = result.stderr.strip().splitlines()[-1]
    assert f"{mlm_checkpoint} does not fit this run's model: its model has encoder_layers 2 (this run: 3), " \
           f"encoder_embed_dim {width} (this run: {2 * width}): give this run --encoder-layers 2 " \
           f"--encoder-embed-dim {width}" in last, last
    assert "dictionary" not in last


# ---- faults ---------------------------------------------------------------------------------------

def damage(path, how):
    """Damage a checkpoint file in place: ``empty``, ``half`` (cut at half), ``tail`` (its last 100
    bytes lost), ``text`` (not a torch file)."""
    data = path.read_bytes()
    path.write_bytes({"empty": b"", "half": data[:len(data) // 2], "tail": data[:-100],
                      "text": b"version https://git-lfs.github.com/spec/v1\n"}[how])


def test_no_cut_of_a_checkpoint_passes_the_structure_check(mlm_checkpoint, tmp_path):
    """Every prefix of a checkpoint (40 cuts over its length, and the last byte lost) is reported as
    cut short; the whole file passes."""
    from fairseq_maskplug.common.checkpoint_files import checkpoint_damage

    data = mlm_checkpoint.read_bytes()
    assert checkpoint_damage(str(mlm_checkpoint)) is None
    cut = tmp_path / "cut.pt"
    for length in sorted({*np.linspace(1, len(data) - 1, 40).astype(int), len(data) - 1}):
        cut.write_bytes(data[:length])
        assert "cut short" in checkpoint_damage(str(cut)), length


@pytest.mark.parametrize("how, said", [("empty", "it is empty (0 bytes)"), ("half", "it is cut short"),
                                       ("tail", "it is cut short"), ("text", "it is not a torch checkpoint")])
def test_resuming_from_a_damaged_checkpoint_names_it_and_the_intact_one_beside_it(tiny_data, tmp_path, how, said):
    """Resume with a damaged checkpoint_last.pt (fairseq: '[Errno 22] Invalid argument', or torch's
    _use_new_zipfile_serialization): one line naming the file, the damage and the intact checkpoint beside
    it; through fairseq-train --user-dir the traceback ends with the same line."""
    save = tmp_path / "ck"
    check(maskplug_train(tiny_data / "bin", save, "--save-interval-updates", "2", "--max-update", "3"))
    last = save / "checkpoint_last.pt"
    intact = sorted(p.name for p in save.glob("checkpoint_*_*.pt"))
    assert intact
    damage(last, how)
    line = one_line_error(maskplug_train(tiny_data / "bin", save, "--max-update", "6"),
                          f"checkpoint {last} is damaged: {said}", f"intact beside it: ")
    assert intact[-1] in line or "checkpoint_best.pt" in line
    result = run([BIN / "fairseq-train", tiny_data / "bin", "--user-dir", REPO / "fairseq_maskplug", "--task",
                  "guided_mlm", "--criterion", "masked_lm", "--tokens-per-sample", "32", "--save-dir", save,
                  *TINY_ROBERTA, *CPU_RUN, "--max-update", "6"], new_process=True)
    assert result.returncode != 0 and f"checkpoint {last} is damaged: {said}" in result.stderr.splitlines()[-1]


@pytest.mark.parametrize("command", ["evaluate-mlm", "score-pll", "finetune"])
def test_tools_name_a_damaged_checkpoint(tiny_data, mlm_checkpoint, tmp_path, command):
    broken = tmp_path / "model.pt"
    broken.write_bytes(mlm_checkpoint.read_bytes()[:-10])
    if command == "finetune":
        result = maskplug_train(tiny_data / "bin", tmp_path / "ck", "--finetune-from-model", broken)
    elif command == "evaluate-mlm":
        result = run([BIN / "fairseq-maskplug-evaluate-mlm", "--data", tiny_data / "bin", broken])
    else:
        result = run([BIN / "fairseq-maskplug-score-pll", "--checkpoint", broken, "--data", tiny_data / "bin",
                      "--splits", "valid"])
    one_line_error(result, f"checkpoint {broken} is damaged: it is cut short", "copy it again")

def test_evaluate_mlm_names_data_of_another_dictionary(tiny_data, mlm_checkpoint, tmp_path):
    """Issue 104: data binarized with a dictionary other than the scored model's is one line naming both and the
    command that writes the model's data (it was fairseq's size-mismatch traceback)."""
    import shutil

    other = shutil.copytree(tiny_data / "bin", tmp_path / "other")
    with open(other / "dict.txt", "a", encoding="utf-8") as f:
        f.writelines(f"extra{i} 1\n" for i in range(16))
    one_line_error(run([BIN / "fairseq-maskplug-evaluate-mlm", "--data", other, mlm_checkpoint]),
                   f"{mlm_checkpoint}: its parameters do not fit --data {other}'s dictionary", "prepare-text --like")


def cut(path, lost):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) - lost])
    return len(data)


@pytest.mark.parametrize("name, lost", [("train.bin", 1), ("train.bin", 400), ("valid.idx", 1), ("valid.idx", 30),
                                        ("valid.idx", 10 ** 6)])
def test_a_split_cut_short_is_named_with_its_bytes(tiny_data, tmp_path, name, lost):
    """An interrupted copy of the data: fairseq read past the end of a .bin (reported as a literal <s>
    in the text) or failed on an .idx with an AttributeError; now the file and the bytes it lacks."""
    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    whole = cut(data / name, lost)
    line = one_line_error(maskplug_train(data, tmp_path / "ck"), f"{data / name} is cut short",
                          "copy the data again, or rerun fairseq-preprocess")
    if name.endswith(".idx") and lost < whole:
        assert f"({whole - lost} of {whole} bytes)" in line
    if name.endswith(".bin"):
        assert f"({whole - lost} of {whole} bytes that train.idx indexes)" in line


@pytest.mark.parametrize("part", ["bin", "idx"])
def test_a_side_information_track_cut_short_is_named_before_batches(tiny_data, tmp_path, part):
    """--mask-policy l3 with train.plt.bin cut short failed when batches were made ('offset must be
    non-negative and no greater than buffer length'); now at load, naming the track's file."""
    from fairseq_maskplug.data import write_side_info
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    for split in ("train", "valid"):
        tokens = MMapIndexedDataset(str(data / split))  # alive while .sizes (a view of its mmap) is copied
        sizes = np.array(tokens.sizes)
        write_side_info(str(data / f"{split}.plt"), [np.full(n, 0.5) for n in sizes], tokens_prefix=str(data / split))
    cut(data / f"train.plt.{part}", 8)
    one_line_error(maskplug_train(data, tmp_path / "ck", "--mask-policy", "l3"),
                   f"{data}/train.plt.{part} is cut short",
                   "rerun the command that wrote track 'plt' for split 'train'")


def test_a_checkpoint_copy_or_save_never_replaces_a_good_checkpoint_with_a_damaged_one(mlm_checkpoint, tmp_path):
    """fairseq copies checkpoint_N.pt over checkpoint_last.pt in place (a job killed during the copy left it
    truncated) and renames its temporary save without a check. Through the plugin, a copy goes to a
    temporary that is flushed and checked whole first; a damaged source or save is refused, the earlier
    checkpoint_last.pt stays byte for byte, and no temporary is left."""
    from fairseq import checkpoint_utils
    from fairseq_maskplug.common.checkpoint_files import CheckedCheckpointFiles, DamagedCheckpointError

    files = checkpoint_utils.PathManager
    assert isinstance(files, CheckedCheckpointFiles)  # what fairseq's save_checkpoint uses, once the plugin loads
    good = mlm_checkpoint.read_bytes()
    last = tmp_path / "checkpoint_last.pt"
    last.write_bytes(good)
    whole = tmp_path / "checkpoint3.pt"
    whole.write_bytes(good[::-1][::-1])
    assert files.copy(str(whole), str(last), overwrite=True) and last.read_bytes() == good
    damaged = tmp_path / "checkpoint4.pt"
    damaged.write_bytes(good[:len(good) // 2])
    with pytest.raises(DamagedCheckpointError, match="is cut short"):
        files.copy(str(damaged), str(last), overwrite=True)
    with pytest.raises(DamagedCheckpointError, match="not saved: the earlier checkpoint stays"):
        files.rename(str(damaged), str(last))
    assert last.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint3.pt", "checkpoint_last.pt"]


def test_a_write_limit_while_scoring_is_one_line_and_keeps_the_earlier_track(tiny_data, mlm_checkpoint, tmp_path):
    """A full disk or a file-size limit while score-pll writes its track (ulimit -f, so no root or mount is
    needed): fairseq's 'OSError: [Errno 27] File too large' traceback is one line naming the output; no
    temporary is left and the track an earlier run wrote is unchanged, byte for byte."""
    import resource

    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    score = [BIN / "fairseq-maskplug-score-pll", "--checkpoint", mlm_checkpoint, "--data", data, "--splits", "train",
             "--word-starts", "token"]
    check(run(score))
    earlier = {p.name: p.read_bytes() for p in data.glob("train.plt.*")}
    assert (data / "train.plt.bin").stat().st_size > 8192

    def limit():  # 8 KiB per file: less than the track
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))

    line = one_line_error(run(score, preexec_fn=limit), f"writing {data}/train.plt.bin/.idx failed after ",
                          "File too large: a file-size limit (ulimit -f)", "nothing was written")
    assert "Traceback" not in line
    assert {p.name: p.read_bytes() for p in data.glob("train.plt.*")} == earlier
    assert not list(data.glob("*.tmp-*"))


def test_a_killed_writer_leaves_no_output_and_its_temporaries_are_removed_by_the_next(tiny_data, tmp_path):
    from fairseq_maskplug.data import write_side_info

    data = tmp_path / "bin"
    shutil.copytree(tiny_data / "bin", data)
    script = ("import sys, time, numpy as np\n"
              "import fairseq_maskplug.plugin\n"
              "from fairseq_maskplug.data import write_side_info\n"
              "def rows():\n"
              "    for i in range(40):\n"
              "        if i == 20:\n"
              "            print('half', flush=True); time.sleep(60)\n"
              "        yield np.zeros(3)\n"
              f"write_side_info({str(data / 'valid.x')!r}, rows())\n")
    proc = subprocess.Popen([str(BIN / "python"), "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "half"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    leftovers = list(data.glob("valid.x.tmp-*"))
    assert leftovers and not list(data.glob("valid.x.bin")) and not list(data.glob("valid.x.idx"))
    write_side_info(str(data / "valid.x"), [np.zeros(3)] * 2)
    assert not list(data.glob("valid.x.tmp-*"))
    assert (data / "valid.x.idx").exists()


@pytest.mark.full
def test_training_killed_with_sigkill_resumes_to_the_uninterrupted_parameters(tiny_data, tmp_path):
    from fairseq_helpers import assert_same_params

    common = ["--max-epoch", "5", "--max-update", "30", "--save-interval-updates", "5", "--seed", "5"]
    check(maskplug_train(tiny_data / "bin", tmp_path / "whole", *common))
    args = [str(a) for a in [BIN / "fairseq-maskplug-train", tiny_data / "bin", "--task", "guided_mlm", "--criterion",
                             "masked_lm", "--tokens-per-sample", "32", "--save-dir", tmp_path / "killed",
                             *TINY_ROBERTA, *CPU_RUN, *common]]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not (tmp_path / "killed" / "checkpoint_last.pt").exists() and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (tmp_path / "killed" / "checkpoint_last.pt").exists()
    resumed = check(run(args))
    assert "Loaded checkpoint" in resumed.stdout + resumed.stderr  # resumed, not started again
    assert_same_params(tmp_path / "whole" / "checkpoint_last.pt", tmp_path / "killed" / "checkpoint_last.pt")


# ---- model, options and tools, checked before work: one line each ---------------------------------

@pytest.fixture(scope="module")
def bart_checkpoint(tiny_data, tmp_path_factory):
    from fairseq_helpers import train_bart

    save = tmp_path_factory.mktemp("bart_ck")
    check(train_bart(tiny_data / "bin", save, "--max-update", "1", "--no-epoch-checkpoints"))
    return save / "checkpoint_last.pt"


def _train(task, *args):
    return lambda ctx: [BIN / "fairseq-maskplug-train", ctx["data"], "--task", task, "--save-dir", ctx["tmp"] / "ck",
                        *CPU_RUN, "--max-update", "1", *args]


def _gpt2_files(ctx):
    from release_helpers import make_release

    release = make_release(ctx["tmp"] / "release", ["the film felt dull to me ."] * 20, merges=10)
    return release


REFUSALS = {  # case: (command line from the context, fragment of the one error line)
    "RoBERTa under guided_denoising": (
        _train("guided_denoising", *TINY_ROBERTA, "--tokens-per-sample", "32"),
        "--task guided_denoising trains an encoder-decoder model (--arch bart_tiny, bart_base, bart_large); "
        "--arch roberta_base is an encoder"),
    "BART under span_policy": (
        _train("span_policy", *TINY_BART, "--tokens-per-sample", "32"),
        "--task span_policy trains an encoder (--arch roberta_tiny, roberta_base, roberta_large); --arch "
        "bart_tiny is an encoder-decoder"),
    "tokens per sample above RoBERTa's positions": (
        _train("guided_mlm", *TINY_ROBERTA, "--tokens-per-sample", "128"),
        "--tokens-per-sample 128 exceeds the 64 positions of --arch roberta_base"),
    "tokens per sample above BART's positions": (
        _train("guided_denoising", *TINY_BART, "--tokens-per-sample", "65"),
        "--tokens-per-sample 65 exceeds the 64 positions of --arch bart_tiny"),
    "a RoBERTa checkpoint fine-tuned into BART": (
        lambda ctx: _train("guided_denoising", *TINY_BART, "--tokens-per-sample", "32", "--finetune-from-model",
                           ctx["mlm"])(ctx),
        "its parameters belong to another architecture (KeyError"),
    "meta_span_policy without --downstream-data": (
        lambda ctx: _train("meta_span_policy", *TINY_ROBERTA, "--tokens-per-sample", "32", "--seq2seq-checkpoint",
                           ctx["bart"])(ctx),
        "--downstream-data is required"),
    "convert --tolerance -1": (
        lambda ctx: [BIN / "fairseq-maskplug-convert", "--from-fairseq", ctx["mlm"], "--to", "hf", ctx["tmp"] / "hf",
                     "--tolerance", "-1"],
        "argument --tolerance: must lie in [0, inf), got -1"),
    "convert of a BART checkpoint on data of neither GPT-2 BPE nor a sentencepiece model found": (
        lambda ctx: [BIN / "fairseq-maskplug-convert", "--from-fairseq", ctx["bart"], "--dict",
                     ctx["data"] / "dict.txt", "--to", "hf", ctx["tmp"] / "hf"],
        "holds pieces, not GPT-2 BPE ids (e.g. 'w"),
    "convert of a model whose dictionary is not GPT-2 BPE, with --gpt2-bpe": (
        lambda ctx: [BIN / "fairseq-maskplug-convert", "--from-fairseq", ctx["mlm"], "--gpt2-bpe", _gpt2_files(ctx),
                     "--to", "hf", ctx["tmp"] / "hf"],
        "the data was written with sentencepiece (--spm-model, not --gpt2-bpe)"),
    "show-examples without --task": (
        lambda ctx: [BIN / "fairseq-maskplug-show-examples", ctx["data"], "--mask-policy", "span"],
        "give the task and its data as fairseq-train takes them"),
    "show-examples --format html of a task without masks": (
        lambda ctx: [BIN / "fairseq-maskplug-show-examples", ctx["data"], "--task", "token_importance", "--format",
                     "html"],
        "--format html colours masked positions; --task token_importance trains a token head"),
    "salient-spans with an unknown --drop-labels": (
        lambda ctx: [BIN / "fairseq-maskplug-salient-spans", "--data", ctx["data"], "--split", "valid", "--text",
                     ctx["text"], "--bpe", "sentencepiece", "--drop-labels", "FOO,GPE", "--name", "refused"],
        "--drop-labels FOO: not an entity type of"),
}


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refused_before_work_with_one_line(tiny_data, mlm_checkpoint, bart_checkpoint, tmp_path, case):
    command, fragment = REFUSALS[case]
    data = tmp_path / "data"
    shutil.copytree(tiny_data / "bin", data)
    text = tmp_path / "valid.txt"  # the valid text as its tokens spell it (no \u2581 word starts: no spaces)
    lines = (tiny_data / "valid.txt").read_text().splitlines()
    text.write_text("".join("".join(line.split()) + "\n" for line in lines))
    ctx = {"data": data, "tmp": tmp_path, "mlm": mlm_checkpoint, "bart": bart_checkpoint, "text": text}
    one_line_error(run(command(ctx)), fragment)
    assert no_checkpoint(tmp_path / "ck") and not (tmp_path / "hf").exists()
    assert not list(data.glob("*.refused*"))


def test_two_paths_of_one_command_cannot_be_one_file(task_dir, fairseq_classifier, tmp_path):
    """Outputs written over the checkpoint, the binarized split or each other were accepted."""
    before = fairseq_classifier.read_bytes()
    one_line_error(run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate", "--checkpoint",
                        fairseq_classifier, "--data", task_dir, "--split", "valid", "--output", fairseq_classifier]),
                   f"--output {fairseq_classifier} is also --checkpoint: one would overwrite the other")
    assert fairseq_classifier.read_bytes() == before
    split = task_dir / "input0" / "valid.bin"
    before = split.read_bytes()
    one_line_error(run([BIN / "python", "-m", "preprocess.score_importance", "--checkpoint", fairseq_classifier,
                        "--data", task_dir, "--split", "valid", "--preview", split]),
                   f"the split {split} is also --preview")
    assert split.read_bytes() == before and not list(split.parent.glob("valid.importance*"))
    one_line_error(run([BIN / "fairseq-maskplug-score-spans", "--checkpoint", fairseq_classifier, "--data",
                        task_dir / "input0", "--splits", "valid", "--start-name", "spans", "--end-name", "spans"]),
                   "--end-name track", "is also --start-name track")


@pytest.mark.parametrize("name", ["../outside", "a/b", "", "-x"])
def test_track_names_are_file_name_parts(tiny_data, name):
    """A --name with a path in it wrote the track outside the data directory."""
    result = run([BIN / "fairseq-maskplug-binarize-side-info", "--tokens", tiny_data / "valid.txt", "--values",
                  tiny_data / "valid.txt", "--destdir", tiny_data / "bin", "--split", "valid", f"--name={name}"])
    one_line_error(result, f"argument --name: track name {name!r}: use letters, digits")


@pytest.mark.parametrize("command, option, value", [
    ("binarize-side-info", "--split", "../outside"), ("score-pll", "--splits", "a/b"),
    ("pmi-units", "--splits", "train,../valid"), ("pmi-units", "--count-split", ".hidden"),
    ("evaluate-mlm", "--split", "../valid")])
def test_split_names_are_file_name_parts(tiny_data, mlm_checkpoint, command, option, value):
    """A split name with a path in it read, or wrote a track, outside the data directory."""
    args = {"binarize-side-info": ["--tokens", tiny_data / "valid.txt", "--values", tiny_data / "valid.txt",
                                   "--destdir", tiny_data / "bin", "--name", "x"],
            "score-pll": ["--checkpoint", mlm_checkpoint, "--data", tiny_data / "bin"],
            "pmi-units": ["--data", tiny_data / "bin"],
            "evaluate-mlm": ["--data", tiny_data / "bin", mlm_checkpoint]}[command]
    bad = value.split(",")[-1]
    one_line_error(run([BIN / f"fairseq-maskplug-{command}", *args, f"{option}={value}"]),
                   f"argument {option}", f"split name {bad!r}: use letters, digits")


def test_a_tartan_dev_subset_too_small_is_refused_before_training(task_dir, tmp_path):
    """It was refused at the first update, after fairseq had written crash.pt."""
    result = maskplug_train(task_dir, tmp_path / "ck", "--num-classes", "2", "--loss-weighting", "tartan",
                            task="joint_mlm_classification", criterion="joint_mlm_classification")
    one_line_error(result, "--tartan-dev-subset valid has 40 items, fewer than --tartan-dev-fit-size + "
                           "--tartan-dev-batch-size = 96")
    assert "Start iterating over samples" not in result.stdout + result.stderr and no_checkpoint(tmp_path / "ck")


def test_score_importance_refuses_one_preview_file_for_several_splits(task_dir, fairseq_classifier, tmp_path):
    data = shutil.copytree(task_dir, tmp_path / "task")
    one_line_error(run([BIN / "python", "-m", "preprocess.score_importance", "--checkpoint", fairseq_classifier,
                        "--data", data, "--splits", "train", "valid", "--preview", tmp_path / "p.txt"]),
                   "--preview names one file, for one split; 2 splits were given")
    assert not list((data / "input0").glob("*.importance*")) and not (tmp_path / "p.txt").exists()


# ---- round three: damaged dictionaries, manifests and index files; writes the disk refuses ----------

def file_size_limit(limit):
    """A ``preexec_fn`` that limits every file the child writes to ``limit`` bytes (ulimit -f)."""
    import resource

    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.parametrize("how, said", [("empty", "it is empty (0 bytes)"),
                                       ("cut", "it is cut short"),
                                       ("latin-1", "it is not UTF-8 text")])
def test_a_damaged_dictionary_is_named_before_training(tiny_data, tmp_path, how, said):
    """fairseq loaded an empty dict.txt as its four special symbols (the data's ids were then reported
    as 'binarized with another dictionary'), and a dict.txt cut inside a line as "Incorrect dictionary
    format" without naming the file; now one line names the file and the damage."""
    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    raw = (data / "dict.txt").read_bytes()
    (data / "dict.txt").write_bytes({"empty": b"", "cut": raw[:raw.rindex(b" ")],
                                     "latin-1": raw[:10] + b"\xe9 3\n" + raw[10:]}[how])
    one_line_error(maskplug_train(data, tmp_path / "ck"), f"dictionary {data}/dict.txt is damaged: {said}",
                   "copy it again, or rerun the fairseq-preprocess")
    assert no_checkpoint(tmp_path / "ck")


def test_no_cut_of_a_dictionary_is_read_as_another_damage(tiny_data, tmp_path):
    """Every prefix of a dict.txt is whole (a cut at a line's end, or inside a count, leaves lines
    fairseq reads), empty, or cut short: never 'not UTF-8' nor a bad line in the middle; a cut inside
    a token (before its line's last space) is always caught."""
    from fairseq_maskplug.data.dictionaries import dictionary_damage

    raw = (tiny_data / "bin" / "dict.txt").read_bytes()
    assert dictionary_damage(str(tiny_data / "bin" / "dict.txt")) is None
    cut = tmp_path / "dict.txt"
    for length in range(len(raw)):
        cut.write_bytes(raw[:length])
        damage = dictionary_damage(str(cut))
        last_line = raw[:length].rsplit(b"\n", 1)[-1]
        if length == 0:
            assert damage == "it is empty (0 bytes)"
        elif last_line and b" " not in last_line:
            assert damage is not None and "cut short" in damage, (length, damage)
        else:
            assert damage is None or "cut short" in damage, (length, damage)


def l3_tracks(data):
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    from fairseq_maskplug.data import write_side_info

    for split in ("train", "valid"):
        tokens = MMapIndexedDataset(str(data / split))
        sizes = np.array(tokens.sizes)
        write_side_info(str(data / f"{split}.plt"), [np.full(n, 0.5) for n in sizes], tokens_prefix=str(data / split))


def test_a_track_copied_over_or_with_other_content_is_named_from_its_manifest(tiny_data, tmp_path):
    """The track's manifest records its files' lengths and SHA-256: a longer .bin (another file copied
    over it) is named at every load; a .bin of the right length with other content is named with
    --verify-data (and passes without it, whose values are still checked); a manifest cut short is named."""
    import struct
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    from fairseq_maskplug.common.file_records import DamagedFileError
    from fairseq_maskplug.data.side_info import load_side_info

    data = shutil.copytree(tiny_data / "bin", tmp_path / "bin")
    l3_tracks(data)
    recorded = __import__("json").loads((data / "train.plt.json").read_text())["files"]
    assert recorded[".bin"]["bytes"] == (data / "train.plt.bin").stat().st_size
    track = data / "train.plt.bin"
    whole = track.read_bytes()
    tokens = MMapIndexedDataset(str(data / "train"))
    track.write_bytes(whole + b"\0" * 8)
    one_line_error(maskplug_train(data, tmp_path / "ck", "--mask-policy", "l3"),
                   f"side information {track} is longer than written ({len(whole) + 8} bytes, {len(whole)} recorded)",
                   "rerun the command that wrote track 'plt' for split 'train'")
    middle = len(whole) // 2 // 8 * 8
    track.write_bytes(whole[:middle] + struct.pack("<d", 0.25) + whole[middle + 8:])
    load_side_info(str(data / "train"), "plt", tokens, "train")  # lengths agree, values valid
    with pytest.raises(DamagedFileError, match="has the length written but other content"):
        load_side_info(str(data / "train"), "plt", tokens, "train", checksum=True)
    one_line_error(maskplug_train(data, tmp_path / "ck", "--mask-policy", "l3", "--verify-data"),
                   f"side information {track} has the length written but other content")
    track.write_bytes(whole)
    manifest = data / "train.plt.json"
    manifest.write_bytes(manifest.read_bytes()[:40])
    one_line_error(maskplug_train(data, tmp_path / "ck", "--mask-policy", "l3"),
                   f"{manifest} is damaged: it is not whole JSON (40 bytes")
    assert no_checkpoint(tmp_path / "ck")


@pytest.fixture
def retrieval_texts(tmp_path):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(300)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(" ".join(rng.choice(words, 12)) + "\n" for _ in range(1500)))
    queries = tmp_path / "queries.txt"
    queries.write_text("w1 w2 w3\nw7 w8\n")
    return corpus, queries


def retrieve(*args, **kwargs):
    return run([BIN / "fairseq-maskplug-retrieve", *args], **kwargs)


def test_a_damaged_retrieval_index_is_named_before_it_is_searched(retrieval_texts, tmp_path):
    """An index file cut short (np.load's 'mmap length is greater than file size', no file named), one of
    the right length with other content (--verify-data) and a manifest cut short: one line naming the
    file and what to do."""
    corpus, queries = retrieval_texts
    index = tmp_path / "idx"
    check(retrieve("--corpus", corpus, "--index", index))
    manifest = __import__("json").loads((index / "maskplug_index.json").read_text())
    assert set(manifest["files"]) == {p.name for p in index.iterdir()} - {"maskplug_index.json", ".maskplug-output.json"}
    postings = index / "block_max.npy"
    whole = postings.read_bytes()
    args = ["--corpus", corpus, "--queries", queries, "--out", tmp_path / "out", "--index", index]
    postings.write_bytes(whole[:-4])
    one_line_error(retrieve(*args), f"index file {postings} is cut short ({len(whole) - 4} of {len(whole)} bytes)",
                   "remove the --index directory to rebuild it")
    postings.write_bytes(whole[:-4] + b"\0\0\0\0")
    check(retrieve(*args))  # lengths agree: the sums are compared only when asked
    one_line_error(retrieve(*args, "--verify-data"), f"index file {postings} has the length written but other content")
    postings.write_bytes(whole)
    (index / "maskplug_index.json").write_text("{\"format\": 1, \"corp")
    one_line_error(retrieve(*args), f"{index}/maskplug_index.json is damaged: it is not whole JSON")


def test_a_write_limit_while_retrieving_is_one_line_and_leaves_nothing(retrieval_texts, tmp_path):
    """A file-size limit while the index or the output is written: an OSError traceback before; now one
    line naming the directory and the bytes written, and no index, output or temporary left."""
    corpus, queries = retrieval_texts
    index, out = tmp_path / "idx", tmp_path / "out"
    line = one_line_error(retrieve("--corpus", corpus, "--index", index, preexec_fn=file_size_limit(4096)),
                          f"writing {index} failed after ", "a file-size limit (ulimit -f)")
    assert "Traceback" not in line and not index.exists() and not list(tmp_path.glob("idx.tmp-*"))
    check(retrieve("--corpus", corpus, "--index", index))
    one_line_error(retrieve("--corpus", corpus, "--queries", queries, "--out", out, "--index", index, "--top-k", "500",
                            preexec_fn=file_size_limit(4096)), f"writing {out} failed after ", "nothing was written")
    assert not out.exists() and not list(tmp_path.glob("out.tmp-*"))


def test_a_write_limit_while_saving_a_checkpoint_keeps_the_last_good_one(tiny_data, mlm_checkpoint, tmp_path):
    """fairseq retried a refused checkpoint write three times, logged torch's 'unexpected pos' and left
    checkpoint_N.pt.tmp; now one line names the checkpoint and the bytes written, no temporary is left,
    and the checkpoint_last.pt of an earlier run is unchanged."""
    save = tmp_path / "ck"
    check(maskplug_train(tiny_data / "bin", save, "--max-update", "2"))
    earlier = (save / "checkpoint_last.pt").read_bytes()
    limit = file_size_limit(len(earlier) // 2)
    result = run([BIN / "fairseq-maskplug-train", tiny_data / "bin", "--task", "guided_mlm", "--criterion",
                  "masked_lm", "--tokens-per-sample", "32", "--save-dir", save, *TINY_ROBERTA, *CPU_RUN,
                  "--max-epoch", "1", "--max-update", "4"], preexec_fn=limit)
    one_line_error(result, f"writing {save}/checkpoint", "failed after ", "a file-size limit (ulimit -f)",
                   "nothing was written")
    assert (save / "checkpoint_last.pt").read_bytes() == earlier
    assert not list(save.glob("*.tmp*"))
