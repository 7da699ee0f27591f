"""fairseq-maskplug-compare (issue 77): plans refused in one line before any work; (full tier) a 2-arm x 2-seed
plan run end to end, collected with a unit missing, resumed without retraining, and its print-jobs commands run
by two plain processes giving the same report as one --parallel 2 run."""

import json
import os
import re
import subprocess

import pytest

from fairseq_helpers import BIN, CPU_RUN, TINY_ROBERTA, check, run, w0_task
from fairseq_maskplug.compare.plan import PlanError, read_plan

pytestmark = pytest.mark.e2e

PLAN = """
name = "toy"
seeds = [1, 2]
baseline = "none"

[data]
corpus = "corpus"
task = "task"

[model]
checkpoint = "general/checkpoint_last.pt"

[pretrain]
updates = 4
tokens_per_sample = 32
batch_size = 8
options = ["--max-positions", "64"]

[finetune]
epochs = 2
batch_size = 8

[arms.none]
pretrain = false

[arms.random]
options = ["--mask-policy", "random"]
"""


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """A corpus, a labelled task (label: whether the line holds w0) binarized with its dictionary, a general
    model trained 6 updates on the corpus, and the plan beside them."""
    root = w0_task(tmp_path_factory.mktemp("compare"))
    check(run([BIN / "fairseq-maskplug-train", root / "corpus", "--task", "guided_mlm", "--tokens-per-sample", "32",
               "--save-dir", root / "general", "--max-update", "6", *TINY_ROBERTA, *CPU_RUN]))
    (root / "plan.toml").write_text(PLAN)
    return root


def write_plan(root, name, text):
    (root / name).write_text(text)
    return root / name


#: an arm fine-tuned with L3's auxiliary MLM, its track on the labelled task (not written by any command here)
L3_ARM = """
[arms.l3]
pretrain = false
finetune_options = ["--mask-policy", "l3", "--l3-track", "plt", "--l3-mean", "0.15"]
"""


@pytest.mark.parametrize("change, message", [
    (lambda p: p.replace('"--mask-policy", "random"', '"--mask-policy", "nosuch"'),
     "[arms.random]: unknown mask policy 'nosuch'"),
    (lambda p: p.replace('"--mask-policy", "random"', '"--mask-policy", "random", "--mask-prob", "1.5"'),
     "[arms.random]: --mask-prob must lie in"),
    (lambda p: p.replace('"--mask-policy", "random"', '"--mask-policy", "pmi"'),
     "[arms.random]:"),  # its track is not in the corpus
    (lambda p: p + '\n[arms.none]\npretrain = false\n', "not a valid plan (TOML)"),  # two arms with one name
    (lambda p: p.replace('task = "task"', 'task = "corpus"'), "has no label/ folder"),
    (lambda p: p.replace('baseline = "none"', 'baseline = "nosuch"'), "baseline 'nosuch' is not an arm"),
    (lambda p: p.replace("updates = 4", "updates = 0"), "[pretrain].updates must lie in [1, inf), got 0"),
    (lambda p: p.replace("[arms.none]", "[arms.none]\nupdates = 3"), "pretrain = false, so updates would be"),
    (lambda p: p.replace("seeds = [1, 2]", "seeds = [1, 1]"), "repeat a seed"),
    (lambda p: p + '\n[report]\nfamily = [["random", "nosuch"]]\n', "[report] family: ['random', 'nosuch'] must be"),
    (lambda p: p + '\n[report]\nfamily = [["random", "random"]]\n', "must be two different arms"),
    (lambda p: p + '\n[report]\neffect = 0\n', "[report].effect must lie in (0, inf), got 0.0"),
    (lambda p: p + '\n[report]\neffect = nan\n', "[report].effect: must be finite"),
    (lambda p: p + '\n[report]\nfamliy = []\n', "famliy"),
    # an arm that differs in its fine-tuning: its options through the fine-tuning task's parsers and checks,
    # its track loaded where no produce command would write it
    (lambda p: p.replace("[finetune]", '[finetune]\ntask = "joint_mlm_classification"\noptions = '
                         '["--tokens-per-sample", "32"]') + L3_ARM.replace('"0.15"', '"1.5"'),
     "[arms.l3] finetune: --l3-mean must lie in"),
    (lambda p: p.replace("[finetune]", '[finetune]\ntask = "joint_mlm_classification"\noptions = '
                         '["--tokens-per-sample", "32"]') + L3_ARM, "[arms.l3] finetune: side information 'plt' for split 'train' not found"),
    (lambda p: p + L3_ARM + 'produce = [["fairseq-maskplug-score-pll", "--data", "{tasks}/input0"]]\n',
     "unknown placeholder {tasks}"),
    (lambda p: p.replace('corpus = "corpus"\n', ""), "[data]: missing 'corpus' (arm random uses it"),
    # seed_produce: per-seed tracks named by the arms that read them
    (lambda p: p.replace('"random"]', '"random", "--seed", "{seed}"]'), "names {seed} in its options, but no "
                                                                       "seed_produce command"),
    (lambda p: p.replace('baseline', 'seed_produce = [["true", "{unit:nosuch}"]]\nbaseline'),
     "seed_produce names {unit:nosuch}, not an arm"),
    (lambda p: p.replace('baseline', 'seed_produce = [["true", "{unit:random}"]]\nbaseline')
     .replace('"random"]', '"random", "--seed", "{seed}"]'), "reads {unit:random}, whose options need"),
    (lambda p: p.replace('baseline', 'seed_produce = [["true", "x{model_options}"]]\nbaseline'),
     "{model_options} stands for several words"),
    (lambda p: p.replace('baseline', 'seed_produce = [["true", "{sede}"]]\nbaseline'), "unknown placeholder {sede}"),
    # a fine-tuning and a scoring of the plan's own (BART's closed-book QA probe)
    (lambda p: p.replace("[finetune]", '[finetune]\ncommand = ["fairseq-train", "{task}"]'),
     "[finetune] command: must start with fairseq-maskplug-train"),
    (lambda p: p.replace("[finetune]", '[finetune]\ncommand = ["fairseq-maskplug-train", "{task}"]'),
     "[finetune]: command is the whole fine-tuning, so batch_size, epochs would be ignored"),
    (lambda p: p.replace("epochs = 2\nbatch_size = 8", 'command = ["fairseq-maskplug-train", "{task}"]'),
     "[evaluate]: [finetune] command needs an [evaluate] command"),
    (lambda p: p + '[evaluate]\ncommand = ["true"]\nsplits = ["seen"]\ncompared = ["heldout"]\n',
     "[evaluate].compared: ['heldout'] must name some of the splits"),
    (lambda p: p.replace("updates = 4", "updates = 4\nscore_every = 5"), "score_every 5 is more than arm random's 4"),
    # a training command of seed_produce (selective masking's tagger) through its parser before the units it waits
    # for (issue 89, item 3)
    (lambda p: p.replace('baseline', 'seed_produce = [["true"], ["fairseq-maskplug-train", "{task}/input0", "--task", '
                         '"token_importance", "{model_options}", "--nosuch"]]\nbaseline'),
     "seed_produce command 2 (fairseq-maskplug-train): unrecognized arguments: --nosuch"),
    (lambda p: p.replace('baseline', 'seed_produce = [["fairseq-maskplug-score-importance", "--checkpoint", '
                         '"{unit:none}/finetune/checkpoint_best.pt", "--data", "{task}", "--delat", "0.05"]]\n'
                         'baseline'),
     "seed_produce command 1 (fairseq-maskplug-score-importance): fairseq-maskplug-score-importance: error: "
     "unrecognized arguments: --delat 0.05"),
    # blocks longer than the model's positions (the page's example after QUICK=1 failed 210 s in), by plan key
    (lambda p: p.replace("tokens_per_sample = 32", "tokens_per_sample = 128"),
     "[pretrain] tokens_per_sample: 128 tokens per block, but the model"),
    (lambda p: p.replace('"--mask-policy", "random"', '"--mask-policy", "random", "--tokens-per-sample", "96"'),
     "[arms.random] options --tokens-per-sample: 96 tokens per block, but the model"),
])
def test_a_bad_plan_is_refused_in_one_line_before_any_work(toy, change, message, capsys):
    from fairseq_maskplug.compare.cli import main

    plan = write_plan(toy, "bad.toml", change(PLAN).replace('name = "toy"', 'name = "bad"'))
    assert main([str(plan), "--print-jobs"]) == 2  # in this process: the command's own main, its checks
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and not captured.out, captured.err[-3000:]
    assert message in errors[0] and str(plan) in errors[0], errors[0]
    assert not (toy / "bad").exists()  # nothing written


def test_a_task_binarized_with_a_reordered_dictionary_is_refused(toy, capsys):
    """The same words in another order give other ids: the corpus and the task would disagree on every token."""
    import shutil

    from fairseq_maskplug.compare.cli import main

    shutil.copytree(toy / "task", toy / "task_reordered", dirs_exist_ok=True)
    lines = (toy / "task" / "input0" / "dict.txt").read_text().splitlines()
    lines[0], lines[1] = lines[1], lines[0]
    (toy / "task_reordered" / "input0" / "dict.txt").write_text("\n".join(lines) + "\n")
    plan = write_plan(toy, "reordered.toml", PLAN.replace('task = "task"', 'task = "task_reordered"')
                      .replace('name = "toy"', 'name = "reordered"'))
    assert main([str(plan), "--print-jobs"]) == 2
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "dict.txt differ" in errors[0], captured.err[-3000:]
    assert not (toy / "reordered").exists()


def test_a_produce_command_sizes_itself_to_the_task_as_the_fine_tuning_does(toy):
    """``{finetune_schedule}`` is the fine-tuning's own batch and schedule, counted on the task's train split (200
    sentences, batches of 8, 2 epochs: 52 updates, 6 of warm-up), and ``{tokens_per_sample}`` [pretrain]'s."""
    from fairseq_maskplug.compare.commands import filled, finetune_command

    plan = read_plan(write_plan(toy, "sized.toml", PLAN.replace(
        "baseline", 'seed_produce = [["true", "{finetune_schedule}", "--tokens-per-sample", "{tokens_per_sample}"]]\n'
        "baseline")))
    words = filled(plan, plan.seed_produce[0], seed=1)
    assert words == ["true", "--batch-size", "8", "--lr-scheduler", "polynomial_decay", "--lr", "0.0002",
                     "--warmup-updates", "6", "--max-epoch", "2", "--total-num-update", "52", "--tokens-per-sample",
                     "32"]
    finetune = finetune_command(plan, plan.arm("none"), 1, [], [])
    assert " ".join(words[1:-2]) in " ".join(finetune)
    with pytest.raises(PlanError, match="{finetune_schedule} stands for several words"):
        read_plan(write_plan(toy, "bad.toml", PLAN.replace("baseline", 'produce = [["true", "x{finetune_schedule}"]]\n'
                                                                       "baseline")))


def test_a_plan_without_a_block_length_takes_the_model_s_positions_at_most_128(toy):
    """``[pretrain] tokens_per_sample`` 0 (the default): the model's positions, at most 128, in the arms' commands
    and ``{tokens_per_sample}`` alike, so the page's plan runs on QUICK=1's 64-position model as on a 512-position
    release (issue 89); a length the plan gives is kept."""
    from fairseq_maskplug.compare.commands import block_length, filled, model_options, pretrain_command

    text = PLAN.replace("tokens_per_sample = 32\n", "").replace(
        "baseline", 'seed_produce = [["true", "--tokens-per-sample", "{tokens_per_sample}"]]\nbaseline')
    plan = read_plan(write_plan(toy, "unsized.toml", text))
    assert plan.pretrain.tokens_per_sample == 0
    words = model_options(plan.model)  # the toy model's own positions
    expected = min(128, int(words[words.index("--max-positions") + 1]))
    assert block_length(plan) == expected and filled(plan, plan.seed_produce[0], seed=1)[-1] == str(expected)
    for model, length in ((["--max-positions", "64"], 64), (["--max-positions", "512"], 128),
                          (["--max-source-positions", "100"], 100), ([], expected)):
        assert block_length(plan, model) == length
        words = pretrain_command(plan, plan.arm("random"), 1, model, ["--cpu"])
        assert words[words.index("--tokens-per-sample") + 1] == str(length)
    assert block_length(read_plan(toy / "plan.toml"), ["--max-positions", "512"]) == 32  # the plan's own


def test_the_plan_reads_paths_beside_it_and_lists_its_units_seed_by_seed(toy):
    plan = read_plan(toy / "plan.toml")
    assert plan.corpus == toy / "corpus" and plan.out == toy / "toy"
    assert [a.name for a in plan.arms] == ["none", "random"] and plan.arms[0].task is None
    assert plan.arms[1].task == "guided_mlm" and plan.arms[1].updates == 4
    assert plan.units() == [("none", 1), ("random", 1), ("none", 2), ("random", 2)]
    with pytest.raises(PlanError, match="unknown key 'sedes'"):
        read_plan(write_plan(toy, "typo.toml", PLAN.replace("seeds =", "sedes =")))


def test_set_changes_a_key_of_the_plan_as_the_file_would_and_is_refused_where_the_file_would_be(toy, tmp_path,
                                                                                               monkeypatch):
    """``--set KEY=VALUE``: a TOML value or text, a relative path from the current folder (so a printed unit's
    command means the same anywhere), an arm's data ``{task}``; a bad key or value refused as in the file."""
    from fairseq_maskplug.compare.plan import parse_setting

    monkeypatch.chdir(tmp_path)
    given = ["finetune.epochs=3", "arms.random.options=['--mask-policy', 'span']", "out=elsewhere",
             "data.task=" + str(toy / "task"), "arms.random.data={task}", "arms.random.updates=2"]
    settings = [parse_setting(text, tmp_path) for text in given]
    assert settings[2] == ("out", str(tmp_path / "elsewhere"), "out=" + str(tmp_path / "elsewhere"))
    plan = read_plan(toy / "plan.toml", None, [(key, value) for key, value, _ in settings])
    assert plan.finetune.epochs == 3 and plan.out == tmp_path / "elsewhere"
    assert plan.arm("random").options == ("--mask-policy", "span") and plan.arm("random").updates == 2
    assert plan.arm("random").data == toy / "task" == plan.labelled
    assert plan.corpus == toy / "corpus"  # the file's own paths still from the file's folder
    again = [parse_setting(word, toy) for _, _, word in settings]  # a unit's command line, from another folder
    assert [(k, v) for k, v, _ in again] == [(k, v) for k, v, _ in settings]
    for text, message in (("finetune.epochs=0", "[finetune].epochs must lie in [1, inf), got 0"),
                          ("finetune.epoch=3", "unknown key 'epoch'"),
                          ("pretrain.updates=many", "must be an integer, got 'many'"),
                          ("baseline.x=1", "--set baseline.x: baseline is not a table"),
                          ("epochs", "must be KEY=VALUE")):
        with pytest.raises(PlanError, match=re.escape(message)):
            read_plan(toy / "plan.toml", None, [parse_setting(text, tmp_path)[:2]])


def test_print_jobs_carries_the_settings_to_each_unit_s_command(toy, tmp_path, monkeypatch, capsys):
    from fairseq_maskplug.compare.cli import main

    monkeypatch.chdir(tmp_path)
    assert main([str(toy / "plan.toml"), "--no-estimate", "--print-jobs", "--seeds", "1", "--set", "out=moved",
                 "--set", "finetune.epochs=1"]) == 0
    jobs = capsys.readouterr().out.splitlines()
    assert len(jobs) == 2 and all(job.endswith(f"--seeds 1 --set out={tmp_path / 'moved'} --set finetune.epochs=1")
                                  for job in jobs), jobs
    assert not (toy / "toy").exists()


THREE_ARMS = PLAN + """
[arms.span]
options = ["--mask-policy", "span"]

[report]
family = [["random", "none"], ["span", "none"], ["span", "random"]]
"""


def test_arms_keeps_only_the_named_arms_and_the_family_s_pairs_of_them(toy, tmp_path, monkeypatch, capsys):
    """``--arms``: a plan's subset (TLM's arms at the low-resource shape, issue 88), each unit the same as in the
    whole plan, so a later run of more arms resumes; a name, a baseline or a family it would lose is refused."""
    from fairseq_maskplug.compare.cli import main

    path = write_plan(toy, "three.toml", THREE_ARMS)
    whole = read_plan(path)
    some = read_plan(path, None, (), ["none", "span"])
    assert [a.name for a in some.arms] == ["none", "span"] and some.family() == [("span", "none")]
    assert some.arm("span") == whole.arm("span") and some.units() == [("none", 1), ("span", 1), ("none", 2),
                                                                        ("span", 2)]
    for arms, message in ((["none", "spam"], "--arms spam: no such arm (arms: none, random, span)"),
                          (["random", "span"], "the baseline 'none' is not among them"),
                          (["none"], "a comparison needs at least two arms, got 1")):
        with pytest.raises(PlanError, match=re.escape(message)):
            read_plan(path, None, (), arms)
    only_pairs_of_others = THREE_ARMS.replace('["random", "none"], ["span", "none"], ', "")
    with pytest.raises(PlanError, match="no pair of \\[report\\] family lies within them"):
        read_plan(write_plan(toy, "other_pairs.toml", only_pairs_of_others), None, (), ["none", "span"])
    monkeypatch.chdir(tmp_path)
    assert main([str(path), "--no-estimate", "--print-jobs", "--seeds", "1", "--arms", "none", "span", "--set", "out=moved"]) == 0
    jobs = capsys.readouterr().out.splitlines()
    assert [job.split(" --unit ")[1].split()[0] for job in jobs] == ["none:1", "span:1"]
    assert all(job.endswith(f"--seeds 1 --arms none span --set out={tmp_path / 'moved'}") for job in jobs), jobs


def report_without_dates(path):
    data = json.loads(path.read_text())
    data["meta"].pop("date")
    data["meta"].pop("command")
    data["meta"].pop("plan")
    for score in data["scores"]:
        score.pop("experiment")  # the plan's name
    return data


@pytest.mark.full
def test_a_plan_runs_resumes_collects_and_scales_out(toy, tmp_path):
    plan = toy / "plan.toml"
    result = check(run([BIN / "fairseq-maskplug-compare", plan, "--no-estimate", "--parallel", "2"], new_process=True))
    assert "4 unit(s) to run, 2 at a time" in result.stdout
    out = toy / "toy"
    data = json.loads((out / "report-vs-none.json").read_text())
    assert {(s["row"], s["seed"], s["split"]) for s in data["scores"]} == {
        (arm, seed, split) for arm in ("none", "random") for seed in (1, 2) for split in ("valid", "test")}
    assert all(len(s["correct"]) == 40 for s in data["scores"] if s["split"] == "test") and not data["missing"]
    report = (out / "report-vs-none.md").read_text()
    assert "| random − none | 2 × 40 |" in report
    # the pre-training drew from each unit's seed: the two seeds' checkpoints differ
    assert (out / "units" / "random__seed1" / "pretrain" / "checkpoint_last.pt").read_bytes() != \
        (out / "units" / "random__seed2" / "pretrain" / "checkpoint_last.pt").read_bytes()
    # issue 90: each unit's compute, read from its logs: 2 fine-tuning epochs over the task's 200 train sentences
    # (each with its </s> and the <s> --init-token adds), at most 4 updates of 8 blocks of 32 tokens of pre-training
    from fairseq.data import Dictionary, data_utils

    dataset = data_utils.load_indexed_dataset(str(toy / "task" / "input0" / "train"),
                                              Dictionary.load(str(toy / "task" / "input0" / "dict.txt")))
    fine_tuned = 2 * int((dataset.sizes + 1).sum())  # (read while the dataset, and so its memory map, is open)
    del dataset
    for unit in data["compute"]:
        assert abs(unit["finetune_tokens"] - fine_tuned) <= 0.01 * fine_tuned, (unit, fine_tuned)
        assert (unit["pretrain_tokens"] is None) == (unit["row"] == "none")
        assert unit["row"] == "none" or 4 * 8 * 16 < unit["pretrain_tokens"] <= 4 * 8 * 32
    assert len(data["compute"]) == 4 and data["meta"]["parameters"] > 0 and "## compute of each arm" in report

    # a unit's results lost: --collect names it; a rerun retrains only what that unit lacks
    for split in ("valid", "test"):
        (out / "units" / "random__seed2" / f"result.{split}.json").unlink()
    (out / "units" / "random__seed2" / ".done" / "evaluate").unlink()
    collected = run([BIN / "fairseq-maskplug-compare", plan, "--collect"], new_process=True)
    assert collected.returncode == 0 and "missing units (1): random:2" in collected.stdout
    assert json.loads((out / "report-vs-none.json").read_text())["missing"] == ["random:2"]
    again = check(run([BIN / "fairseq-maskplug-compare", plan, "--no-estimate"], new_process=True))
    assert "1 unit(s) to run" in again.stdout
    unit_log = (out / "logs" / "random__seed2.log").read_text()
    assert "pretrain done before" in unit_log and "finetune done before" in unit_log
    first = report_without_dates(out / "report-vs-none.json")["scores"]
    assert first == [{k: v for k, v in s.items() if k != "experiment"} for s in data["scores"]]

    # the print-jobs commands, run by a plain shell loop in two processes, give the same report
    copy = tmp_path / "jobs.toml"
    copy.write_text(PLAN.replace('name = "toy"', f'name = "jobs"\nout = "{tmp_path / "jobs"}"')
                    .replace('"corpus"', f'"{toy / "corpus"}"').replace('"task"', f'"{toy / "task"}"')
                    .replace('"general/', f'"{toy / "general"}/'))
    jobs = check(run([BIN / "fairseq-maskplug-compare", copy, "--no-estimate", "--print-jobs"], new_process=True)).stdout.splitlines()
    assert len(jobs) == 4 and all("--unit" in job for job in jobs)
    env_path = f"PATH={BIN}:$PATH"
    loops = [subprocess.Popen(["bash", "-c", f"export {env_path}; " + "; ".join(jobs[i::2])], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in (0, 1)]
    for loop in loops:
        output, _ = loop.communicate(timeout=900)
        assert loop.returncode == 0, output[-3000:]
    check(run([BIN / "fairseq-maskplug-compare", copy, "--collect"], new_process=True))
    assert report_without_dates(tmp_path / "jobs" / "report-vs-none.json")["scores"] == first
    done = check(run([BIN / "fairseq-maskplug-compare", copy, "--print-jobs"], new_process=True))
    assert done.stdout == "" and "every unit of" in done.stderr and "--collect" in done.stderr  # (it was silent)


@pytest.mark.full  # four units, cut then resumed: about a minute
def test_a_budget_cuts_the_running_units_records_them_and_the_same_command_resumes(toy, capsys):
    """Issue 91, item 1: ``--budget 6`` stops the two units running at 6 s (their whole process group; a unit's
    process alone takes longer to start fairseq; 3 s were spent by the checks on a machine under load) and starts no
    other: all four are recorded as cut, the report names them missing, the command exits 0 and says how to resume;
    the same command without a budget then runs them all and removes the record. A SIGTERM to a run stops its
    units too (exit status 143, no unit process left)."""
    from fairseq_maskplug.compare.cli import main

    plan = write_plan(toy, "budget.toml", PLAN.replace('name = "toy"', 'name = "budget"'))
    assert main([str(plan), "--no-estimate", "--budget", "6", "--parallel", "2"]) == 0
    said = capsys.readouterr().out
    cut = json.loads((toy / "budget" / "cut.json").read_text())
    assert cut["budget_s"] == 6 and cut["units"] == ["none:1", "none:2", "random:1", "random:2"], cut
    assert "run the same command again to resume" in said and said.count("stopped at the budget") == 2
    assert json.loads((toy / "budget" / "report-vs-none.json").read_text())["missing"]
    assert not list((toy / "budget" / "units").glob("*/result.test.json"))
    # a SIGTERM to the command stops the units it started (they run in sessions of their own) before it ends
    import signal
    import time

    stopped = write_plan(toy, "stopped.toml", PLAN.replace('name = "toy"', 'name = "stopped"'))
    command = subprocess.Popen([BIN / "fairseq-maskplug-compare", stopped, "--no-estimate", "--parallel", "2"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    units = lambda: subprocess.run(["pgrep", "-f", f"{stopped} --unit"], capture_output=True, text=True).stdout.split()  # noqa: E731
    waited = time.monotonic()
    while not units() and time.monotonic() - waited < 120:
        time.sleep(0.5)
    assert units(), "no unit started"
    command.send_signal(signal.SIGTERM)
    assert command.wait(timeout=120) == 143 and not units()
    assert main([str(plan), "--no-estimate", "--parallel", "2"]) == 0
    assert not (toy / "budget" / "cut.json").exists()
    assert not json.loads((toy / "budget" / "report-vs-none.json").read_text()).get("missing")
    with pytest.raises(SystemExit):
        main([str(plan), "--budget", "3", "--collect"])


def test_a_unit_run_twice_at_once_is_refused(toy):
    from fairseq_maskplug.common.locks import lock_output
    from fairseq_maskplug.compare.cli import claim_out
    from fairseq_maskplug.compare.commands import unit_dir

    plan = read_plan(write_plan(toy, "locked.toml", PLAN.replace('name = "toy"', 'name = "locked"')))
    claim_out(plan)
    unit = unit_dir(plan, "none", 1)
    unit.mkdir(parents=True, exist_ok=True)
    lock = lock_output(str(unit), "another fairseq-maskplug-compare", directory=True)
    try:
        result = run([BIN / "fairseq-maskplug-compare", plan.path, "--unit", "none:1"], new_process=True)
    finally:
        lock.release()
    assert result.returncode == 2 and "another fairseq-maskplug-compare" in result.stderr, result.stderr[-2000:]
    assert not (unit / "finetune").exists()


def test_the_documented_plan_reads_as_the_page_says(tmp_path):
    import re

    from fairseq_helpers import REPO

    page = (REPO / "docs" / "compare.md").read_text(encoding="utf-8")
    example = re.search(r"```toml\n(.*?)```", page, re.S).group(1)
    plan = read_plan(write_plan(tmp_path, "plan.toml", example))
    assert plan.baseline == "random" and plan.seeds == (1, 2, 3, 4, 5) and plan.out == tmp_path / "mr-policies"
    assert [a.name for a in plan.arms] == ["none", "random", "pmi", "whole-word"] and plan.arms[0].task is None
    assert plan.arms[2].produce == (("fairseq-maskplug-pmi-units", "--data", "{corpus}", "--splits", "train,valid"),)
    assert (plan.pretrain.updates, plan.pretrain.lr, plan.finetune.epochs) == (400, 1e-3, 3)


def test_an_arm_s_produce_commands_write_its_track_once_before_its_units(toy, tmp_path, capsys):
    import shutil

    corpus = shutil.copytree(toy / "corpus", tmp_path / "corpus")  # the other tests' corpus keeps no pmi track
    plan = write_plan(toy, "produce.toml", PLAN.replace('name = "toy"', 'name = "produce"')
                      .replace('corpus = "corpus"', f'corpus = "{corpus}"') + """
[arms.pmi]
options = ["--mask-policy", "pmi"]
produce = [["fairseq-maskplug-pmi-units", "--data", "{corpus}", "--splits", "train,valid", "--min-count", "2"]]
""")
    from fairseq_maskplug.compare.cli import main

    # the first real problem first (issue 106): a task or corpus that is not there is named before "produce first"
    assert main([str(plan), "--print-jobs", "--set", f"data.task={tmp_path / 'gone'}"]) == 2
    error = capsys.readouterr().err.strip()
    assert f"task {tmp_path / 'gone'}: no such folder" in error and "--produce" not in error
    assert main([str(plan), "--print-jobs", "--set", f"data.corpus={tmp_path / 'gone'}"]) == 2
    error = capsys.readouterr().err.strip()
    assert f"corpus {tmp_path / 'gone'} has no dict.txt" in error and "--produce" not in error
    assert main([str(plan), "--print-jobs"]) == 2
    error = capsys.readouterr().err.strip()
    assert "--produce` first, once" in error and "arm(s) pmi" in error and len(error.splitlines()) == 1
    given = listing(corpus)
    assert main([str(plan), "--produce"]) == 0
    # the track lands in the plan's view of the corpus (issue 89), the user's corpus is not written
    view = toy / "produce" / "views" / "corpus"
    assert "produce commands have run" in capsys.readouterr().out and list(view.glob("train.pmi*"))
    assert listing(corpus) == given and (view / "train.bin").resolve() == (corpus / "train.bin").resolve()
    assert main([str(plan), "--no-estimate", "--print-jobs"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 6  # 3 arms x 2 seeds, the pmi track loaded by the check
    log = (toy / "produce" / "producers" / "logs" / "pmi.1.log").read_text()
    assert log.strip() and f"--data {view} " in log.splitlines()[0]
    # a run refreshes the views: a file added to the user's folder is linked, a link whose file is gone removed,
    # the track the producer wrote kept
    from fairseq_maskplug.compare.views import build_views

    (corpus / "notes.txt").write_text("mine\n")
    (view / "gone.txt").symlink_to(corpus / "no-such-file")
    build_views(read_plan(plan))
    assert (view / "notes.txt").read_text() == "mine\n" and not (view / "gone.txt").is_symlink()
    assert not (view / "train.pmi_units.bin").is_symlink() and listing(corpus) == sorted([*given, "notes.txt"])
    # the same output folder on another corpus: its views hold this one's files and tracks, refused before any work
    other = shutil.copytree(toy / "corpus", tmp_path / "other")
    assert main([str(plan), "--set", f"data.corpus={other}", "--print-jobs"]) == 2
    assert f"was run on another corpus, {corpus}" in capsys.readouterr().err


def listing(folder):
    """Every file and folder below ``folder``."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def test_the_fe_plan_file_is_the_stored_fe_run_s_shape():
    """``recipes/compare_plans/fe.toml`` reads, and its settings are those the stored FE comparison ran with (its
    knobs FE_UPDATES and FE_FINETUNE_EPOCHS; recipes/fe_mlm.sh's batch of B x K = 8 x 4 sequences against MLM's 32,
    the recipes' quickstart learning rates): the plan that reproduced that run's outcomes (the notes of issue 77)."""
    from fairseq_helpers import REPO

    plan = read_plan(REPO / "recipes" / "compare_plans" / "fe.toml")
    stored = json.loads((REPO / "docs" / "results" / "compare_fe_cpu_2026-11-28.json").read_text())
    knobs = stored["meta"]["environment_knobs"]
    assert plan.pretrain.updates == int(knobs["FE_UPDATES"]) and plan.finetune.epochs == int(knobs["FE_FINETUNE_EPOCHS"])
    assert plan.pretrain.score_every == int(knobs["FE_VALID_EVERY"])  # the curves' checkpoints
    assert [arm.name for arm in plan.arms] == ["mlm", "fe_subword", "mlm_span", "fe_span"] and plan.baseline == "mlm"
    assert {row for row in (s["row"] for s in stored["scores"])} == {"mlm", "fe_subword"}  # the span arms came later
    assert plan.report.family == [["fe_subword", "mlm"], ["fe_span", "mlm_span"]]
    for name, task in (("mlm_span", "guided_mlm"), ("fe_span", "fe_mlm")):  # the recipe's span rows
        assert plan.arm(name).task == task and plan.arm(name).options[-2:] == ("--mask-policy", "span")
    assert list(plan.seeds) == [int(seed) for seed in stored["meta"]["seeds"]]
    for fe in (plan.arm("fe_subword"), plan.arm("fe_span")):
        assert fe.task == "fe_mlm" and fe.options[:4] == ("--batch-size", "8", "--fe-views", "4")
    assert (plan.pretrain.lr, plan.pretrain.batch_size, plan.finetune.lr, plan.finetune.batch_size) == (1e-3, 32, 2e-4, 32)


#: each plan's stored report, the stored run of its recipe, and the (arm, split, seed) rows it ran
PLAN_REPORTS = [
    ("compare_fe_plan_cpu_2026-11-29.json", "compare_fe_cpu_2026-11-28.json", 20),
    ("compare_l3_plan_cpu_2026-11-29.json", "compare_l3_cpu_2026-11-29.json", 12),  # seeds 1, 2
    ("compare_selective_plan_cpu_2026-11-29.json", "compare_selective_cpu_2026-11-28.json", 30),
    ("compare_bart_plan_cpu_2026-11-29.json", "compare_bart_cpu_2026-11-28.json", 30),
    ("compare_tlm_plan_cpu_2026-11-29.json", "compare_tlm_cpu_2026-11-29.json", 50),
]


@pytest.mark.parametrize("plan_report, recipe_result, rows", PLAN_REPORTS)
def test_a_plan_s_stored_report_has_its_recipe_s_stored_outcomes(plan_report, recipe_result, rows):
    """What docs/compare.md says of the papers' plans: each stored report (``fairseq-maskplug-compare
    recipes/compare_plans/METHOD.toml``) holds, for every arm, split and seed it ran, the same outcome on every
    sentence (or question) as the stored comparison of the recipes' replicate harness (what recipes/compare.sh ran
    until 2026-11-29)."""
    from fairseq_helpers import REPO

    results = REPO / "docs" / "results"
    plan = json.loads((results / plan_report).read_text())
    recipe = json.loads((results / recipe_result).read_text())
    outcomes = {(s["row"], s["split"], s["seed"]): s["correct"] for s in recipe["scores"]}
    assert not plan["missing"] and len(plan["scores"]) == rows
    for score in plan["scores"]:
        expected = outcomes[score["row"], score["split"], score["seed"]]
        assert len(score["correct"]) == len(expected) >= 300 and score["correct"] == expected


def test_the_fe_plan_s_curves_are_the_stored_run_s_checkpoints_scored_under_one_set_of_masks():
    """What docs/compare.md and the FE page say: the FE plan (score_every 50) trained the stored run's checkpoints
    again, bit for bit: each of its 10 curves equals the stored run's checkpoints rescored after the scorer's fix."""
    from fairseq_helpers import REPO

    results = REPO / "docs" / "results"
    plan = json.loads((results / "compare_fe_plan_cpu_2026-11-29.json").read_text())
    rescored = json.loads((results / "compare_fe_cpu_2026-11-28_rescored_2026-11-29.json").read_text())
    expected = {(c["row"], c["seed"]): c["points"] for c in rescored["curves"]}
    assert len(plan["curves"]) == len(expected) == 10
    for curve in plan["curves"]:
        assert [u for u, _ in curve["points"]] == [50, 100, 150, 200]
        assert curve["points"] == expected[curve["row"], curve["seed"]]
    assert all(c["masked"] == [1745] for c in rescored["curves"])  # one set of masks for every checkpoint


def recipe_default(script, knob):
    """The default of ``${KNOB:-default}`` in a recipe."""
    import re

    from fairseq_helpers import REPO

    text = (REPO / "recipes" / script).read_text(encoding="utf-8")
    return re.search(r"\$\{" + knob + r":-([^}]*)\}", text).group(1)


def test_the_l3_plan_file_is_the_stored_l3_run_s_shape():
    """``recipes/compare_plans/l3.toml`` reads, and its settings are recipes/l3_masking.sh's defaults, which the
    stored L3 comparison ran with (no knob set): no arm pre-trains; each fine-tunes the general model with
    joint_mlm_classification, 10 epochs, patience 3, the auxiliary MLM weighted the META-TARTAN way; L3's PLT
    track written by its produce commands from the plan's model on every split of the task."""
    from fairseq_helpers import REPO

    plan = read_plan(REPO / "recipes" / "compare_plans" / "l3.toml")
    stored = json.loads((REPO / "docs" / "results" / "compare_l3_cpu_2026-11-29.json").read_text())
    assert stored["meta"]["environment_knobs"] == {} and stored["meta"]["shape_knobs"] == {}
    assert {a.name for a in plan.arms} == {s["row"] for s in stored["scores"]} and plan.corpus is None
    assert list(plan.seeds) == [int(seed) for seed in stored["meta"]["seeds"]]
    assert all(arm.task is None for arm in plan.arms)
    mean, meta_lr = recipe_default("l3_masking.sh", "L3_MEAN"), recipe_default("l3_masking.sh", "L3_META_LR")
    ft = plan.finetune
    assert ft.task == "joint_mlm_classification" and ft.epochs == int(recipe_default("l3_masking.sh", "L3_EPOCHS"))
    assert ft.options == ["--tokens-per-sample", recipe_default("lib.sh", "MASKPLUG_TOKENS"),
                          "--patience", recipe_default("l3_masking.sh", "L3_PATIENCE")]
    assert (ft.lr, ft.batch_size) == (float(recipe_default("l3_masking.sh", "MASKPLUG_FINETUNE_LR")),
                                      int(recipe_default("lib.sh", "MASKPLUG_BATCH")))
    tartan = ("--loss-weighting", "tartan", "--tartan-meta-lr", meta_lr)
    assert plan.arm("STL").finetune_options == ("--mlm-weight", "0")
    assert plan.arm("RTM-tartan").finetune_options == (*tartan, "--mask-policy", "random", "--mask-prob", mean)
    assert plan.arm("L3-tartan").finetune_options == (*tartan, "--mask-policy", "l3", "--l3-track", "plt",
                                                       "--l3-mean", mean)
    produced = plan.arm("L3-tartan").produce
    assert [c[c.index("--split") + 1] for c in produced] == ["train", "valid", "test"]
    assert all(c[:3] == ("fairseq-maskplug-score-pll", "--checkpoint", "{model}") and "{task}/input0" in c
               for c in produced)


def test_an_arm_that_differs_in_fine_tuning_produces_its_track_on_the_task_and_trains(toy, tmp_path, capsys):
    """L3's shape of plan: no pre-training, the fine-tuning task joint_mlm_classification, the L3 arm's track
    written from the plan's model ({model}) into the labelled task ({task}) by its produce commands, once; then
    its unit fine-tunes with L3 masks and is scored."""
    import shutil

    from fairseq_maskplug.compare.cli import main

    task = shutil.copytree(toy / "task", tmp_path / "task")  # the other tests' task keeps no plt track
    text = (PLAN.replace('name = "toy"', 'name = "finetuning"').replace('task = "task"', f'task = "{task}"')
            .replace('corpus = "corpus"\n', "").replace("[arms.random]\n", "")
            .replace('options = ["--mask-policy", "random"]\n', "")
            .replace("[finetune]", '[finetune]\ntask = "joint_mlm_classification"\n'
                                   'options = ["--tokens-per-sample", "64"]')  # the task sets the positions to it
            + L3_ARM + 'produce = [["fairseq-maskplug-score-pll", "--checkpoint", "{model}", "--data", "{task}/input0", '
                       '"--splits", "train,valid,test", "--name", "plt", "--word-starts", "token"]]\n')
    plan = write_plan(toy, "finetuning.toml", text)
    assert read_plan(plan).corpus is None
    given = listing(task)
    assert main([str(plan), "--produce"]) == 0
    capsys.readouterr()
    view = toy / "finetuning" / "views" / "task"
    assert all((view / "input0" / f"{split}.plt.bin").is_file() for split in ("train", "valid", "test"))
    assert listing(task) == given  # the plan's view of the task holds the track, not the user's folder
    assert main([str(plan), "--no-estimate", "--print-jobs"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4  # 2 arms x 2 seeds
    assert main([str(plan), "--unit", "l3:1"]) == 0
    assert listing(task) == given
    unit = toy / "finetuning" / "units" / "l3__seed1"
    log = (unit / "logs" / "finetune.log").read_text()
    assert "'mask_policy': 'l3'" in log and "'_name': 'joint_mlm_classification'" in log
    rates = [json.loads(line.split("| train | ", 1)[1])["train_mask_rate"] for line in log.splitlines()
             if "| train | " in line]
    assert rates and all(float(rate) > 0 for rate in rates)  # the auxiliary MLM trained on L3's masks
    result = json.loads((unit / "result.test.json").read_text())
    assert len(result["correct"]) == 40


SELECTIVE_CHAIN = """
seed_produce = [
    ["fairseq-maskplug-score-importance", "--checkpoint", "{unit:none}/finetune/checkpoint_best.pt", "--data",
     "{task}", "--splits", "train,valid", "--name", "importance_s{seed}"],
    ["fairseq-maskplug-train", "{task}/input0", "--task", "token_importance", "--criterion", "token_importance",
     "--label-track", "importance_s{seed}", "--tokens-per-sample", "64", "{model_options}", "{device}",
     "--batch-size", "8", "--optimizer", "adam", "--lr", "1e-3", "--max-epoch", "1", "--seed", "1",
     "--finetune-from-model", "{model}", "--best-checkpoint-metric", "f1", "--maximize-best-checkpoint-metric",
     "--save-dir", "{seed_dir}/tagger", "--no-epoch-checkpoints", "--no-progress-bar"],
    ["fairseq-maskplug-annotate-importance", "--checkpoint", "{seed_dir}/tagger/checkpoint_best.pt", "--data",
     "{corpus}", "--splits", "train,valid", "--name", "importance_s{seed}"],
]
"""


@pytest.mark.full
def test_seed_produce_runs_each_seed_s_chain_after_the_unit_it_reads(toy, tmp_path, capsys, monkeypatch):
    """Selective masking's shape of plan: for each seed, the no-pre-training arm's unit fine-tunes the classifier,
    which scores the task; a tagger learns the scores and writes the corpus's track under the seed's name, which
    the selective arm reads ({seed} in its options). --produce runs the chains (the classifier units included,
    so the run itself skips them; with --parallel 2, the two seeds' chains at once, issue 89 item 4); each seed's
    track comes from its own classifier."""
    import shutil

    from fairseq_maskplug.compare.cli import main

    corpus = shutil.copytree(toy / "corpus", tmp_path / "corpus")
    task = shutil.copytree(toy / "task", tmp_path / "task")
    text = (PLAN.replace('name = "toy"', 'name = "chain"').replace('corpus = "corpus"', f'corpus = "{corpus}"')
            .replace('task = "task"', f'task = "{task}"').replace('baseline', SELECTIVE_CHAIN + 'baseline')
            .replace('options = ["--mask-policy", "random"]', 'task = "selective_mlm"\noptions = '
                     '["--selective-track", "importance_s{seed}"]'))
    plan = write_plan(toy, "chain.toml", text)
    assert main([str(plan), "--print-jobs"]) == 2
    assert "--produce` first" in capsys.readouterr().err
    import time

    from fairseq_maskplug.compare import units

    spans, chain = {}, units.produce_seed

    def timed(plan_, seed, *rest):  # each seed's chain's start and end, as it ran
        began = time.monotonic()
        chain(plan_, seed, *rest)
        spans[seed] = (began, time.monotonic())

    monkeypatch.setattr(units, "produce_seed", timed)
    given = {folder: listing(folder) for folder in (corpus, task)}
    assert main([str(plan), "--produce", "--parallel", "2"]) == 0
    assert spans[1][0] < spans[2][1] and spans[2][0] < spans[1][1], spans  # the two seeds' chains side by side
    capsys.readouterr()
    out = toy / "chain"
    for seed in (1, 2):
        assert (out / "units" / f"none__seed{seed}" / "result.test.json").is_file()  # the classifier unit, whole
        assert (out / "producers" / f"seed{seed}" / "tagger" / "checkpoint_best.pt").is_file()
        assert all((out / "views" / "corpus" / f"{split}.importance_s{seed}.bin").is_file() for split in ("train", "valid"))
        assert all((out / "views" / "task" / "input0" / f"{split}.importance_s{seed}.bin").is_file()
                   for split in ("train", "valid"))
        # each seed's classifier scored the task (a stage's log begins with its command)
        first = (out / "producers" / f"seed{seed}" / "logs" / f"seed{seed}.1.log").read_text().splitlines()[0]
        assert first.startswith("$ ") and f"units/none__seed{seed}/finetune/checkpoint_best.pt" in first
    assert main([str(plan), "--no-estimate", "--print-jobs"]) == 0
    jobs = capsys.readouterr().out.splitlines()
    assert [job.rsplit(" ", 1)[1] for job in jobs] == ["random:1", "random:2"]  # the classifiers ran already
    assert main([str(plan), "--unit", "random:2"]) == 0
    log = (out / "units" / "random__seed2" / "logs" / "pretrain.log").read_text()
    assert "'selective_track': 'importance_s2'" in log
    assert {folder: listing(folder) for folder in (corpus, task)} == given  # issue 89: the user's folders unwritten


def test_the_tlm_plan_file_is_the_stored_tlm_run_s_shape():
    """``recipes/compare_plans/tlm.toml`` reads, and its settings are recipes/tlm.sh's defaults (the stored TLM
    comparison set no knob): stage 1 from scratch on MR for TLM_UPDATES updates of at most TLM_MAX_TOKENS tokens,
    rho1 TLM_RATIO for the three external sources and 0 for task-only, rho2 TLM_MLM_WEIGHT; stage 2 with a fresh
    head for TLM_FT_EPOCHS epochs, patience TLM_PATIENCE; general-ft the general model fine-tuned."""
    from fairseq_helpers import REPO

    plan = read_plan(REPO / "recipes" / "compare_plans" / "tlm.toml")
    default = lambda knob: recipe_default("tlm.sh", knob)  # noqa: E731
    assert [a.name for a in plan.arms] == ["task-only", "tlm-bm25", "tlm-dsir", "tlm-random", "general-ft",
                                           "general-corpus-ft"]
    assert plan.pretrain.task == "tlm" and plan.pretrain.updates == int(default("TLM_UPDATES"))
    assert not plan.pretrain.options  # TLM's stage-1 options are each TLM arm's (general-corpus-ft trains an MLM)
    assert plan.finetune.epochs == int(default("TLM_FT_EPOCHS")) and plan.finetune.task == "sentence_prediction"
    for arm in plan.arms[:4]:
        options = arm.options
        assert options[options.index("--max-tokens") + 1] == default("TLM_MAX_TOKENS")
        assert options[options.index("--tlm-task-mlm-weight") + 1] == default("TLM_MLM_WEIGHT")
        assert arm.from_scratch and arm.data == plan.labelled and arm.finetune_task == "tlm"
        ratio = arm.options[arm.options.index("--tlm-external-ratio") + 1]
        assert ratio == ("0" if arm.name == "task-only" else default("TLM_RATIO"))
        if arm.name != "task-only":
            assert arm.options[-1] == "{out}/data/bin_" + arm.name.split("-")[1]
        ft = arm.finetune_options
        assert ft[ft.index("--patience") + 1] == default("TLM_PATIENCE")
        assert ft[ft.index("--tlm-task-mlm-weight") + 1] == "0" and "tlm_finetune_head" in ft
    assert plan.arm("general-ft").task is None and not plan.arm("general-ft").finetune_options
    # the paper's baseline: a general model pre-trained from scratch on the corpus TLM retrieves from (the
    # produce's --whole), as long as the recipes' general model (recipes/lib.sh: 1,000 updates of 32 blocks)
    general = plan.arm("general-corpus-ft")
    assert general.task == "guided_mlm" and general.from_scratch and general.data == plan.out / "data" / "bin_corpus"
    assert general.updates == 1000 and general.options[:2] == ("--batch-size", "32") and not general.finetune_task
    assert "--whole" in next(c for c in plan.produce if c[:4] == ("python", "-m", "preprocess.prepare_tlm_data",
                                                                  "external"))
    assert ["tlm-bm25", "general-corpus-ft"] in plan.report.family
    corpus = next(c for c in plan.produce if c[:4] == ("python", "-m", "preprocess.prepare_tlm_data", "corpus"))
    assert corpus[corpus.index("--task") + 1] == "{task}"  # a low-resource copy's queries are its kept lines only
    retrieve = next(c for c in plan.produce if c[0] == "fairseq-maskplug-retrieve")
    assert retrieve[retrieve.index("--top-k") + 1] == default("TLM_TOP_K")
    assert retrieve[retrieve.index("--backend") + 1] == default("TLM_BACKEND")


@pytest.mark.full  # a unit's two stages: 30 s of the quick tier's 10 minutes (2026-12-02: 582 s)
def test_an_arm_trained_from_scratch_on_the_task_reads_data_the_plan_produced(toy, tmp_path, capsys):
    """TLM's shape of plan: the plan's own produce commands write external data into its output folder ({out})
    once, for every arm; an arm's first stage trains from scratch (the model's shape, not its weights) on the
    labelled task with that data, and its fine-tuning task is its own (tlm), not [finetune]'s."""
    from fairseq_maskplug.compare.cli import main

    external = tmp_path / "external.txt"
    external.write_text((toy / "train.txt").read_text())
    text = (PLAN.replace('name = "toy"', 'name = "scratch"').replace('corpus = "corpus"\n', "")
            .replace("baseline", 'produce = [["fairseq-preprocess", "--only-source", "--trainpref", "' + str(external)
                     + '", "--srcdict", "{task}/input0/dict.txt", "--destdir", "{out}/data/external", "--workers", '
                     '"1"]]\nbaseline')
            .replace('options = ["--mask-policy", "random"]', 'task = "tlm"\ndata = "task"\nfrom_scratch = true\n'
                     'options = ["--criterion", "tlm", "--num-classes", "2", "--tlm-external-ratio", "1", '
                     '"--tlm-external-data", "{out}/data/external", "--tokens-per-sample", "64"]\n'
                     'finetune_task = "tlm"\nfinetune_options = ["--tokens-per-sample", "64", '
                     '"--tlm-external-ratio", "0", "--tlm-task-mlm-weight", "0"]'))
    plan = write_plan(toy, "scratch.toml", text)
    assert read_plan(plan).corpus is None
    assert main([str(plan), "--print-jobs"]) == 2
    assert "arm(s) none, random" in capsys.readouterr().err  # the plan's produce: every arm waits for it
    assert main([str(plan), "--produce"]) == 0
    assert (toy / "scratch" / "data" / "external" / "train.bin").is_file()
    assert main([str(plan), "--unit", "random:1"]) == 0
    unit = toy / "scratch" / "units" / "random__seed1"
    pretrain = (unit / "logs" / "pretrain.log").read_text()
    assert "'finetune_from_model': None" in pretrain and f"{toy / 'scratch' / 'data' / 'external'}" in pretrain
    finetune = (unit / "logs" / "finetune.log").read_text()
    assert "'_name': 'tlm'" in finetune and f"{unit / 'pretrain' / 'checkpoint_last.pt'}" in finetune
    assert len(json.loads((unit / "result.test.json").read_text())["correct"]) == 40


#: the toy plan's classifier fine-tuning and scoring written out as the plan's own commands, scored and compared
#: on both splits
OWN_COMMANDS = """
[finetune]
command = ["fairseq-maskplug-train", "{task}", "--task", "sentence_prediction", "--criterion", "sentence_prediction",
           "--num-classes", "2", "--init-token", "0", "--separator-token", "2", "--shorten-method", "truncate",
           "--find-unused-parameters", "{model_options}", "{device}", "--batch-size", "8", "--optimizer", "adam",
           "--lr", "2e-4", "--max-epoch", "2", "--seed", "{seed}", "--best-checkpoint-metric", "accuracy",
           "--maximize-best-checkpoint-metric", "--save-dir", "{unit}/finetune", "--finetune-from-model", "{start}",
           "--no-epoch-checkpoints", "--no-progress-bar"]

[evaluate]
command = ["python", "-m", "fairseq_maskplug.evaluation.evaluate", "--checkpoint", "{unit}/finetune/checkpoint_best.pt",
           "--data", "{task}", "--split", "valid,test", "--output", "{unit}/result.{split}.json"]
splits = ["valid", "test"]
"""


@pytest.mark.full  # four units trained and scored: about 75 s (the quick tier's 10 minutes are full)
def test_a_plan_s_own_fine_tuning_and_scoring_commands_run_each_unit(toy, capsys):
    """BART's shape of plan: [finetune] command is the whole fine-tuning ({start}: the arm's pre-trained checkpoint
    or the model; {unit}; {seed}), checked through fairseq-maskplug-train's parser before any work; [evaluate]
    command writes one result per split, and the report reads every compared split."""
    from fairseq_maskplug.compare.cli import main

    text = (PLAN.replace('name = "toy"', 'name = "own"').replace('[finetune]\nepochs = 2\nbatch_size = 8\n', "")
            + OWN_COMMANDS)
    plan = write_plan(toy, "own.toml", text)
    bad = write_plan(toy, "own_bad.toml", text.replace('"--max-epoch", "2"', '"--max-epoch", "2", "--nosuch"')
                     .replace('name = "own"', 'name = "own_bad"'))
    assert main([str(bad), "--print-jobs"]) == 2
    assert "[finetune]" in capsys.readouterr().err and not (toy / "own_bad").exists()
    assert main([str(plan), "--unit", "random:1"]) == 0 and main([str(plan), "--unit", "random:2"]) == 0
    assert main([str(plan), "--unit", "none:1"]) == 0 and main([str(plan), "--unit", "none:2"]) == 0
    capsys.readouterr()
    unit = toy / "own" / "units" / "random__seed2"
    first = (unit / "logs" / "finetune.log").read_text().splitlines()[0]
    assert f"--finetune-from-model {unit / 'pretrain' / 'checkpoint_last.pt'}" in first and "--seed 2" in first
    assert main([str(plan), "--collect"]) == 0
    report = (toy / "own" / "report-vs-none.md").read_text()
    assert "| arm | seeds | valid accuracy | valid macro-F1 | test accuracy | test macro-F1 |" in report
    assert "## the family's comparisons on valid" in report and "## the family's comparisons on test" in report
    # one family over both compared splits, read first
    assert report.index("## what it found") < report.index("## scores")
    assert "Holm over a family of 2 comparisons: random − none (valid), random − none (test)" in report


def test_the_bart_plan_file_is_the_stored_bart_run_s_shape():
    """``recipes/compare_plans/bart.toml`` reads, and its settings are recipes/bart_policies.sh's defaults (the
    stored BART comparison set no knob): BART_INTERMEDIATE_UPDATES of guided_denoising for +Rand and +SSM (the
    recipe's POLICY options), none without; the probe for BART_PROBE_UPDATES at the fine-tuning learning rate;
    exact match on the seen and held-out questions, both compared."""
    from fairseq_helpers import REPO

    plan = read_plan(REPO / "recipes" / "compare_plans" / "bart.toml")
    stored = json.loads((REPO / "docs" / "results" / "compare_bart_cpu_2026-11-28.json").read_text())
    assert stored["meta"]["environment_knobs"] == {} and stored["meta"]["shape_knobs"] == {}
    assert {a.name for a in plan.arms} == {s["row"] for s in stored["scores"]} | {"orig"}  # +Orig: added after it
    assert set(plan.splits) == set(plan.compared) == {s["split"] for s in stored["scores"]}
    default = lambda knob: recipe_default("bart_policies.sh", knob)  # noqa: E731
    assert plan.pretrain.task == "guided_denoising" and plan.pretrain.updates == int(default("BART_INTERMEDIATE_UPDATES"))
    recipe = (REPO / "recipes" / "bart_policies.sh").read_text()
    for arm in ("rand", "ssm", "orig"):
        assert f'[{arm}]="{" ".join(plan.arm(arm).options)}"' in recipe  # the recipe's POLICY row
    assert plan.arm("none").task is None
    command = plan.finetune_command
    value = lambda option: command[command.index(option) + 1]  # noqa: E731
    assert value("--max-update") == value("--total-num-update") == default("BART_PROBE_UPDATES")
    assert value("--lr") == default("MASKPLUG_FINETUNE_LR") and value("--seed") == "{seed}"
    assert value("--warmup-updates") == str(int(default("BART_PROBE_UPDATES")) // 10 + 1)
    assert plan.evaluate_command[:2] == ("python", "recipes/probe_em.py")


def test_the_selective_plan_file_is_the_stored_selective_run_s_shape():
    """``recipes/compare_plans/selective.toml`` reads, and its settings are recipes/selective_masking.sh's defaults
    (the stored selective comparison set no knob): the seed's own classifier (the no-TaskPT unit) scores MR with
    SM_DELTA, a tagger learns for SM_TAGGER_EPOCHS with SM_CLASS_WEIGHT, the reviews are tagged, and TaskPT runs
    SM_TASKPT_UPDATES with SM_CAP and SM_MASKS. Every stage draws from the replicate's seed, as the harness sets
    MASKPLUG_SEED to it: the tagger's --seed is {seed}, and no arm fixes its own."""
    from fairseq_helpers import REPO

    plan = read_plan(REPO / "recipes" / "compare_plans" / "selective.toml")
    stored = json.loads((REPO / "docs" / "results" / "compare_selective_cpu_2026-11-28.json").read_text())
    assert stored["meta"]["environment_knobs"] == {} and stored["meta"]["shape_knobs"] == {}
    assert {a.name for a in plan.arms} == {s["row"] for s in stored["scores"]} and plan.seed_units() == ["no-TaskPT"]
    default = lambda knob: recipe_default("selective_masking.sh", knob)  # noqa: E731
    assert plan.pretrain.task == "selective_mlm" and plan.pretrain.updates == int(default("SM_TASKPT_UPDATES"))
    assert plan.finetune.epochs == int(default("SM_FINETUNE_EPOCHS"))
    scoring, tagger, annotate = plan.seed_produce[0], plan.seed_produce[2], plan.seed_produce[3]
    value = lambda command, option: command[command.index(option) + 1]  # noqa: E731
    assert value(scoring, "--delta") == default("SM_DELTA") and "{unit:no-TaskPT}" in value(scoring, "--checkpoint")
    assert value(tagger, "--seed") == "{seed}" and value(tagger, "--positive-class-weight") == default("SM_CLASS_WEIGHT")
    # the tagger's schedule is the fine-tuning's, sized from the task at run time (issue 89, item 5): on MR's 3,200
    # sentences, the recipe's 5 epochs of 101 updates; no number of the plan depends on MR's size
    assert default("SM_TAGGER_EPOCHS") == default("SM_FINETUNE_EPOCHS") and "{finetune_schedule}" in tagger
    assert value(tagger, "--tokens-per-sample") == "{tokens_per_sample}"
    assert not {"--max-epoch", "--total-num-update", "--warmup-updates", "--batch-size"} & set(tagger)
    assert value(annotate, "--name") == value(tagger, "--label-track") == "importance_s{seed}"
    for arm in ("selective", "matched-random"):
        options = plan.arm(arm).options
        assert "--seed" not in options and value(options, "--selective-track") == "importance_s{seed}"
        assert value(options, "--selective-cap") == default("SM_CAP")
        assert value(options, "--selective-masks") == default("SM_MASKS")


@pytest.mark.full  # four units trained and scored: about 75 s (the quick tier's 10 minutes are full)
def test_score_every_scores_each_arm_s_checkpoints_under_the_same_masks_and_the_report_compares_the_curves(
        toy, capsys):
    """``[pretrain] score_every``: every arm keeps a checkpoint each N updates, scores each on the corpus's valid
    split under one fixed set of random masks (the loss of a checkpoint is the scorer's, recomputed here), and the
    report carries the curves and reads each arm − the baseline at each update."""
    from fairseq_maskplug.compare.cli import main
    from fairseq_maskplug.evaluation.evaluate_mlm import FixedMaskScorer

    text = (PLAN.replace('name = "toy"', 'name = "curves"').replace("seeds = [1, 2]", "seeds = [1]")
            .replace('baseline = "none"', 'baseline = "random"').replace("updates = 4", "updates = 4\nscore_every = 2")
            .replace("[arms.none]\npretrain = false\n", '[arms.span]\noptions = ["--mask-policy", "span"]\n'))
    plan = write_plan(toy, "curves.toml", text)
    assert main([str(plan), "--no-estimate"]) == 0
    capsys.readouterr()
    unit = toy / "curves" / "units" / "span__seed1"
    records = [json.loads(line) for line in (unit / "curve.jsonl").read_text().splitlines()]
    assert [r["updates"] for r in records] == [2, 4]
    again = FixedMaskScorer(str(toy / "corpus")).score(str(unit / "pretrain" / "checkpoint_1_4.pt"))
    assert again["loss"] == pytest.approx(records[1]["loss"], rel=1e-6) and again["masked"] == records[1]["masked"] > 0
    data = json.loads((toy / "curves" / "report-vs-random.json").read_text())
    assert sorted((c["row"], [u for u, _ in c["points"]]) for c in data["curves"]) == [("random", [2, 4]),
                                                                                      ("span", [2, 4])]
    report = (toy / "curves" / "report-vs-random.md").read_text()
    assert "| updates | random | span | span − random (paired over seeds) |" in report
    random_at_4 = next(c for c in data["curves"] if c["row"] == "random")["points"][1][1]
    assert f"| 4 | {random_at_4:.3f} | {records[1]['loss']:.3f} | " in report


def test_a_report_names_this_checkout_s_commit_and_no_other_repository_s(tmp_path):
    """The report's provenance: the commit where the package runs from its own checkout; none where a copy of it
    sits inside another repository (a user's project with its environment inside)."""
    import shutil
    import sys

    from fairseq_helpers import REPO
    from fairseq_maskplug.compare.report import source_commit

    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    assert source_commit() == head.stdout.strip()
    other = tmp_path / "project"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    site = other / "env" / "site-packages"
    shutil.copytree(REPO / "fairseq_maskplug", site / "fairseq_maskplug",
                    ignore=shutil.ignore_patterns("__pycache__"))
    found = subprocess.run([sys.executable, "-c", "from fairseq_maskplug.compare.report import source_commit; "
                            "print(source_commit())"], cwd=other, env={**os.environ, "PYTHONPATH": str(site)},
                           capture_output=True, text=True)
    assert found.returncode == 0 and found.stdout.strip() == "None", found.stderr[-2000:]


@pytest.mark.full
def test_a_report_marks_an_arm_that_masked_under_a_third_of_the_baselines_rate_and_classifiers_short_of_classes(
        toy, capsys):
    """Issue 86's new user: an arm whose masks are far sparser than its baseline's (0.03 against 0.15 here, as a
    tagger that tagged almost nothing) and classifiers that predict fewer classes than the task has show in the
    report's health block, read from the units' own logs and results, and the arm is marked in the scores table;
    a plan with one seed is warned that it measures almost nothing, before any table."""
    from fairseq_maskplug.compare.cli import main

    text = (PLAN.replace('name = "toy"', 'name = "health"').replace("seeds = [1, 2]", "seeds = [1]")
            .replace('baseline = "none"', 'baseline = "random"').replace("epochs = 2", "epochs = 1")
            .replace("[arms.none]\npretrain = false\n",
                     '[arms.sparse]\noptions = ["--mask-policy", "random", "--mask-prob", "0.03"]\n'))
    plan = write_plan(toy, "health.toml", text)
    assert main([str(plan), "--unit", "random:1"]) == 0 and main([str(plan), "--unit", "sparse:1"]) == 0
    capsys.readouterr()
    assert main([str(plan), "--collect"]) == 0
    printed = capsys.readouterr().out
    data = json.loads((toy / "health" / "report-vs-random.json").read_text())
    rates = {r["row"]: r["mask_rate"] for r in data["health"]}
    assert 0.10 < rates["random"] < 0.20 and 0.0 < rates["sparse"] < 0.06, rates
    sparse = next(r for r in data["health"] if r["row"] == "sparse")
    assert any("under a third" in p for p in sparse["problems"]) and sparse["classes"] == 2
    assert set(data["meta"]["stage_seconds"]["sparse:1"]) == {"pretrain", "finetune", "evaluate"}
    report = (toy / "health" / "report-vs-random.md").read_text()
    assert printed.startswith(report.splitlines()[0])
    first_table = report.index("| ")
    assert report.index("## what it found") < report.index("Only 1 seed") < first_table
    assert "**fails**: masked" in report and "| sparse | 1 |" in report and "fails in seed 1 |" in report
    for r in data["health"]:  # the classes each classifier predicted, against the task's 2
        short = r["classes_predicted"] < 2
        assert short == any("of the task's 2 classes" in p for p in r["problems"])


@pytest.mark.parametrize("plan_report, recipe_result, rows", PLAN_REPORTS)
def test_a_plan_s_report_and_its_page_read_the_same_outcomes_with_one_family_and_one_p(plan_report, recipe_result,
                                                                                      rows):
    """Issue 86: the plan's report (fairseq-maskplug-compare) and the page (benchmarks/science_results.py) read the same
    outcomes (the seeds both hold) with the same family, the same Holm p and the same reading."""
    import sys

    from fairseq_helpers import REPO
    from fairseq_maskplug.compare.report import comparisons_of
    from fairseq_maskplug.evaluation import paired_comparison as pc

    sys.path.insert(0, str(REPO / "benchmarks"))
    import science_results

    results = REPO / "docs" / "results"
    plan = json.loads((results / plan_report).read_text())
    recipe = json.loads((results / recipe_result).read_text())
    seeds = {s["seed"] for s in plan["scores"]}
    table = {}
    for s in recipe["scores"]:
        if s["seed"] in seeds:
            table.setdefault(s["row"], {})[(s["split"], s["seed"])] = s
    sims = 2000  # the sensitivity is not compared here; fewer runs keep the test short
    page = science_results.comparisons(plan["meta"]["name"], table, sims=sims)
    report = comparisons_of(plan, sims=sims)
    assert [(c.name, c.split) for c in report] == [(c.name, c.split) for c in page]
    assert [c.adjusted_p for c in report] == pytest.approx([c.adjusted_p for c in page], nan_ok=True)
    assert [(c.reading, c.family, c.same_as) for c in report] == [(c.reading, c.family, c.same_as) for c in page]
    for c in report:  # a direction is named only where Holm's p is below 0.05
        assert (c.reading != "no difference shown") == (c.adjusted_p < pc.ALPHA)


def test_the_stored_tlm_plan_report_names_no_direction_holm_rejects_and_says_first_what_it_found():
    """Issue 86's case: the TLM plan's report once printed "A better" three times with Holm p 0.060 to 0.065."""
    from fairseq_helpers import REPO
    from fairseq_maskplug.compare.report import markdown

    data = json.loads((REPO / "docs" / "results" / "compare_tlm_plan_cpu_2026-11-29.json").read_text())
    text = markdown(data)
    body = text.split("\n", 2)[2].lstrip()
    assert body.startswith("## what it found")
    verdicts = [line for line in body.splitlines() if line.startswith("- ")][:4]
    assert [v.split(":")[0] for v in verdicts] == ["- tlm-bm25 − task-only (test)", "- tlm-bm25 − tlm-random (test)",
                                                   "- tlm-dsir − tlm-random (test)", "- tlm-bm25 − general-ft (test)"]
    assert all("no difference shown (Holm p" in v and "80% probability" in v for v in verdicts)
    assert "A better" not in text and "B better" not in text
    assert "Holm over a family of 4 comparisons" in text


def reused_plan(toy, name, extra=""):
    """A one-seed copy of the toy plan under its own name, with absolute data paths (``extra`` appended)."""
    text = (PLAN.replace('name = "toy"', f'name = "{name}"').replace("seeds = [1, 2]", "seeds = [1]")
            .replace("epochs = 2", "epochs = 1").replace('"corpus"', f'"{toy / "corpus"}"')
            .replace('"task"', f'"{toy / "task"}"').replace('"general/', f'"{toy / "general"}/'))
    return write_plan(toy, f"{name}.toml", text + extra)


@pytest.mark.full
def test_a_unit_is_reused_only_for_the_plan_it_ran_with_and_a_damaged_result_is_scored_again(toy, capsys):
    """Issue 87, items 1 and 5: a finished unit records what each stage ran with; a rerun or a collect under a
    plan changed since (the pre-training's length, an arm's policy) refuses in one line naming the unit, the stage
    and the option, and trains nothing; a truncated result is named with its path and the command that rebuilds
    it, and that command scores it again."""
    from fairseq_maskplug.compare.cli import main

    plan = reused_plan(toy, "reuse")
    assert main([str(plan), "--unit", "random:1"]) == 0
    unit = toy / "reuse" / "units" / "random__seed1"
    ran = json.loads((unit / ".ran" / "pretrain.json").read_text())
    assert "--max-update" in ran["command"] and "{corpus}" in ran["command"] and "--cpu" not in ran["command"]
    assert any(key.startswith("{corpus}/train.") for key in ran["inputs"]) and "{model}" in ran["inputs"]
    capsys.readouterr()
    checkpoint = (unit / "pretrain" / "checkpoint_last.pt").stat().st_mtime
    for setting, said in (("pretrain.updates=6", "--total-num-update '4' is now '6'"),
                          ('arms.random.options=["--mask-policy", "span"]', "'random' is now 'span'")):
        for how in (["--unit", "random:1"], ["--collect"]):
            assert main([str(plan), *how, "--set", setting]) == 2, (setting, how)
            err = capsys.readouterr().err
            assert "unit random__seed1: its pretrain ran with other settings" in err and said in err, err
    assert (unit / "pretrain" / "checkpoint_last.pt").stat().st_mtime == checkpoint
    # the same plan again: reused
    assert main([str(plan), "--unit", "random:1"]) == 0 and "finished before" in capsys.readouterr().out

    result = unit / "result.test.json"
    result.write_text(result.read_text()[:40])
    assert main([str(plan), "--collect"]) == 2
    err = capsys.readouterr().err
    assert str(result) in err and "not a whole result" in err and "--unit random:1" in err
    assert main([str(plan), "--unit", "random:1"]) == 0
    assert "result.test.json is not whole: scoring again" in capsys.readouterr().out
    assert json.loads(result.read_text())["n"] == 40


@pytest.mark.full
def test_units_are_not_paired_across_replaced_task_data(toy, tmp_path, capsys):
    """Issue 87, item 2: the task's test split replaced in place (same dictionary and sizes) after a unit ran:
    running or collecting refuses, naming the unit and the file; units whose records show different scored items
    are never paired."""
    import shutil

    from fairseq_maskplug.compare import records
    from fairseq_maskplug.compare.cli import main

    task = tmp_path / "task"
    shutil.copytree(toy / "task", task)
    plan = reused_plan(toy, "replaced", "")
    plan.write_text(plan.read_text().replace(f'"{toy / "task"}"', f'"{task}"'))
    assert main([str(plan), "--unit", "none:1"]) == 0
    capsys.readouterr()
    test_bin = task / "input0" / "test.bin"
    tokens = bytearray(test_bin.read_bytes())
    tokens[:8], tokens[8:16] = tokens[8:16], tokens[:8]  # two sentences' first tokens swapped: same sizes
    test_bin.write_bytes(bytes(tokens))
    for how in (["--unit", "none:1"], ["--collect"]):
        assert main([str(plan), *how]) == 2
        err = capsys.readouterr().err
        assert "unit none__seed1: its finetune" not in err and "its evaluate read {task}/input0/test.bin" in err, err

    units = [tmp_path / "a", tmp_path / "b"]
    for unit, fingerprint in zip(units, ("1", "2")):
        records.record_stage(unit, "evaluate", ["x"], {"{task}/input0/test.bin": fingerprint})
    with pytest.raises(records.UnitChanged, match="scored different items"):
        records.check_same_items(units)


def test_a_name_with_a_line_break_never_reaches_a_jobs_file_and_the_documented_slurm_line_runs_one_job(
        toy, tmp_path):
    """Issue 87, item 3: a plan whose path holds a line break is refused by --print-jobs before any work; hostile
    names that stay on one line are quoted, and the documented Slurm line (eval of one line of jobs.txt) passes
    them as one argument each, running nothing else."""
    broken = tmp_path / "a\ntouch INJECTED"
    broken.mkdir()
    (broken / "plan.toml").write_text(reused_plan(toy, "broken").read_text())
    result = run([BIN / "fairseq-maskplug-compare", broken / "plan.toml", "--print-jobs"], cwd=tmp_path,
                 new_process=True)
    assert result.returncode == 2 and "holds a line break" in result.stderr and not result.stdout
    assert not (tmp_path / "INJECTED").exists()

    hostile = tmp_path / "$(touch INJECTED); touch INJECTED2 'x"
    hostile.mkdir()
    (hostile / "plan.toml").write_text(reused_plan(toy, "hostile").read_text().replace(
        f'name = "hostile"', f'name = "hostile"\nout = "{tmp_path / "hostile_out"}"'))
    jobs = check(run([BIN / "fairseq-maskplug-compare", hostile / "plan.toml", "--print-jobs"], cwd=tmp_path,
                     new_process=True)).stdout
    (tmp_path / "jobs.txt").write_text(jobs)
    assert len(jobs.splitlines()) == 2
    stub = tmp_path / "bin" / "fairseq-maskplug-compare"  # stands for the command: records its arguments
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > "$ARGS_OUT"\n')
    stub.chmod(0o755)
    env = dict(os.environ, PATH=f"{stub.parent}:{os.environ['PATH']}", ARGS_OUT=str(tmp_path / "args.txt"),
               SLURM_ARRAY_TASK_ID="2")
    subprocess.run(["bash", "-c", 'eval "$(sed -n ${SLURM_ARRAY_TASK_ID}p jobs.txt)"'], cwd=tmp_path, env=env,
                   check=True)
    assert (tmp_path / "args.txt").read_text().splitlines() == [str(hostile / "plan.toml"), "--unit", "random:1"]
    assert not (tmp_path / "INJECTED").exists() and not (tmp_path / "INJECTED2").exists()


def test_the_estimate_uses_each_arms_measured_stage_times(tmp_path):
    """Issue 86, item 6: before and during a run, units x each arm's measured wall time (its finished units' timed
    stages), parallel at a time; none before any unit is timed; an arm with no finished unit is said to be not
    estimated (another arm's time is not its: it may add a pre-training), or takes the estimate made before the run."""
    from fairseq_maskplug.compare.cli import estimate
    from fairseq_maskplug.compare.commands import unit_dir
    from fairseq_maskplug.compare.estimate import Estimate

    plan = read_plan(write_plan(tmp_path, "plan.toml", PLAN.replace("seeds = [1, 2]", "seeds = [1, 2, 3]")))
    todo = [f"{arm}:{seed}" for arm, seed in plan.units()]
    assert estimate(plan, todo, 1).startswith("no estimate yet")
    timed = {"none": {"finetune": 50.0, "evaluate": 10.0}, "random": {"pretrain": 200.0, "finetune": 50.0,
                                                                       "evaluate": 10.0}}
    for arm, seconds in timed.items():
        done = unit_dir(plan, arm, 1) / ".done"
        done.mkdir(parents=True)
        for stage, value in seconds.items():
            (done / stage).write_text(f"{value}\n")
        if arm == "none":  # random not finished yet: its units are not none's 60 s
            left = [unit for unit in todo if not unit.endswith(":1")]
            assert estimate(plan, left, 2) == "about 1 min (2 unit(s), 2 at a time, from measured times); 2 " \
                                              "unit(s) not estimated yet"
            before = Estimate({"random:2": 300.0, "random:3": 300.0}, {}, {"random": "probed"})
            assert estimate(plan, left, 2, before) == "about 6 min (4 unit(s), 2 at a time, from measured times " \
                                                      "and the estimate above)"
    left = [unit for unit in todo if not unit.endswith(":1")]  # 2 none (60 s) and 2 random (260 s)
    assert estimate(plan, left, 2) == "about 5 min (4 unit(s), 2 at a time, from measured times)"


def test_an_arm_s_seed_offset_changes_only_the_seed_its_training_draws_from(toy):
    """Issue 88's null control: an arm identical to another but for its seed_offset trains with the same words
    except --seed (seed + offset), in every stage; its tracks' {seed} stays the unit's seed."""
    from fairseq_maskplug.compare.commands import finetune_command, pretrain_command

    text = PLAN + '\n[arms.random-again]\noptions = ["--mask-policy", "random"]\nseed_offset = 1000\n'
    plan = read_plan(write_plan(toy, "offset.toml", text))
    random, again = plan.arm("random"), plan.arm("random-again")
    for command in (pretrain_command, finetune_command):
        a, b = command(plan, random, 2, [], []), command(plan, again, 2, [], [])
        differ = [(x, y) for x, y in zip(a, b) if x != y]
        assert len(a) == len(b) and all("random__seed2" in x and "random-again__seed2" in y
                                        for x, y in differ if x != "2"), differ
        assert ("2", "1002") in differ  # --seed 2 against --seed 1002
    with pytest.raises(PlanError, match=r"\[arms.none\].seed_offset must lie in \[0, inf\), got -1"):
        read_plan(write_plan(toy, "offset.toml", PLAN.replace("pretrain = false", "pretrain = false\nseed_offset = -1")))


@pytest.mark.full  # three fine-tunings: about 40 s
def test_identical_arms_on_one_stream_give_identical_outcomes_and_an_offset_stream_another(toy, capsys):
    """Issue 88: arms identical in every option give identical per-seed outcomes (so a null control needs the
    offset: identical arms on one stream test nothing); with seed_offset they are independent replicates."""
    from fairseq_maskplug.compare.cli import main

    text = (PLAN.replace('name = "toy"', 'name = "streams"').replace("seeds = [1, 2]", "seeds = [1]")
            .replace('[arms.random]\noptions = ["--mask-policy", "random"]\n', "")
            + "\n[arms.same]\npretrain = false\n\n[arms.offset]\npretrain = false\nseed_offset = 1000\n")
    plan = write_plan(toy, "streams.toml", text)
    assert main([str(plan), "--no-estimate"]) == 0
    capsys.readouterr()
    outcomes = {arm: json.loads((toy / "streams" / "units" / f"{arm}__seed1" / "result.valid.json").read_text())
                for arm in ("none", "same", "offset")}
    import torch

    weights = {arm: torch.load(toy / "streams" / "units" / f"{arm}__seed1" / "finetune" / "checkpoint_best.pt",
                               map_location="cpu", weights_only=False)["model"] for arm in outcomes}

    def same(a, b):
        return all(torch.equal(weights[a][name], weights[b][name]) for name in weights[a])

    assert outcomes["none"]["correct"] == outcomes["same"]["correct"] and same("none", "same")
    assert not same("none", "offset")  # another stream: other weights (if not other answers)


def test_flip_labels_flips_exactly_its_share_each_to_another_class_drawn_uniformly():
    import numpy as np

    from preprocess.flip_labels import flip_labels

    labels = np.random.default_rng(0).integers(4, 7, size=1000)  # three classes, as dictionary indices
    for share in (0.0, 0.1, 0.25, 1.0):
        for seed in (1, 2):
            flipped, positions = flip_labels(labels, np.arange(4, 7), share, np.random.default_rng(seed))
            changed = np.flatnonzero(flipped != labels)
            assert changed.tolist() == positions.tolist() and changed.size == round(share * 1000)
    # a class-4 label becomes 5 or 6 with probability 1/2 each: over 3,000 flips the count of 5 is binomial
    # (3000, 1/2), standard deviation 27.4; 5 of them (137) is far outside what chance gives
    flipped, _ = flip_labels(np.full(3000, 4), np.arange(4, 7), 1.0, np.random.default_rng(3))
    assert abs(int((flipped == 5).sum()) - 1500) < 137 and set(flipped.tolist()) == {5, 6}
    with pytest.raises(ValueError, match="at least two classes"):
        flip_labels(np.full(10, 4), np.array([4]), 0.5, np.random.default_rng(0))
    # the classes of a label dict.txt that fairseq-preprocess padded (madeupword rows: not classes; the harm plan's
    # fine-tuning failed on labels flipped to them, 2026-12-02)
    from fairseq.data import Dictionary

    from preprocess.flip_labels import label_classes

    padded = Dictionary()
    for label in ("0", "1"):
        padded.add_symbol(label)
    padded.pad_to_multiple_(8)
    assert len(padded) == 8 and label_classes(padded).tolist() == [padded.index("0"), padded.index("1")]
    with pytest.raises(ValueError, match=r"labels \[9\] are not classes"):
        flip_labels(np.array([4, 9]), np.arange(4, 7), 0.5, np.random.default_rng(0))


def test_a_from_scratch_arm_without_pre_training_fine_tunes_a_fresh_model(toy):
    """Issue 88's diagnosis row: ``from_scratch = true`` with ``pretrain = false`` fine-tunes a fresh model of the
    checkpoint's shape (no --finetune-from-model; its record does not read the checkpoint), so a report says what
    the model's own pre-training is worth; with the plan's own fine-tuning command (from {start}) it is refused."""
    from fairseq_maskplug.compare.commands import finetune_command
    from fairseq_maskplug.compare.records import Fingerprints, stage_inputs

    plan = read_plan(write_plan(toy, "fresh.toml", PLAN + "\n[arms.fresh]\npretrain = false\nfrom_scratch = true\n"))
    fresh, none = plan.arm("fresh"), plan.arm("none")
    assert fresh.task is None and fresh.from_scratch
    words, baseline = finetune_command(plan, fresh, 1, [], []), finetune_command(plan, none, 1, [], [])
    assert "--finetune-from-model" not in words and "--finetune-from-model" in baseline
    assert [w for w in baseline if w not in ("--finetune-from-model", str(plan.model))] == \
        [w.replace("fresh__", "none__") for w in words]  # otherwise the same fine-tuning
    prints = Fingerprints(plan)
    assert "{model}" not in stage_inputs(plan, fresh, "finetune", words, prints)
    assert "{model}" in stage_inputs(plan, none, "finetune", baseline, prints)
    own = PLAN.replace("[finetune]\nepochs = 2\nbatch_size = 8\n", '[finetune]\ncommand = ["fairseq-maskplug-train", '
                       '"{task}", "--finetune-from-model", "{start}"]\n\n[evaluate]\ncommand = ["true", "{unit}"]\nsplits = ["test"]\n')
    with pytest.raises(PlanError, match="arm fresh's from_scratch without pre-training would be ignored"):
        read_plan(write_plan(toy, "fresh.toml", own + "\n[arms.fresh]\npretrain = false\nfrom_scratch = true\n"))


def test_an_arm_on_data_a_produce_command_writes_below_out_is_checked_after_it(toy):
    """``data = "{out}/..."`` (TLM's general-corpus-ft reads the corpus the plan's produce binarizes): the folder
    below the plan's output, its stage parsed only once the produce commands have run (before, it has no
    dictionary to parse against), not refused before any work."""
    from fairseq_maskplug.compare.checks import check_plan, produced_data

    text = (PLAN.replace('name = "toy"', 'name = "made"').replace("baseline", 'produce = [["true"]]\nbaseline')
            + '\n[arms.made]\ndata = "{out}/data/made"\noptions = ["--mask-policy", "random"]\n')
    plan = read_plan(write_plan(toy, "made.toml", text))
    assert plan.arm("made").data == plan.out / "data" / "made" and produced_data(plan, plan.arm("made"))
    assert not produced_data(plan, plan.arm("random"))
    said = []
    check_plan(plan, say=said.append)
    assert any("arm made: its data" in line and "checked after them" in line for line in said), said
    assert any(line.startswith("checking arm random") for line in said)


def test_an_arm_with_label_noise_fine_tunes_on_a_copy_whose_train_labels_flipped_exactly_its_share(toy, tmp_path):
    """Issue 88's known harm: fairseq-maskplug-flip-labels writes the copy (valid, test and the text linked, the
    task untouched); each unit of a plan's arm with label_noise runs it as its own stage, drawn from the unit's seed
    (flips redrawn in every seed: issue 101, item 4), fine-tunes on it, and is scored on the task."""
    from fairseq.data import Dictionary, data_utils

    from fairseq_maskplug.compare.commands import evaluate_command, finetune_command

    given = listing(toy / "task")
    check(run([BIN / "fairseq-maskplug-flip-labels", "--data", toy / "task", "--share", "0.25", "--out",
               tmp_path / "noisy"]))
    dictionary = Dictionary.load(str(toy / "task" / "label" / "dict.txt"))

    def labels(task, split):
        dataset = data_utils.load_indexed_dataset(str(task / "label" / split), dictionary)
        return [int(dataset[i][0]) for i in range(len(dataset))]

    clean, noisy = labels(toy / "task", "train"), labels(tmp_path / "noisy", "train")
    assert sum(a != b for a, b in zip(clean, noisy)) == round(0.25 * len(clean)) == 50
    assert json.loads((tmp_path / "noisy" / "flipped.json").read_text())["flipped"] == 50
    assert labels(tmp_path / "noisy", "valid") == labels(toy / "task", "valid") and listing(toy / "task") == given
    assert (tmp_path / "noisy" / "input0" / "train.bin").resolve() == (toy / "task" / "input0" / "train.bin").resolve()

    plan = read_plan(write_plan(toy, "noise.toml", PLAN + "\n[arms.harm]\npretrain = false\nlabel_noise = 0.25\n"))
    harm = plan.arm("harm")
    from fairseq_maskplug.compare.commands import unit_dir
    from fairseq_maskplug.compare.units import unit_stages

    assert not harm.produce
    for seed in (1, 2):
        stages = dict(unit_stages(plan, harm, seed, [], []))
        assert list(stages) == ["flip", "finetune", "evaluate"]
        copy = unit_dir(plan, "harm", seed) / "noisy-task"
        assert stages["flip"][1:] == ["--data", str(plan.labelled), "--share", "0.25", "--seed", str(seed), "--out",
                                      str(copy)]
        assert finetune_command(plan, harm, seed, [], [])[0] == str(copy)
    assert str(plan.labelled) in evaluate_command(plan, harm, 1)  # scored on the clean labels
    from fairseq_maskplug.compare.checks import check_plan  # before its units write their copies: checked on the task
    check_plan(plan)
    assert not any((plan.out / "units").glob("harm__seed*"))
    with pytest.raises(PlanError, match=r"\[arms.harm\].label_noise must lie in \[0, 1\], got 1.5"):
        read_plan(write_plan(toy, "noise.toml", PLAN + "\n[arms.harm]\npretrain = false\nlabel_noise = 1.5\n"))


def test_subsample_task_keeps_exactly_its_examples_in_order_and_moves_the_rest_to_test(toy, tmp_path):
    """Issue 88's low-resource shape: fairseq-maskplug-subsample-task keeps N train examples drawn without
    replacement in their order, appends the others to test after the task's own test items, leaves valid linked
    and the task untouched; a track of a replaced split is not carried over (it would not align)."""
    import numpy as np
    from fairseq.data import Dictionary, data_utils

    from preprocess.subsample_task import choose_examples

    for seed in range(20):  # uniform without replacement: sorted, distinct, in range, every size
        kept = choose_examples(50, 7, np.random.default_rng(seed))
        assert kept.tolist() == sorted(set(kept.tolist())) and len(kept) == 7 and 0 <= kept[0] and kept[-1] < 50
    # each position is kept with probability 7/50: over 2,000 draws its count is binomial (2000, 0.14), sd 15.5;
    # the extremes of 50 counts lie within 5 sd of 280 (a fixed or biased choice would not)
    counts = np.bincount(np.concatenate([choose_examples(50, 7, np.random.default_rng(s)) for s in range(2000)]),
                         minlength=50)
    assert np.abs(counts - 280).max() < 5 * 15.5
    with pytest.raises(ValueError, match=r"keep must lie in \[1, 50\]"):
        choose_examples(50, 51, np.random.default_rng(0))

    given = listing(toy / "task")
    check(run([BIN / "fairseq-maskplug-subsample-task", "--data", toy / "task", "--train-examples", "30",
               "--rest-to-test", "--seed", "4", "--out", tmp_path / "few"]))
    few = tmp_path / "few"

    def items(task, part, split):
        dictionary = Dictionary.load(str(task / part / "dict.txt"))
        dataset = data_utils.load_indexed_dataset(str(task / part / split), dictionary)
        return [dataset[i].tolist() for i in range(len(dataset))]

    record = json.loads((few / "subset.json").read_text())
    kept = record["kept"]
    for part in ("input0", "label"):
        train = items(toy / "task", part, "train")
        assert items(few, part, "train") == [train[i] for i in kept]
        rest = [row for i, row in enumerate(train) if i not in set(kept)]
        assert items(few, part, "test") == items(toy / "task", part, "test") + rest
        assert items(few, part, "valid") == items(toy / "task", part, "valid")
    assert len(kept) == 30 and record["test_lines"] == len(items(few, "label", "test"))
    assert (few / "input0" / "valid.bin").resolve() == (toy / "task" / "input0" / "valid.bin").resolve()
    assert listing(toy / "task") == given
    # without --rest-to-test the test split is the task's; more examples than train is refused in one line
    check(run([BIN / "fairseq-maskplug-subsample-task", "--data", toy / "task", "--train-examples", "30",
               "--out", tmp_path / "few2"]))
    assert items(tmp_path / "few2", "label", "test") == items(toy / "task", "label", "test")
    refused = run([BIN / "fairseq-maskplug-subsample-task", "--data", toy / "task", "--train-examples", "100000",
                   "--out", tmp_path / "few3"])
    assert refused.returncode != 0 and "has only" in refused.stderr and not (tmp_path / "few3").exists()


def test_the_control_plans_are_replicates_of_one_arm_and_known_harms():
    """Issue 88's plans: null.toml's eight arms differ only in the stream they draw from; harm.toml's noisy arms in
    the share of train labels flipped and their stream; both fine-tune the general model as the quickstart's no-TaskPT row."""
    import dataclasses

    from fairseq_helpers import REPO

    null = read_plan(REPO / "recipes" / "compare_plans" / "null.toml")
    assert len(null.arms) == 8 and len({arm.seed_offset for arm in null.arms}) == 8
    assert {dataclasses.replace(arm, name="", seed_offset=0) for arm in null.arms} == {
        dataclasses.replace(null.arm("r0"), name="")}
    assert len(null.family()) == 7 and null.seeds == (1, 2, 3, 4, 5)
    harm = read_plan(REPO / "recipes" / "compare_plans" / "harm.toml")
    assert [arm.label_noise for arm in harm.arms] == [0.0, 0.1, 0.25, 0.4] and harm.baseline == "clean"
    assert all(arm.task is None for arm in harm.arms)  # each on its own stream, flips redrawn per seed (issue 101)
    assert len({arm.seed_offset for arm in harm.arms}) == 4
    # the positive control the methods build on: continued pre-training on the corpus against none and scratch
    taskpt = read_plan(REPO / "recipes" / "compare_plans" / "taskpt.toml")
    assert [(a.name, a.task, a.from_scratch) for a in taskpt.arms] == [
        ("none", None, False), ("taskpt", "guided_mlm", False), ("scratch", None, True)]
    assert taskpt.arm("taskpt").options == ("--mask-policy", "random") and taskpt.seeds == (1, 2, 3, 4, 5)
    # all three at the low-resource shape recipes/compare.sh makes: 400 train sentences, 10 epochs
    for plan in (null, harm, taskpt):
        assert plan.labelled.name == "mr-400" and plan.finetune.epochs == 10, plan.name
    recipe = (REPO / "recipes" / "compare.sh").read_text()
    assert "--train-examples 400 \\\n            --rest-to-test" in recipe and "null|harm|taskpt" in recipe


def test_the_lexicon_plan_is_the_pre_training_controls_on_the_renamed_shape():
    """Issue 100's plan: TaskPT against none, TaskPT on the word-shuffled renamed reviews (the harm) and a classifier
    from scratch, on the renamed low-resource task, scored and compared on test_unseen first, then test; the recipe
    makes the shape with fairseq-maskplug-rename-lexicon before the plan runs."""
    import dataclasses

    from fairseq_helpers import REPO

    plan = read_plan(REPO / "recipes" / "compare_plans" / "lexicon.toml")
    assert [(a.name, a.task, a.from_scratch) for a in plan.arms] == [
        ("none", None, False), ("taskpt", "guided_mlm", False), ("shuffled", "guided_mlm", False),
        ("scratch", None, True), ("none-r1", None, False)]
    taskpt, shuffled = plan.arm("taskpt"), plan.arm("shuffled")
    assert taskpt.options == shuffled.options == ("--mask-policy", "random") and taskpt.updates == shuffled.updates
    assert shuffled.data.name == "corpus-shuffled" and plan.corpus.name == "corpus"
    assert plan.labelled.parts[-2:] == ("lexicon", "task") and plan.finetune.epochs == 10
    assert plan.compared == ("test_unseen", "test") and set(plan.splits) == {"valid", "test_unseen", "test"}
    assert plan.family() == [("taskpt", "none"), ("taskpt", "shuffled"), ("none", "scratch"), ("none-r1", "none")]
    assert dataclasses.replace(plan.arm("none-r1"), name="none", seed_offset=0) == plan.arm("none")  # the null,
    # on streams no other arm draws from at any of the plan's seeds (an offset of 1 made none-r1's seed s none's s+1)
    assert not {s + plan.arm("none-r1").seed_offset for s in plan.seeds} & set(plan.seeds)
    recipe = (REPO / "recipes" / "compare.sh").read_text()
    assert "fairseq-maskplug-rename-lexicon --task \"$task\" --select-from \"$data/mr\"" in recipe
    assert "--shuffled-corpus" in recipe and "arms.shuffled.data=$lexicon/corpus-shuffled" in recipe


@pytest.mark.parametrize("method", ["lexicon", "taskpt"])
def test_the_minilm_plans_differ_from_their_plans_only_where_the_model_does(method):
    """``START=minilm``'s plans: the same arms, family, fine-tuning and scoring; their own data and model, and
    continued pre-training at BERT's rate on 128-token blocks, 200 updates of 16 (their headers say why)."""
    from fairseq_helpers import REPO

    ours, theirs = (read_plan(REPO / "recipes" / "compare_plans" / f"{n}.toml") for n in (f"{method}-minilm", method))
    assert ours.family() == theirs.family() and ours.compared == theirs.compared and ours.finetune == theirs.finetune
    assert [(a.name, a.options, a.from_scratch, a.seed_offset) for a in ours.arms] == [
        (a.name, a.options, a.from_scratch, a.seed_offset) for a in theirs.arms]
    assert "minilm" in ours.model.parts and "minilm" in ours.labelled.parts and "minilm" in ours.corpus.parts
    if method == "lexicon":
        assert ours.labelled.parts[-4:] == ("minilm", "data", "lexicon", "task")
        assert ours.arm("shuffled").data.parts[-4:] == ("minilm", "data", "lexicon", "corpus-shuffled")
    assert ours.pretrain.lr == 1e-4 and ours.pretrain.tokens_per_sample == 128 and theirs.pretrain.lr == 1e-3
    assert (ours.pretrain.updates, ours.pretrain.batch_size) == (200, 16)


def test_the_recipe_refuses_a_low_resource_run_it_has_no_shape_for_before_any_work(tmp_path):
    """``LOW_RESOURCE=1 bash recipes/compare.sh METHOD``: the papers' MR plans only (the controls are at that shape
    already, BART has no MR task); ``START=minilm``: the lexicon shape only; a bad value or argument is refused before
    the set-up, naming it."""
    from fairseq_helpers import REPO

    env = {**os.environ, "MASKPLUG_WORK": str(tmp_path / "work")}
    for low, argv, message in (("1", ["null"], "LOW_RESOURCE=1 is for selective, l3, fe and tlm (got: null)"),
                               ("1", ["bart"], "LOW_RESOURCE=1 is for selective, l3, fe and tlm (got: bart)"),
                               ("yes", ["l3"], "LOW_RESOURCE must be 0 or 1 (got: yes)"),
                               ("1", ["tlm", "1", "extra=1"], "only --arms ARM... and --set KEY=VALUE (got: extra=1)"),
                               ("0", ["selective"], "START=minilm is for lexicon and taskpt (got: selective)"),
                               ("0", ["lexicon"], "START must be general or minilm (got: bert)")):
        start = {"selective": "minilm", "lexicon": "bert"}.get(argv[0], "general")
        result = subprocess.run(["bash", str(REPO / "recipes" / "compare.sh"), *argv], cwd=tmp_path, text=True,
                                capture_output=True, env={**env, "LOW_RESOURCE": low, "START": start}, timeout=60)
        assert result.returncode == 2 and message in result.stderr, (argv, result.stderr)
    assert not (tmp_path / "work").exists()


def test_a_stage_s_tokens_are_its_epochs_tokens_per_batch_times_their_updates(tmp_path):
    from fairseq_maskplug.compare.compute import compute_lines, stage_tokens

    log = tmp_path / "finetune.log"
    records = [{"epoch": 1, "train_wpb": "250.5", "train_num_updates": "10"},
               {"epoch": 2, "train_wpb": "240", "train_num_updates": "18"}]
    log.write_text("".join(f"2026-12-02 | INFO | train_inner | {{\"wpb\": \"1\"}}\n2026-12-02 | INFO | train | "
                           f"{json.dumps(r)}\n" for r in records))
    assert stage_tokens(log) == round(250.5 * 10 + 240 * 8) and stage_tokens(tmp_path / "none.log") is None
    data = {"meta": {"parameters": 1000, "arms": [{"name": "a"}, {"name": "b"}],
                     "stage_seconds": {"a:1": {"pretrain": 30.0, "finetune": 10.0}, "a:2": {"finetune": 20.0},
                                       "ab:1": {"finetune": 999.0}}},
            "compute": [{"row": "a", "seed": 1, "pretrain_tokens": 100, "finetune_tokens": 50},
                        {"row": "a", "seed": 2, "pretrain_tokens": 300, "finetune_tokens": 50},
                        {"row": "b", "seed": 1, "pretrain_tokens": None, "finetune_tokens": 60}]}
    lines = compute_lines(data)
    # the wall time of a unit: its stages summed, the mean over the arm's timed units (arm ab's are not a's)
    assert "| a | 2 | 200 | 50 | 1.50e+06 | 30 (2) |" in lines and "| b | 1 | - | 60 | 3.60e+05 | - |" in lines


def test_the_estimate_before_any_unit_probes_each_distinct_stage_once_and_says_each_arm_s_time(toy, tmp_path,
                                                                                               monkeypatch, capsys):
    """Issue 106, item 2: ``--print-jobs`` (and a run) say each unit's wall time before any unit runs, from a probe of
    each distinct training stage on this machine: the two arms' fine-tunings differ only in their seed, save folder
    and start, so 2 probes (random's pre-training, the fine-tuning) size 4 units; the jobs on stdout stay alone."""
    from fairseq_maskplug.compare.cli import main
    from fairseq_maskplug.compare.commands import device_options, model_options
    from fairseq_maskplug.compare.estimate import probe_key, stage_size
    from fairseq_maskplug.compare.units import unit_stages

    plan = read_plan(toy / "plan.toml")
    model = model_options(plan.model)
    stages = {(arm, seed): dict(unit_stages(plan, plan.arm(arm), seed, model, device_options()))
              for arm, seed in plan.units()}
    assert probe_key(stages["none", 1]["finetune"]) == probe_key(stages["random", 2]["finetune"])
    assert probe_key(stages["random", 1]["pretrain"]) != probe_key(stages["random", 1]["finetune"])
    assert stage_size(stages["random", 1]["pretrain"]) == (4, 1)
    updates, epochs = stage_size(stages["none", 1]["finetune"])
    assert epochs == 2 and updates == 2 * (plan_train_size(plan) // 8 + 1)
    monkeypatch.chdir(tmp_path)
    assert main([str(toy / "plan.toml"), "--print-jobs", "--set", "out=estimated"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 4 and "[estimate]" not in captured.out
    said = [line for line in captured.err.splitlines() if line.startswith("[estimate]")]
    assert said[0] == "[estimate] probing 2 training stage(s), 5 updates each, 1 at a time", said
    seconds = {arm: float(re.search(rf"\[estimate\] {arm}: 2 unit\(s\), about (\d+) s each \(probed\)",
                                    "\n".join(said)).group(1)) for arm in ("none", "random")}
    assert 0 < seconds["none"] < seconds["random"], said  # random adds a pre-training to the same fine-tuning
    assert re.fullmatch(r"\[estimate\] about \d+ min in all for 4 unit\(s\), 1 at a time .*", said[-1]), said
    assert not (tmp_path / "estimated").exists()  # --print-jobs writes nothing


def test_a_stage_that_ran_in_another_unit_is_estimated_from_its_time_and_only_the_rest_is_probed(toy, tmp_path):
    """Issue 106, item 2, found on the lexicon plans: a plan's own ``fairseq-maskplug-evaluate`` command is the
    plugin's scoring (sized from the fine-tuning's probe, not "not estimated"), and an arm whose fine-tuning and
    scoring ran in another arm's units (arm none's, timed) is estimated from those times, probing only its
    pre-training: the arms' estimate is then that probe's stage plus the measured 50 + 10 s."""
    from fairseq_maskplug.compare.commands import device_options, model_options, unit_dir
    from fairseq_maskplug.compare.estimate import estimate_units

    own = ('[evaluate]\ncommand = ["fairseq-maskplug-evaluate", "--checkpoint", "{unit}/finetune/checkpoint_best.pt",'
           ' "--data", "{task}", "--split", "valid,test", "--output", "{unit}/result.{split}.json"]\n'
           'splits = ["valid", "test"]\n')
    plan = read_plan(write_plan(toy, "staged.toml", PLAN.replace('name = "toy"', f'name = "staged"\nout = '
                                                                 f'"{tmp_path / "staged"}"') + own))
    model, device = model_options(plan.model), device_options()
    said = []
    fresh = estimate_units(plan, ["random:1"], model, device, 1, said.append)
    assert said == ["[estimate] probing 2 training stage(s), 5 updates each, 1 at a time"], said
    assert not fresh.unknown and fresh.sources == {"random": "probed"} and fresh.seconds["random:1"] > 0
    for seed in (1, 2):
        done = unit_dir(plan, "none", seed) / ".done"
        done.mkdir(parents=True)
        (done / "finetune").write_text("50\n")
        (done / "evaluate").write_text("10\n")
    said.clear()
    found = estimate_units(plan, ["random:1", "random:2"], model, device, 1, said.append)
    assert said == ["[estimate] probing 1 training stage(s), 5 updates each, 1 at a time"], said
    assert not found.unknown and found.sources == {"random": "measured and probed"}
    assert found.seconds["random:1"] == found.seconds["random:2"] > 60


def plan_train_size(plan):
    from fairseq_maskplug.compare.commands import split_size

    return split_size(plan.labelled / "input0" / "train")


@pytest.mark.full  # a probe and three units: about a minute
def test_the_estimate_made_before_the_units_is_within_a_factor_of_2_of_their_measured_wall_time(toy, capsys):
    """Issue 106, item 2, done when: a run writes its estimate (``OUT/estimate.json``) before its first unit, and
    each unit's measured wall time (its stages' timed seconds) lies within a factor of 2 of it; arms whose units
    finished are estimated from those after."""
    from fairseq_maskplug.compare.cli import main
    from fairseq_maskplug.compare.units import stage_seconds

    path = write_plan(toy, "timed.toml", PLAN.replace('name = "toy"', 'name = "timed"')
                      .replace("seeds = [1, 2]", "seeds = [1]"))
    assert main([str(path)]) == 0
    said = capsys.readouterr()
    estimate = json.loads((toy / "timed" / "estimate.json").read_text())
    assert estimate["sources"] == {"none": "probed", "random": "probed"} and estimate["parallel"] == 1
    for unit, seconds in estimate["units_s"].items():
        arm, seed = unit.split(":")
        took = sum(stage_seconds(read_plan(path), arm, int(seed)).values())
        assert 0.5 <= took / seconds <= 2, (unit, seconds, took, said.err)
    assert main([str(path), "--seeds", "1", "2"]) == 0  # the second seed's units: from the first's measured times
    again = json.loads((toy / "timed" / "estimate.json").read_text())
    assert again["sources"] == {"none": "measured", "random": "measured"}
    assert set(again["units_s"]) == {"none:2", "random:2"}


def test_a_produce_command_that_ran_with_other_settings_is_refused_before_any_work(toy, tmp_path, monkeypatch,
                                                                                   capsys):
    """Issue 104, item 3: each produce command records what it ran (its command line in the plan's placeholders,
    ``OUT/producers/.ran/ARM.N.json``); a later run whose plan gives it other settings (labels flipped at another
    share) is refused in one line naming the arm, the option and what to remove, never reusing the copy as if the
    plan had made it (a copy of the task with labels flipped at another share); the same settings are reused."""
    from fairseq_maskplug.compare.cli import main

    monkeypatch.chdir(tmp_path)
    flip = '["fairseq-maskplug-flip-labels", "--data", "{task}", "--share", "%s", "--out", "{out}/noisy"]'
    plan = write_plan(toy, "noisy_reuse.toml", PLAN.replace('name = "toy"', 'name = "noisy_reuse"')
                      + f"\n[arms.harm]\npretrain = false\nproduce = [{flip % '0.25'}]\n")
    out = toy / "noisy_reuse"
    assert main([str(plan), "--produce"]) == 0
    ran = json.loads((out / "producers" / ".ran" / "harm.1.json").read_text())
    assert ran["command"][:4] == ["--data", "{task}", "--share", "0.25"], ran
    capsys.readouterr()
    assert main([str(plan), "--produce", "--set", f"arms.harm.produce=[{flip % '0.5'}]"]) == 2
    error = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]  # (after the checks)
    assert len(error) == 1 and "producers harm: its harm.1 ran with other settings (--share '0.25' is now '0.5')" \
        in error[0], error
    assert f"remove {out / 'producers' / '.done' / 'harm'}," in error[0]
    assert json.loads((out / "noisy" / "flipped.json").read_text())["share"] == 0.25
    assert main([str(plan), "--produce"]) == 0  # the settings it ran with: reused


@pytest.mark.full  # four fine-tunings and two flips: about a minute
def test_a_label_noise_arm_flips_other_labels_in_each_seed_as_its_units_first_stage(toy):
    """Issue 101, item 4: the harm's flips are redrawn in every seed (each unit's own ``flip`` stage, from the unit's
    draw seed), so its noise between seeds is a user's; the flipped share is exact in each, the task untouched."""
    from fairseq_maskplug.compare.cli import main

    given = listing(toy / "task")
    plan = write_plan(toy, "reflip.toml", PLAN.replace('name = "toy"', 'name = "reflip"').replace(
        "[arms.random]\noptions", "[arms.harm]\npretrain = false\nlabel_noise = 0.25\nseed_offset = 7\n\n"
        "[arms.random]\noptions"))
    assert main([str(plan), "--no-estimate", "--arms", "none", "harm"]) == 0
    flips = [json.loads((toy / "reflip" / "units" / f"harm__seed{seed}" / "noisy-task" / "flipped.json").read_text())
             for seed in (1, 2)]
    assert [f["seed"] for f in flips] == [8, 9] and all(f["share"] == 0.25 and f["flipped"] == 50 for f in flips)
    assert flips[0]["positions"] != flips[1]["positions"]
    assert listing(toy / "task") == given
    ran = json.loads((toy / "reflip" / "units" / "harm__seed1" / ".ran" / "flip.json").read_text())
    assert ran["command"][:4] == ["--data", "{task}", "--share", "0.25"] and "{task}/label/train.bin" in ran["inputs"]
