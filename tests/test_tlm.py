"""--task tlm: the alternation schedule, the loss weighting by hand, gradients on external batches,
stage 2's fresh head, exact resume, two data-parallel workers and bad input, with real fairseq."""

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fairseq_helpers import (BIN, CPU_RUN, HALF_PRECISION, REPO, TINY_ROBERTA, assert_half_precision_run,
                             assert_same_params, build_in_process, check, json_logs, model_params, run, write_corpus)
from fairseq_maskplug.data.tlm_schedule import EXTERNAL, TASK, is_task_step, schedule, steps_for_external
from test_data_parallel import SINGLE, torchrun, without_gradient
from test_finetune_e2e import write_task

pytestmark = pytest.mark.e2e

N_EXTERNAL = 200  # retrieved documents in the fixture; 25 batches of 8


@pytest.fixture(scope="module")
def data(tiny_data, tmp_path_factory):
    """The tiny classification task, its retrieved documents binarized with its dictionary (both
    with an ``importance`` track selecting w0 in the task texts and w1 in the documents), and
    documents binarized with another dictionary."""
    from fairseq.data import Dictionary, data_utils

    from fairseq_maskplug.data import write_side_info
    root = tmp_path_factory.mktemp("tlm")
    task = write_task(tiny_data, root)
    write_corpus(root / "ext.txt", N_EXTERNAL, seed=3)
    check(run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", root / "ext.txt", "--srcdict",
               task / "input0" / "dict.txt", "--destdir", root / "ext", "--workers", "1"]))
    selects = {"task/input0": "w0", "ext": "w1"}  # an importance track selecting one word in each source
    for directory, word in selects.items():
        d = Dictionary.load(str(root / directory / "dict.txt"))
        for split in ("train", "valid") if directory == "task/input0" else ("train",):
            tokens = data_utils.load_indexed_dataset(str(root / directory / split), d)
            write_side_info(str(root / directory / f"{split}.importance"),
                            ((tokens[i].numpy() == d.index(word)).astype(np.float64) for i in range(len(tokens))),
                            tokens_prefix=str(root / directory / split))
    write_corpus(root / "other.txt", 50, seed=4, vocab=25)
    check(run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", root / "other.txt",
               "--destdir", root / "other", "--workers", "1"]))
    return root


def tlm_args(data, save, *extra, ratio=3):
    external = ["--tlm-external-data", data / "ext"] if ratio else []
    return [data / "task", "--task", "tlm", "--criterion", "tlm", "--num-classes", "2", "--tokens-per-sample", "32",
            "--save-dir", save, "--no-epoch-checkpoints", "--tlm-external-ratio", str(ratio), *external,
            "--tlm-task-mlm-weight", "2", *TINY_ROBERTA, *extra]


def train_tlm(data, save, *extra, ratio=3):
    return run([BIN / "fairseq-train", "--user-dir", REPO / "fairseq_maskplug", *CPU_RUN,
                *tlm_args(data, save, *extra, ratio=ratio)])  # extra options after CPU_RUN's


def test_schedule_rule_and_epoch_composition():
    assert is_task_step(range(8), 3).tolist() == [False, False, False, True] * 2
    assert is_task_step(range(3), 0).all()
    for ratio in (1, 2, 3, 7):
        for external_steps in (1, 5, 24):
            n = steps_for_external(external_steps, ratio)
            assert int((~is_task_step(range(n), ratio)).sum()) == external_steps
            assert int((~is_task_step(range(n - 1), ratio)).sum()) == external_steps - 1  # the fewest steps
    task = lambda cycle: [[("t", cycle, i)] for i in range(3)]  # noqa: E731
    external = lambda cycle: [[("e", cycle, i)] for i in range(10)]  # noqa: E731
    for workers in (1, 2, 3):
        batches, kinds = schedule(task, external, 2, workers)
        assert len(batches) == len(kinds) * workers
        for step, kind in enumerate(kinds):  # one kind per step, on every worker
            assert {b[0][0] for b in batches[step * workers:(step + 1) * workers]} == {"t" if kind == TASK else "e"}
        ext = [b[0] for b in batches if b[0][0] == "e"]
        assert len(ext) == -(-10 // workers) * workers  # a last step is filled from the next order
        assert sorted(b for b in ext if b[1] == 0) == [("e", 0, i) for i in range(10)]  # every batch, once
        tasks = [b[0] for b in batches if b[0][0] == "t"]
        assert tasks == [("t", i // 3, i % 3) for i in range(len(tasks))]  # task data cycles, fresh order each


def test_the_two_readings_of_rho1_give_the_paper_s_and_the_authors_shares_over_1000_steps():
    """Issue 90, item 3: over 1,000 steps, ``--tlm-ratio-rule paper`` takes rho1 external batches per task batch
    (3: 750 external), ``authors`` their trainer's ``(step + 1) % ratio == 0`` (3: 667 external, the steps their rule
    names one by one); the authors' ratio 1 and 0 take task batches only; the stage-1 999 differs by one."""
    from fairseq_maskplug.data.tlm_schedule import paper_ratio

    steps = np.arange(1000)
    assert int((~is_task_step(steps, paper_ratio(3, "paper"))).sum()) == 750
    authors = is_task_step(steps, paper_ratio(3, "authors"))
    assert authors.tolist() == [(step + 1) % 3 == 0 for step in steps] and int((~authors).sum()) == 667
    assert paper_ratio(1, "authors") == paper_ratio(0, "authors") == 0 and paper_ratio(999, "authors") == 998
    with pytest.raises(ValueError, match="--tlm-ratio-rule must be one of paper, authors"):
        paper_ratio(3, "theirs")


def epoch_sources(task, workers, shard, epoch=1):
    iterator = task.get_batch_iterator(task.dataset("train"), max_sentences=8, seed=1, num_shards=workers,
                                       shard_id=shard, epoch=epoch)
    return [(batch["source"], batch["id"].tolist()) for batch in iterator.next_epoch_itr(shuffle=True)]


@pytest.mark.parametrize("ratio", [1, 2, 5])
def test_one_epoch_follows_the_rule_and_covers_the_external_data(data, ratio):
    task, *_ = build_in_process(tlm_args(data, data / "unused", *SINGLE, ratio=ratio))
    for workers in (1, 2):
        shards = [epoch_sources(task, workers, shard) for shard in range(workers)]
        n_steps = len(shards[0])
        expected = ["task" if t else "external" for t in is_task_step(range(n_steps), ratio)]
        for shard in shards:
            assert [source for source, _ in shard] == expected
        seen = sorted(i for shard in shards for source, ids in shard if source == "external" for i in ids)
        external_batches = -(-N_EXTERNAL // 8)
        assert int((~is_task_step(range(n_steps), ratio)).sum()) == -(-external_batches // workers)
        assert set(seen) == set(range(N_EXTERNAL))  # each document once (the last step may repeat a few)
    assert epoch_sources(task, 1, 0, epoch=2) != epoch_sources(task, 1, 0, epoch=1)  # a new order per epoch
    assert epoch_sources(task, 1, 0, epoch=2) == epoch_sources(task, 1, 0, epoch=2)


def test_the_authors_rule_reaches_the_epoch_s_batches(data):
    """``--tlm-ratio-rule authors`` with ratio 3: the epoch's batches follow the authors' rule (a task batch every
    third step), not the paper's (every fourth)."""
    task, *_ = build_in_process(tlm_args(data, data / "unused", *SINGLE, "--tlm-ratio-rule", "authors", ratio=3))
    sources = [source for source, _ in epoch_sources(task, 1, 0)]
    assert sources == ["task" if (step + 1) % 3 == 0 else "external" for step in range(len(sources))]
    assert task.external_ratio == 2


def batch_of(task, source):
    """The first training batch of ``source``, prepared as a train step prepares it (``prepare_batch``: the
    criterion takes the objectives' weighting from it)."""
    for batch in task.get_batch_iterator(task.dataset("train"), max_sentences=8, seed=1).next_epoch_itr():
        if batch["source"] == source:
            task.prepare_batch(batch, 0)
            return batch


@pytest.mark.parametrize("classify_masked", [True, False])
def test_task_batch_loss_is_the_weighted_mean_computed_by_hand(data, classify_masked):
    extra = [] if classify_masked else ["--tlm-classify", "clean"]
    task, model, criterion, _, _ = build_in_process(tlm_args(data, data / "unused", *SINGLE, "--dropout", "0",
                                                             "--attention-dropout", "0", *extra))
    model.eval()
    batch = batch_of(task, "task")
    loss, sample_size, log = criterion(model, batch)
    masked_tokens, target = batch["mlm"]["net_input"]["src_tokens"], batch["mlm"]["target"]
    with torch.no_grad():
        features = model(masked_tokens, features_only=True)[0]
        positions = target.ne(task.dictionary.pad())
        mlm = F.cross_entropy(model.encoder.output_layer(features)[positions], target[positions])
        cls_input = features if classify_masked else model(batch["net_input"]["src_tokens"], features_only=True)[0]
        cls = F.cross_entropy(model.classification_heads["sentence_classification_head"](cls_input),
                              batch["target"].view(-1))
    assert sample_size == 1 and log["task_batches"] == 1
    assert float(loss.detach()) == pytest.approx(float((2 * mlm + cls) / 3), rel=1e-5)
    external = batch_of(task, "external")
    loss, _, log = criterion(model, external)
    with torch.no_grad():
        features = model(external["mlm"]["net_input"]["src_tokens"], features_only=True)[0]
        positions = external["mlm"]["target"].ne(task.dictionary.pad())
        mlm = F.cross_entropy(model.encoder.output_layer(features)[positions], external["mlm"]["target"][positions])
    assert log["external_batches"] == 1 and "cls_loss" not in log
    assert float(loss.detach()) == pytest.approx(float(mlm), rel=1e-5)


def test_a_side_information_policy_masks_both_sources_from_their_own_tracks(data):
    """Selective masking inside TLM: task texts masked where their track says (w0), retrieved
    documents where theirs does (w1)."""
    task, *_ = build_in_process(tlm_args(data, data / "unused", *SINGLE, "--mask-policy", "selective",
                                         "--selective-cap", "1.0", "--leave-unmasked-prob", "0",
                                         "--random-token-prob", "0"))
    d = task.dictionary
    masked = {"task": [], "external": []}
    for batch in task.get_batch_iterator(task.dataset("train"), max_sentences=8, seed=1).next_epoch_itr():
        target = batch["mlm"]["target"]
        masked[batch["source"]].extend(target[target.ne(d.pad())].tolist())
        assert batch["mlm"]["net_input"]["src_tokens"][target.ne(d.pad())].eq(task.mask_idx).all()
    assert len(masked["task"]) >= 5 and set(masked["task"]) == {d.index("w0")}  # 8 task batches
    assert len(masked["external"]) > 20 and set(masked["external"]) == {d.index("w1")}


def test_external_batch_reaches_every_parameter_and_leaves_the_head_unchanged(data):
    task, model, criterion, _, _ = build_in_process(tlm_args(data, data / "unused", *SINGLE))
    loss, _, _ = criterion(model, batch_of(task, "external"))
    loss.backward()
    assert without_gradient(model) == []  # the zeroed classification output keeps the head in the graph
    head = model.classification_heads["sentence_classification_head"]
    assert all(float(p.grad.abs().max()) == 0.0 for p in head.parameters())
    assert float(model.encoder.lm_head.dense.weight.grad.abs().max()) > 0


def test_stage_two_starts_a_fresh_head_from_the_stage_one_encoder(data, tmp_path):
    check(train_tlm(data, tmp_path / "s1", "--max-update", "6", "--seed", "3"))
    stage1 = tmp_path / "s1" / "checkpoint_last.pt"
    result = check(train_tlm(data, tmp_path / "s2", "--max-update", "1", "--lr", "1e-9", "--finetune-from-model",
                             stage1, "--tlm-task-mlm-weight", "0", "--classification-head-name", "finetune_head",
                             ratio=0))
    assert "deleting classification head (sentence_classification_head)" in result.stdout + result.stderr
    before, after = model_params(stage1), model_params(tmp_path / "s2" / "checkpoint_last.pt")
    assert not any("sentence_classification_head" in k for k in after)
    for k, v in before.items():
        if "classification_heads" not in k:
            torch.testing.assert_close(after[k], v, atol=1e-6, rtol=0)  # lr 1e-9: one step moves nothing
    new = after["classification_heads.finetune_head.out_proj.weight"]
    old = before["classification_heads.sentence_classification_head.out_proj.weight"]
    assert new.shape == old.shape and not torch.allclose(new, old, atol=1e-3)
    (record,) = json_logs(result, "train")
    assert "train_mlm_task" not in record and int(record["train_external_batches"]) == 0  # classification only
    scored = check(run([BIN / "python", "-m", "fairseq_maskplug.evaluation.evaluate", "--checkpoint",
                        tmp_path / "s2" / "checkpoint_last.pt", "--data", data / "task", "--split", "valid"]))
    assert '"accuracy"' in scored.stdout


def test_a_checkpoint_saved_with_the_old_classify_flags_loads_with_their_meaning(data, tmp_path):
    """Checkpoints saved before ``--tlm-classify`` hold ``tlm_classify_masked``/``no_tlm_classify_masked``: loaded
    (evaluation) or resumed, they keep their meaning (``integration/renamed_options.py``)."""
    from fairseq import checkpoint_utils

    from fairseq_maskplug.integration.renamed_options import upgrade_task_options

    check(train_tlm(data, tmp_path / "ck", "--max-update", "1", "--tlm-classify", "clean"))
    path = tmp_path / "ck" / "checkpoint_last.pt"
    state = torch.load(path, map_location="cpu", weights_only=False)
    assert state["cfg"]["task"].pop("tlm_classify") == "clean"
    state["cfg"]["task"].update(tlm_classify_masked=False, no_tlm_classify_masked=True)  # as saved before
    torch.save(state, path)
    _, _, task = checkpoint_utils.load_model_ensemble_and_task([str(path)], arg_overrides={"data": str(data / "task")})
    assert task.cfg.tlm_classify == "clean"
    check(train_tlm(data, tmp_path / "ck", "--max-update", "2", "--tlm-classify", "clean"))  # resumes from it
    for old, new in (({"no_tlm_classify_masked": False}, "masked"), ({"tlm_classify_masked": True}, "masked")):
        assert upgrade_task_options(old) and old == {"tlm_classify": new}
    cases = [({"collapse_spans": True, "no_collapse_spans": False}, "on"),
             ({"collapse_spans": False, "no_collapse_spans": True}, "off"), ({"collapse_spans": False}, "auto")]
    for old, new in cases:
        assert upgrade_task_options(old) and old == {"collapse_spans": new}
    salient = {"mask_policy": "salient_span", "salient_fallback": "random", "mask_prob": 0.4}  # read --mask-prob
    assert upgrade_task_options(salient) and salient == {"mask_policy": "salient_span", "salient_fallback": "random",
                                                         "salient_fallback_prob": 0.4, "mask_prob": 0.15}
    assert upgrade_task_options(salient) == []  # saved with --salient-fallback-prob: as it is
    for granularity, policy in (("span", {"mask_policy": "span", "span_mask_prob": 0.2, "span_geometric_p": 0.3,
                                          "span_max_length": 5}),
                                ("subword", {"mask_policy": "random", "mask_prob": 0.2})):
        fe = {"mask_policy": "", "fe_granularity": granularity, "fe_mask_prob": 0.2, "fe_span_p": 0.3,
              "fe_span_max": 5, "fe_views": 3}  # fe_mlm's own views, before they became a policy's
        assert upgrade_task_options(fe) and fe == {**policy, "fe_views": 3}
        current = {"collapse_spans": "off", "tlm_classify": "clean"}
    assert upgrade_task_options(current) == [] and current == {"collapse_spans": "off", "tlm_classify": "clean"}


def test_logs_per_source_losses_and_resumes_exactly(data, tmp_path):
    common = ["--seed", "2", "--mask-policy", "random", "--mask-prob", "0.2", "--max-epoch", "20"]
    whole = check(train_tlm(data, tmp_path / "whole", *common, "--max-update", "40"))
    (epoch, *_) = json_logs(whole, "train")
    n_steps = steps_for_external(-(-N_EXTERNAL // 8), 3)
    assert int(epoch["train_num_updates"]) == n_steps == 33
    assert int(epoch["train_task_batches"]) == 8 and int(epoch["train_external_batches"]) == 25
    for key in ("train_mlm_task", "train_mlm_external", "train_cls_loss", "train_accuracy", "train_macro_f1",
                "train_micro_f1"):
        assert np.isfinite(float(epoch[key])), key
    check(train_tlm(data, tmp_path / "parts", *common, "--max-update", "17"))
    check(train_tlm(data, tmp_path / "parts", *common, "--max-update", "40"))
    assert_same_params(tmp_path / "whole" / "checkpoint_last.pt", tmp_path / "parts" / "checkpoint_last.pt")


@pytest.mark.full
def test_two_workers_take_the_same_batch_kind_at_every_update(data, tmp_path):
    result = check(torchrun(*tlm_args(data, tmp_path / "ck", *SINGLE, "--max-update", "8")))
    assert "'ddp_backend': 'pytorch_ddp'" in result.stdout + result.stderr
    steps = json_logs(result, "train_inner")
    assert [int(r["num_updates"]) for r in steps] == list(range(1, 9))
    for r, is_task in zip(steps, is_task_step(range(8), 3)):  # summed over both workers
        assert (int(r.get("task_batches", 0)), int(r.get("external_batches", 0))) == ((2, 0) if is_task else (0, 2))


@pytest.mark.parametrize("case", ["other dictionary", "no external data", "unused external data", "tartan",
                                  "mlm weight", "no task batch"])
def test_bad_configurations_are_refused_with_one_line(data, tmp_path, case):
    ratio, extra, expected = {
        "other dictionary": (3, ["--tlm-external-data", data / "other"], f"{data / 'other'}/dict.txt is not the task's"),
        "no external data": (0, ["--tlm-external-ratio", "3"], "--tlm-external-ratio 3 needs --tlm-external-data"),
        "unused external data": (0, ["--tlm-external-data", data / "ext"], "is not read with --tlm-external-ratio 0"),
        "tartan": (3, ["--loss-weighting", "tartan"], "--task tlm has no --loss-weighting: TLM weighs a task batch"),
        "mlm weight": (3, ["--mlm-weight", "2"], "--task tlm has no --mlm-weight: the task batch's MLM weight is "
                                                 "--tlm-task-mlm-weight"),
        # the paper's rho1 = 999 on a small retrieval: the epoch ends before the first task batch
        "no task batch": (999, [], "--tlm-external-ratio 999: an epoch holds"),
    }[case]
    result = run([BIN / "fairseq-maskplug-train", *tlm_args(data, tmp_path / "ck", "--max-update", "2", *extra,
                                                            ratio=ratio), *CPU_RUN])
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("fairseq-maskplug-train: error: ") and expected in last, result.stderr[-2000:]


def test_tlm_trains_in_half_precision_with_a_settling_loss_scale(data, tmp_path):
    """--memory-efficient-fp16 --cpu: eight updates (an overflowing one is skipped and not counted),
    finite losses of both sources, the loss scale above fairseq's minimum at the end."""
    assert_half_precision_run(train_tlm(data, tmp_path / "ck", "--max-update", "8", *HALF_PRECISION), 8)


def test_the_queries_of_a_low_resource_task_are_the_train_lines_it_kept_in_order():
    """``prepare_tlm_data corpus --task``: on ``fairseq-maskplug-subsample-task``'s copy the queries are the kept
    lines only (issue 88: the others are its test items there); a record of another split is refused."""
    from preprocess.prepare_tlm_data import task_queries

    queries = [f"text {i}" for i in range(6)]
    assert task_queries(queries, {"kept": [0, 3, 4], "train_lines": 6}) == ["text 0", "text 3", "text 4"]
    for record, message in (({"kept": [0, 1], "train_lines": 5}, "a train split of 5 lines"),
                            ({"kept": [3, 1], "train_lines": 6}, "increasing line numbers in [0, 6)"),
                            ({"kept": [1, 6], "train_lines": 6}, "increasing line numbers in [0, 6)"),
                            ({"train_lines": 6}, "not fairseq-maskplug-subsample-task's")):
        with pytest.raises(ValueError, match=re.escape(message)):
            task_queries(queries, record)
