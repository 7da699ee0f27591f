"""guided_denoising: target formats, salient spans, the seq2seq dataset and real BART training."""

import math
import shutil

import numpy as np
import pytest
import torch
from fairseq import options, tasks
from fairseq.data.indexed_dataset import MMapIndexedDataset

from fairseq_helpers import BIN, CPU_RUN, TINY_BART, assert_same_params, check, json_logs, run, train_bart
from fairseq_maskplug.data import write_side_info
from fairseq_maskplug.masking import Corruption, build_mask_policy, maskable_positions, policies_read
from fairseq_maskplug.masking.salient import SPAN_LENGTH_BASE, choose_spans, complete_spans, span_ids
from fairseq_maskplug.masking.seq2seq import (chosen_runs, collapse_runs, previous_output_tokens, seq2seq_source,
                                              seq2seq_target, t5_pair)
from stats_helpers import assert_proportion, assert_uniform

BOS, PAD, EOS, MASK = 0, 1, 2, 99
A, B, C, D, E = 10, 11, 12, 13, 14
BLOCK = np.array([BOS, A, B, C, D, E, EOS])
CHOSEN = np.array([0, 0, 1, 1, 0, 1, 0], dtype=bool)  # b c, e


# ---- layer 1: target formats ------------------------------------------------------------------

def test_full_target_is_the_original_block():
    assert seq2seq_target(BLOCK, CHOSEN, "full", MASK, EOS).tolist() == BLOCK.tolist()


def test_masked_target_is_the_runs_of_chosen_tokens_separated_by_mask():
    assert seq2seq_target(BLOCK, CHOSEN, "masked", MASK, EOS).tolist() == [B, C, MASK, E, EOS]
    nothing = np.zeros_like(CHOSEN)
    assert seq2seq_target(BLOCK, nothing, "masked", MASK, EOS).tolist() == [EOS]
    with pytest.raises(ValueError, match="unknown target format"):
        seq2seq_target(BLOCK, CHOSEN, "sentinel", MASK, EOS)


def test_source_masks_every_chosen_token_and_collapse_keeps_one_mask_per_run():
    assert seq2seq_source(BLOCK, CHOSEN, MASK, collapse=False).tolist() == [BOS, A, MASK, MASK, D, MASK, EOS]
    assert seq2seq_source(BLOCK, CHOSEN, MASK, collapse=True).tolist() == [BOS, A, MASK, D, MASK, EOS]
    assert collapse_runs(np.arange(6), np.array([1, 1, 0, 1, 1, 1], dtype=bool)).tolist() == [0, 2, 3]


def test_with_80_10_10_collapse_merges_only_runs_that_became_mask():
    rng = np.random.default_rng(0)
    keep_all = Corruption(MASK, np.array([A]), leave_unmasked_prob=1.0, random_token_prob=0.0)
    assert seq2seq_source(BLOCK, CHOSEN, MASK, True, rng, keep_all).tolist() == BLOCK.tolist()
    replace_all = Corruption(MASK, np.array([A]), leave_unmasked_prob=0.0, random_token_prob=1.0)
    assert seq2seq_source(BLOCK, CHOSEN, MASK, True, rng, replace_all).tolist() == [BOS, A, A, A, D, A, EOS]


def test_teacher_forcing_input_starts_with_eos():
    target = seq2seq_target(BLOCK, CHOSEN, "masked", MASK, EOS)
    assert previous_output_tokens(target, EOS).tolist() == [EOS, B, C, MASK, E]
    with pytest.raises(ValueError, match="end with </s>"):
        previous_output_tokens(np.array([B, C]), EOS)


def fill_in(source, target, mask_idx, eos):
    """Rebuild the block from a collapsed source and a masked target: the k-th <mask> is the k-th run."""
    runs = np.split(target[:-1], np.flatnonzero(target[:-1] == mask_idx))
    runs = [r[r != mask_idx] for r in runs]
    out, k = [], 0
    for token in source:
        if token == mask_idx:
            out.extend(runs[k].tolist())
            k += 1
        else:
            out.append(int(token))
    assert k == len(runs) or (k == 0 and target.tolist() == [eos])
    return out


@pytest.mark.parametrize("policy", ["random", "span"])
def test_collapsed_source_and_masked_target_together_hold_the_block(policy):
    from types import SimpleNamespace
    cfg = SimpleNamespace(mask_prob=0.3, span_mask_prob=0.3, span_geometric_p=0.3, span_max_length=5)
    chooser = build_mask_policy(policy, cfg)
    for seed in range(200):
        rng = np.random.default_rng(seed)
        tokens = np.concatenate([[BOS], rng.integers(10, 50, rng.integers(1, 30)), [EOS]])
        maskable = maskable_positions(tokens, (BOS, EOS, PAD))
        mask = chooser.choose(tokens, maskable, {}, rng)
        source = seq2seq_source(tokens, mask, MASK, collapse=True)
        target = seq2seq_target(tokens, mask, "masked", MASK, EOS)
        assert fill_in(source, target, MASK, EOS) == tokens.tolist()
        assert len(target) <= len(tokens)  # the dataset's size bound


# ---- layer 1: span ids and the salient_span policy --------------------------------------------

def test_span_ids_encode_length_and_keep_adjacent_spans_apart():
    ids = span_ids(8, [(1, 3), (3, 4), (6, 8)])
    base = SPAN_LENGTH_BASE
    assert ids.tolist() == [0, base + 2, base + 2, 2 * base + 1, 0, 0, 3 * base + 2, 3 * base + 2]
    assert complete_spans(ids, np.ones(8, dtype=bool)) == [(1, 3), (3, 4), (6, 8)]
    with pytest.raises(ValueError, match="overlaps"):
        span_ids(8, [(1, 4), (3, 5)])
    with pytest.raises(ValueError, match="does not fit"):
        span_ids(4, [(2, 5)])


def test_a_span_cut_by_the_block_edge_is_never_complete():
    line = span_ids(12, [(0, 3), (4, 6), (9, 12)])
    maskable = np.ones(12, dtype=bool)
    for start in range(12):
        for end in range(start + 1, 13):
            found = complete_spans(line[start:end], maskable[start:end])
            expected = [(s - start, e - start) for s, e in [(0, 3), (4, 6), (9, 12)] if start <= s and e <= end]
            assert found == expected, (start, end)


def test_spans_on_special_tokens_and_malformed_ids_are_refused():
    ids = span_ids(5, [(1, 3)])
    assert complete_spans(ids, np.array([1, 1, 0, 1, 1], dtype=bool)) == []
    with pytest.raises(ValueError, match="not a span id"):
        complete_spans(np.array([0, 5, 5, 5, 0]), np.ones(5, dtype=bool))  # ordinal 0
    with pytest.raises(ValueError, match="not a span id"):
        complete_spans(np.array([0, 1, 1, 1, 0]) * (SPAN_LENGTH_BASE + 2), np.ones(5, dtype=bool))  # 3 > 2 tokens
    with pytest.raises(ValueError, match="not a span id"):
        complete_spans(np.array([0, SPAN_LENGTH_BASE, 0]), np.ones(3, dtype=bool))


def salient_cfg(**kw):
    from types import SimpleNamespace
    return SimpleNamespace(**{"salient_track": "spans", "salient_spans_per_block": 1, "salient_fallback": "none",
                              **kw})


def test_salient_span_policy_chooses_uniformly_among_complete_spans():
    tokens = np.concatenate([[BOS], np.arange(10, 30), [EOS]])
    spans = [(1, 3), (4, 5), (5, 8), (10, 11), (14, 18)]
    ids = span_ids(len(tokens), spans)
    ids[19:21] = 9 * SPAN_LENGTH_BASE + 3  # a span cut by the block's end: 2 of its 3 tokens
    policy = build_mask_policy("salient_span", salient_cfg())
    maskable = maskable_positions(tokens, (BOS, EOS, PAD))
    counts = np.zeros(len(spans))
    trials = 5000
    for seed in range(trials):
        mask = policy.choose(tokens, maskable, {"spans": ids}, np.random.default_rng(seed))
        (chosen,) = [k for k, (s, e) in enumerate(spans) if mask[s:e].all()]
        start, end = spans[chosen]
        assert mask.sum() == end - start  # exactly one whole span, nothing else
        counts[chosen] += 1
    assert_uniform(counts, "salient span choice")


def test_salient_spans_per_block_draws_without_replacement_and_falls_back_only_when_asked():
    tokens = np.concatenate([[BOS], np.arange(10, 30), [EOS]])
    maskable = maskable_positions(tokens, (BOS, EOS, PAD))
    spans = [(1, 3), (4, 5), (5, 8)]
    two = build_mask_policy("salient_span", salient_cfg(salient_spans_per_block=2))
    hits = np.zeros(3)
    trials = 3000
    for seed in range(trials):
        mask = two.choose(tokens, maskable, {"spans": span_ids(len(tokens), spans)}, np.random.default_rng(seed))
        whole = [mask[s:e].all() for s, e in spans]
        assert sum(whole) == 2 and mask.sum() == sum(e - s for (s, e), w in zip(spans, whole) if w)
        hits += whole
    for k in range(3):
        assert_proportion(int(hits[k]), trials, 2 / 3, f"span {k} among 2 of 3")
    none = np.zeros(len(tokens), dtype=np.int64)
    plain = build_mask_policy("salient_span", salient_cfg())
    assert not plain.choose(tokens, maskable, {"spans": none}, np.random.default_rng(0)).any()
    fallback = build_mask_policy("salient_span", salient_cfg(salient_fallback="random", salient_fallback_prob=0.5))
    assert policies_read("salient_span", salient_cfg(salient_fallback="random")) == ["salient_span"]
    rates = [fallback.choose(tokens, maskable, {"spans": none}, np.random.default_rng(s)).mean() for s in range(200)]
    assert 0.3 < np.mean(rates) * len(tokens) / maskable.sum() < 0.7
    with pytest.raises(ValueError, match="--salient-fallback"):
        build_mask_policy("salient_span", salient_cfg(salient_fallback="span"))
    with pytest.raises(ValueError, match="--salient-spans-per-block"):
        build_mask_policy("salient_span", salient_cfg(salient_spans_per_block=0))
    assert not choose_spans([], 1, 4, np.random.default_rng(0)).any()


# ---- the task in process --------------------------------------------------------------------

FLAGGED = ("w0", "w1", "w2", "w3")


def flagged_runs(line):
    """"Entities" of the tiny corpus: maximal runs of the words w0..w3."""
    words, spans, start = line.split(), [], None
    for i, w in enumerate(words + [""]):
        if w in FLAGGED and start is None:
            start = i
        elif w not in FLAGGED and start is not None:
            spans.append((start, i))
            start = None
    return spans


@pytest.fixture(scope="module")
def span_data(tiny_data, tmp_path_factory):
    """The tiny corpus with a ``salient_spans`` track (runs of w0..w3; </s> gets 0)."""
    data = tmp_path_factory.mktemp("spans") / "bin"
    shutil.copytree(tiny_data / "bin", data)
    for split in ("train", "valid"):
        lines = open(tiny_data / f"{split}.txt").read().splitlines()
        tokens = MMapIndexedDataset(str(data / split))
        assert len(tokens) == len(lines)
        rows = [span_ids(n, flagged_runs(line)) for n, line in zip(tokens.sizes, lines)]
        write_side_info(str(data / split) + ".salient_spans", rows, "int32", tokens_prefix=str(data / split))
    return data


def denoising_task(data, *args):
    parser = options.get_training_parser()
    cfg = options.parse_args_and_arch(parser, [str(data), "--task", "guided_denoising", "--tokens-per-sample", "32",
                                               *TINY_BART, *CPU_RUN, *args])
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    task = tasks.setup_task(convert_namespace_to_omegaconf(cfg).task)
    task.load_dataset("valid")
    return task


def items(task, epoch=1, n=40):
    dataset = task.dataset("valid")
    dataset.set_epoch(epoch)
    return [dataset[i] for i in range(min(n, len(dataset)))]


def same_items(a, b):
    return all(torch.equal(x["source"], y["source"]) and torch.equal(x["target"], y["target"]) for x, y in zip(a, b))


def test_same_seed_gives_identical_items_and_epochs_differ(span_data):
    first, second = (denoising_task(span_data, "--seed", "5") for _ in range(2))
    assert same_items(items(first), items(second))
    assert not same_items(items(first, epoch=1), items(first, epoch=2))
    other = denoising_task(span_data, "--seed", "6")
    assert not same_items(items(first), items(other))


def test_fairseq_denoising_dataset_is_not_reproducible_from_its_seed(span_data):
    """Why this task exists: fairseq's DenoisingDataset seeds numpy per (seed, epoch, index) but
    draws span lengths from torch's global generator, so the same item differs between runs."""
    from fairseq.data import DenoisingDataset

    task = denoising_task(span_data)
    blocks = task.dataset("valid").dataset.items.blocks  # SortDataset -> PolicyDenoisingDataset -> blocks
    framed = [torch.from_numpy(task.dataset("valid").dataset.framed(i)[0]) for i in range(len(blocks))]

    class Framed(torch.utils.data.Dataset):
        def __getitem__(self, i):
            return framed[i]

        def __len__(self):
            return len(framed)

    def build():
        return DenoisingDataset(Framed(), np.array([len(t) for t in framed]), task.dictionary, task.mask_idx, None,
                                shuffle=False, seed=1, mask=0.3, mask_random=0.0, insert=0.0, rotate=0.0,
                                permute_sentences=0.0, bpe=None, replace_length=1, mask_length="span-poisson",
                                poisson_lambda=3.5, eos=task.dictionary.eos())

    def sources(torch_seed):
        torch.manual_seed(torch_seed)
        dataset = build()
        return [dataset[i]["source"] for i in range(len(framed))]

    first, again = sources(0), sources(1)
    assert any(not torch.equal(x, y) for x, y in zip(first, again))
    ours = [denoising_task(span_data, "--mask-policy", "span", "--seed", "1") for _ in range(2)]
    torch.manual_seed(0)
    a = items(ours[0])
    torch.manual_seed(1)
    assert same_items(a, items(ours[1]))


def test_full_and_masked_formats_and_logged_counts(span_data):
    full = denoising_task(span_data, "--target-format", "full")
    dataset = full.dataset("valid").dataset
    for i in range(len(dataset)):
        block = dataset.framed(i)[0]
        item = dataset[i]
        assert item["target"].tolist() == block.tolist()
        (chosen, maskable, units_chosen, units), = item["mask_counts"].tolist()
        assert (units_chosen, units) == (chosen, maskable)  # token units
        assert (item["source"] == full.mask_idx).sum() == chosen  # one <mask> per token: no collapse
        assert maskable == int(((block != 0) & (block != 2)).sum())
    sample = full.dataset("valid").collater([full.dataset("valid")[i] for i in range(8)])
    chosen, maskable, _, _ = full.mask_counts(sample)
    assert chosen.tolist() == [full.dataset("valid")[i]["mask_counts"][0, 0] for i in range(8)]
    assert sample["ntokens"] == int(sample["target"].ne(1).sum())
    assert torch.equal(sample["net_input"]["prev_output_tokens"][:, 0], torch.full((8,), 2))


def test_ssm_masks_one_whole_entity_and_collapses_it(span_data):
    task = denoising_task(span_data, "--mask-policy", "salient_span")
    assert task.collapse  # the default for span policies
    dataset = task.dataset("valid").dataset
    unmasked = 0
    for i in range(len(dataset)):
        tokens, side = dataset.framed(i)
        item = dataset[i]
        spans = complete_spans(side["salient_spans"], maskable_positions(tokens, task.special_ids))
        if not spans:
            assert item["mask_counts"][0, 0] == 0 and item["target"].tolist() == [2]
            unmasked += 1
            continue
        answer = item["target"].tolist()[:-1]
        assert any(tokens[s:e].tolist() == answer for s, e in spans)
        assert int((item["source"] == task.mask_idx).sum()) == 1
        assert fill_in(item["source"].numpy(), item["target"].numpy(), task.mask_idx, 2) == tokens.tolist()
    assert 0 < unmasked < len(dataset)
    assert not denoising_task(span_data, "--mask-policy", "salient_span", "--collapse-spans", "off").collapse
    assert denoising_task(span_data, "--collapse-spans", "on").collapse
    assert not denoising_task(span_data).collapse  # auto, with the token policy random


def test_contradicting_or_ignored_options_are_refused(span_data):
    with pytest.raises(SystemExit):  # the old three-state pair of flags is gone (checkpoints still load: compat)
        denoising_task(span_data, "--no-collapse-spans")
    with pytest.raises(ValueError, match="does not read --salient-fallback"):
        denoising_task(span_data, "--salient-fallback", "random")


def test_guided_mlm_masks_salient_spans_too(span_data):
    """SSM for RoBERTa: the same policy in the masked-LM task (targets = the span's tokens)."""
    parser = options.get_training_parser()
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_helpers import TINY_ROBERTA
    cfg = options.parse_args_and_arch(parser, [str(span_data), "--task", "guided_mlm", "--mask-policy",
                                               "salient_span", "--tokens-per-sample", "32", *TINY_ROBERTA, *CPU_RUN])
    task = tasks.setup_task(convert_namespace_to_omegaconf(cfg).task)
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    for i in range(len(dataset)):
        target = dataset[i]["target"]
        chosen = np.flatnonzero(target.numpy() != task.dictionary.pad())
        assert len(chosen) == 0 or (np.diff(chosen) == 1).all()  # one contiguous span


# ---- real fairseq-train ---------------------------------------------------------------------

@pytest.mark.e2e
def test_ssm_training_resumes_exactly_and_generates(span_data, tmp_path):
    common = ["--seed", "3", "--max-epoch", "100", "--no-epoch-checkpoints", "--mask-policy", "salient_span",
              "--salient-fallback", "random"]
    whole = check(train_bart(span_data, tmp_path / "whole", *common, "--max-update", "24"))
    check(train_bart(span_data, tmp_path / "parts", *common, "--max-update", "13"))
    resumed = check(train_bart(span_data, tmp_path / "parts", *common, "--max-update", "24"))
    losses = {r["num_updates"]: r["loss"] for r in json_logs(whole, "train_inner")}
    resumed_losses = {r["num_updates"]: r["loss"] for r in json_logs(resumed, "train_inner")}
    assert sorted(resumed_losses, key=int)[0] == "14"
    assert all(losses[k] == v for k, v in resumed_losses.items())
    assert_same_params(tmp_path / "whole" / "checkpoint_last.pt", tmp_path / "parts" / "checkpoint_last.pt")
    valid = json_logs(whole, "valid")[-1]
    assert math.isfinite(float(valid["valid_loss"])) and 0 < float(valid["valid_mask_rate"]) < 1
    # the trained model generates through fairseq's BART hub interface
    script = ("import fairseq_maskplug.plugin, torch\n"
              "from fairseq.models.bart import BARTModel\n"
              f"bart = BARTModel.from_pretrained({str(tmp_path / 'whole')!r}, checkpoint_file='checkpoint_last.pt', "
              f"data_name_or_path={str(span_data)!r}, bpe=None).eval()\n"
              "d = bart.task.source_dictionary\n"
              "src = torch.LongTensor([d.bos(), d.index('w5'), d.index('<mask>'), d.index('w7'), d.eos()])\n"
              "hypo = bart.generate([src], beam=2, max_len_b=8)[0][0]\n"
              "print('GENERATED', d.string(hypo['tokens']))\n")
    generated = check(run([BIN / "python", "-c", script]))
    assert "GENERATED" in generated.stdout


@pytest.mark.e2e
def test_plus_orig_trains_with_label_smoothing_and_nothing_masked_is_an_error(span_data, tmp_path):
    result = check(train_bart(span_data, tmp_path / "orig", "--target-format", "full", "--max-update", "6",
                              "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"))
    assert float(json_logs(result, "valid")[-1]["valid_mask_rate"]) == pytest.approx(0.15, abs=0.08)
    refused = train_bart(span_data, tmp_path / "mlm", "--criterion", "masked_lm", "--max-update", "2")
    assert refused.returncode != 0 and "trains with --criterion cross_entropy" in refused.stdout + refused.stderr
    empty = span_data.parent / "empty"
    shutil.copytree(span_data, empty)
    for split in ("train", "valid"):  # a track without spans: SSM masks nothing
        tokens = MMapIndexedDataset(str(empty / split))
        write_side_info(str(empty / split) + ".salient_spans", [np.zeros(n) for n in tokens.sizes], "int32",
                        tokens_prefix=str(empty / split))
    nothing = train_bart(empty, tmp_path / "nothing", "--mask-policy", "salient_span", "--max-epoch", "1")
    # refused when the track is loaded, before any update (it used to stop after epoch 1 with a nan loss)
    assert nothing.returncode != 0 and "salient_spans.bin is 0 everywhere: no line has a salient span" in \
        nothing.stdout + nothing.stderr
    assert "| train_inner |" not in nothing.stdout + nothing.stderr
    with_fallback = check(train_bart(empty, tmp_path / "fallback", "--mask-policy", "salient_span",
                                     "--salient-fallback", "random", "--max-update", "2"))
    assert all(float(r["mask_rate"]) > 0 for r in json_logs(with_fallback, "train_inner"))


def test_show_examples_prints_the_items_training_builds(span_data, capsys):
    from preprocess import show_examples

    args = [str(span_data), "--task", "guided_denoising", "--mask-policy", "salient_span", "--tokens-per-sample",
            "32", "--seed", "4", "--split", "valid", "-n", "3"]
    assert show_examples.main(args) == 0
    out = capsys.readouterr().out
    task = denoising_task(span_data, "--mask-policy", "salient_span", "--seed", "4")
    dataset, d = task.dataset("valid"), task.dictionary
    for i in range(3):
        assert f"item {i} (epoch 1, seed 4)" in out
        assert f"  source: {' '.join(d[t] for t in dataset[i]['source'].tolist())}" in out
        assert f"  target: {' '.join(d[t] for t in dataset[i]['target'].tolist())}" in out
    with pytest.raises(SystemExit) as refused:
        show_examples.main([str(span_data), "--task", "guided_denoising", "--split", "valid", "--epoch", "0"])
    assert refused.value.code == 2
    assert "argument --epoch: must lie in [1, inf), got 0" in capsys.readouterr().err


def test_an_examples_page_is_titled_with_the_options_that_change_what_its_masks_look_like():
    from argparse import Namespace

    from fairseq_maskplug.evaluation.examples import page_title

    assert page_title(Namespace(_name="guided_mlm", mask_policy="random", mask_unit="token"), "valid") == \
        "guided_mlm: random, split valid"
    assert page_title(Namespace(_name="guided_mlm", mask_policy="random", mask_unit="word"), "valid") == \
        "guided_mlm: random, --mask-unit word, split valid"
    assert page_title(Namespace(_name="guided_denoising", mask_policy="span", mask_unit="token", target_format="t5"),
                      "train") == "guided_denoising: span, --target-format t5, split train"


@pytest.mark.parametrize("task_flags, views", [(["--task", "guided_mlm", "--mask-policy", "span"], 1),
                                              (["--task", "fe_mlm", "--fe-views", "3"], 3)])
def test_show_examples_html_colours_exactly_the_chosen_positions(span_data, capsys, task_flags, views):
    """--format html: the original text of each item, one coloured span per chosen position (per view's
    colour), as many as the item's targets predict."""
    import re

    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from preprocess import show_examples

    flags = [str(span_data), *task_flags, "--tokens-per-sample", "32", "--seed", "4"]
    assert show_examples.main([*flags, "--split", "valid", "-n", "2", "--format", "html"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("<!doctype html>") and page.count("<p>") == 2
    assert f"<h1>{task_flags[1]}: {task_flags[3] if task_flags[1] == 'guided_mlm' else 'random'}, split valid</h1>" in page
    args = options.parse_args_and_arch(options.get_training_parser(), [*flags, "--arch", "roberta_tiny"])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    for i, item in enumerate(page.split("<p>")[1:]):
        target = dataset.collater([dataset[i]])["target"]
        chosen = target.ne(task.dictionary.pad()).sum(dim=0)  # per position, over the views
        assert item.count("<span style='background") == int(chosen.sum())
        colours = set(re.findall(r"background:(#[0-9a-f]{6})", item))
        assert len(colours) == len([k for k in range(views) if target[k].ne(task.dictionary.pad()).any()])


def test_a_misaligned_or_malformed_span_track_stops_before_training(span_data, tmp_path):
    from fairseq_maskplug.data import SideInfoMismatchError

    bad = tmp_path / "bad"
    shutil.copytree(span_data, bad)
    tokens = MMapIndexedDataset(str(bad / "valid"))
    rows = [np.zeros(n + (i == 3), dtype=np.int64) for i, n in enumerate(tokens.sizes)]  # line 4: one value too many
    write_side_info(str(bad / "valid") + ".salient_spans", rows, "int32", tokens_prefix=str(bad / "valid"))
    with pytest.raises(SideInfoMismatchError, match="at line 4"):
        denoising_task(bad, "--mask-policy", "salient_span")
    rows = [np.full(n, -1) for n in tokens.sizes]
    write_side_info(str(bad / "valid") + ".salient_spans", rows, "int32", tokens_prefix=str(bad / "valid"))
    with pytest.raises(ValueError, match="line 1, value 1: -1 is not a span id"):
        denoising_task(bad, "--mask-policy", "salient_span")


# ---- T5 span corruption (--target-format t5) ------------------------------------------------

def test_t5_pair_is_the_t5_papers_example():
    """Raffel et al. 2020, Fig. 2: "Thank you for inviting me to your party last week." with
    "for inviting" and "last" dropped."""
    words = ["<s>", "Thank", "you", "for", "inviting", "me", "to", "your", "party", "last", "week", ".", "</s>"]
    ids = {w: i for i, w in enumerate(words)}
    X, Y, Z = 100, 101, 102
    tokens = np.array([ids[w] for w in words])
    mask = np.isin(np.arange(len(words)), [3, 4, 9])
    source, target = t5_pair(tokens, mask, [X, Y, Z, 103], eos=ids["</s>"])
    name = {**{i: w for w, i in ids.items()}, X: "<X>", Y: "<Y>", Z: "<Z>"}
    assert [name[t] for t in source] == ["<s>", "Thank", "you", "<X>", "me", "to", "your", "party", "<Y>", "week",
                                         ".", "</s>"]
    assert [name[t] for t in target] == ["<X>", "for", "inviting", "<Y>", "last", "<Z>", "</s>"]
    unmasked_source, unmasked_target = t5_pair(tokens, np.zeros(len(words), bool), [X], eos=ids["</s>"])
    assert unmasked_source.tolist() == tokens.tolist() and unmasked_target.tolist() == [X, ids["</s>"]]
    with pytest.raises(ValueError, match="needs 3 sentinels, and --t5-sentinels gives 2"):
        t5_pair(tokens, mask, [X, Y], eos=ids["</s>"])


def fill_in_sentinels(source, target, sentinels, eos):
    """The block back from a t5 pair: each sentinel of the source replaced by its run in the target."""
    runs, current = {}, None
    for t in target[:-1]:
        if t in sentinels:
            current = t
            runs[current] = []
        else:
            runs[current].append(t)
    assert target[-1] == eos and current == sentinels[len(runs) - 1] and runs[current] == []
    return [x for t in source for x in (runs[t] if t in sentinels else [t])]


@pytest.mark.parametrize("policy", ["random", "span"])
def test_t5_source_and_target_hold_the_block_with_sentinels_in_order(policy):
    """Over 300 seeded blocks: filling each source sentinel with its target run gives the block back,
    sentinels appear in order <extra_id_0>, <extra_id_1>, ..., each run masked is one sentinel."""
    from fairseq_maskplug.masking.builtin_policies import RandomPolicyOptions
    from fairseq_maskplug.masking.spans import SpanPolicyOptions

    cfg = RandomPolicyOptions(mask_prob=0.3) if policy == "random" else SpanPolicyOptions(span_mask_prob=0.3)
    chooser = build_mask_policy(policy, cfg)
    sentinels = list(range(1000, 1100))
    for seed in range(300):
        rng = np.random.default_rng(seed)
        tokens = np.concatenate([[0], rng.integers(4, 50, rng.integers(3, 60)), [2]])
        mask = chooser.choose(tokens, maskable_positions(tokens, (0, 1, 2)), {}, rng)
        source, target = t5_pair(tokens, mask, sentinels, eos=2)
        assert fill_in_sentinels(source.tolist(), target.tolist(), sentinels, 2) == tokens.tolist()
        used = [t for t in source.tolist() if t in sentinels]
        assert used == sentinels[:len(used)] and len(used) == len(chosen_runs(mask)[0])


def test_t5_task_adds_sentinels_builds_pairs_and_refuses_what_contradicts_it(span_data, tmp_path):
    task = denoising_task(span_data, "--mask-policy", "span", "--target-format", "t5", "--t5-sentinels", "20")
    sentinels = [task.dictionary.index(f"<extra_id_{k}>") for k in range(20)]
    assert sentinels == list(range(task.mask_idx + 1, task.mask_idx + 21))  # after <mask>, in order
    assert len(task.dictionary) == task.mask_idx + 21
    dataset = task.dataset("valid").dataset
    for i in range(len(dataset)):
        tokens, _ = dataset.framed(i)
        item = dataset[i]
        assert fill_in_sentinels(item["source"].tolist(), item["target"].tolist(), sentinels, 2) == tokens.tolist()
        assert task.mask_idx not in item["source"].tolist()
    other = denoising_task(span_data, "--mask-policy", "span")
    assert len(other.dictionary) == other.mask_idx + 1  # the other formats add no symbol
    with pytest.raises(ValueError, match="--collapse-spans off contradicts it"):
        denoising_task(span_data, "--target-format", "t5", "--collapse-spans", "off")
    with pytest.raises(ValueError, match="no 80/10/10"):
        denoising_task(span_data, "--target-format", "t5", "--random-token-prob", "0.1")
    with pytest.raises(ValueError, match="--t5-sentinels belongs to --target-format t5"):
        denoising_task(span_data, "--t5-sentinels", "20")
    with pytest.raises(ValueError, match=r"t5-sentinels must lie in \[2, inf\)"):
        denoising_task(span_data, "--target-format", "t5", "--t5-sentinels", "1")
    taken = tmp_path / "taken"
    shutil.copytree(span_data, taken)
    with open(taken / "dict.txt", "a") as f:
        f.write("<extra_id_0> 1\n")
    with pytest.raises(ValueError, match="already holds <extra_id_0>"):
        denoising_task(taken, "--target-format", "t5")


@pytest.mark.e2e
def test_t5_span_corruption_trains_a_tiny_bart(span_data, tmp_path):
    result = check(train_bart(span_data, tmp_path / "t5", "--mask-policy", "span", "--target-format", "t5",
                              "--t5-sentinels", "20", "--max-update", "6", "--log-format", "json"))
    losses = [float(r["train_loss"]) for r in json_logs(result, "train")] + \
        [float(r["valid_loss"]) for r in json_logs(result, "valid")]
    assert len(losses) >= 2 and all(math.isfinite(x) for x in losses), losses
    state = torch.load(tmp_path / "t5" / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    embeddings = state["model"]["encoder.embed_tokens.weight"]
    dictionary_size = sum(1 for _ in open(span_data / "dict.txt")) + 4 + 1 + 20  # specials, <mask>, sentinels
    assert embeddings.shape[0] == dictionary_size
