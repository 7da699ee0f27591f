"""The seeded comparisons of benchmarks/gpu_science.py, a caller of fairseq-maskplug-compare: its plans' commands,
its checks, its smoke (a toy plan's report); the tables of the results files it wrote before
(benchmarks/science_results.py; the analysis itself: tests/test_paired_comparison.py); the parallel fairseq-fixed
build of install.py; and (full tier) the whole command at toy size on CPU."""

import json
import math
import os
import re
import subprocess
import sys
import tarfile

import pytest

from fairseq_helpers import REPO, check
from recipes import offline_install

from fairseq_maskplug.evaluation.comparison_report import mean_se

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_science  # noqa: E402
import science_results  # noqa: E402


def test_mean_and_standard_error():
    assert mean_se([1.0, 2.0, 3.0]) == pytest.approx((2.0, 1.0 / math.sqrt(3)))
    mean, se = mean_se([4.0])
    assert mean == 4.0 and math.isnan(se)
    with pytest.raises(ValueError):
        mean_se([])


def harness_results(experiment: str, outcomes: dict, splits=("valid", "test")) -> dict:
    """A results file of the former harness (docs/results/science_*.json): one score per unit and split, as
    fairseq-maskplug-evaluate's records (or recipes/probe_em.py --split-output's)."""
    scores = []
    for seed, rows in outcomes.items():
        for row, correct in rows.items():
            for split, right in zip(splits, correct if isinstance(correct, tuple) else (correct,) * len(splits)):
                accuracy = 100.0 * right.count("1") / len(right)
                scores.append({"experiment": experiment, "row": row, "seed": seed, "split": split, "n": len(right),
                               "accuracy": accuracy, "macro_f1": accuracy - 1, "units": "percent",
                               "classes_predicted": 2, "correct": right})
    return {"meta": {"device": "CPU", "shape": "quickstart", "seeds": [str(s) for s in outcomes]}, "scores": scores,
            "curves": [], "acceptance": [], "jobs": {}}


def test_the_former_harness_s_results_are_summarized_with_their_family_s_paired_comparisons():
    outcomes = {1: {"selective": "1111111100", "matched-random": "1111110000", "no-TaskPT": "1111000000"},
                2: {"selective": "1111111110", "matched-random": "1111111000", "no-TaskPT": "1111100000"}}
    data = harness_results("selective", outcomes)
    table = science_results.summarize(data)
    # selective: 80 and 90 -> 85 +- 5; the pair selective - matched-random: differences 20 and 20
    assert "| selective | 2 | 85.0 ± 5.0 |" in table
    interval, line = [l for l in table.splitlines() if l.startswith("| selective − matched-random |")]
    # differences 20 and 20 points: no spread over seeds, so the interval over seeds (these 10 sentences) is a
    # point; but 10 sentences say little of the task: the crossed interval holds 0, and no direction is named
    assert "| 2 × 10 | 20.00 ± 0.00 | [+20.00, +20.00] | [-5.01, +45.01] | no difference shown |" in interval
    # the pooled discordant pairs are a description: selective alone right 4 times, matched-random never
    assert line.endswith("| 4 / 0 |") and "the larger), Holm over 3 |" in table
    # each row's rule p (the larger of the two) against its Holm adjustment over the experiment's three comparisons
    found = science_results.comparisons("selective", {row: {(s["split"], s["seed"]): s for s in data["scores"]
                                                            if s["row"] == row} for row in outcomes[1]})
    assert [c.adjusted_p for c in found] == pytest.approx(
        __import__("fairseq_maskplug.evaluation.paired_comparison", fromlist=["adjusted"]).adjusted(
            [max(c.p, c.crossed_p) for c in found]), nan_ok=True)
    assert "selective − matched-random (test): no difference shown (Holm p" in table


def test_bart_exact_match_is_read_per_question_set_and_compared_on_each():
    """The BART runs' scores (EM and one 0/1 per question on the seen and held-out questions) are compared per
    question set, SSM with +Rand on each, seen first."""
    outcomes = {1: {"ssm": ("1110", "1000"), "rand": ("1000", "1000")},
                2: {"ssm": ("1100", "1100"), "rand": ("0000", "1000")}}
    table = science_results.summarize(harness_results("bart", outcomes, splits=("seen", "heldout")))
    assert "| ssm | 2 | 62.5 ± 12.5 | 37.5 ± 12.5 |" in table  # seen 75 and 50, held-out 25 and 50
    seen = next(l for l in table.splitlines() if l.startswith("| ssm − rand | 2 × 4 | 50.00 ± 0.00 |"))
    # +50 points in both seeds on these 4 questions; 4 questions say little of the task (the crossed interval)
    assert "| [+50.00, +50.00] | [-14.96, +114.96] | no difference shown |" in seen
    heldout = next(l for l in table.splitlines() if l.startswith("| ssm − rand | 2 × 4 | 12.50 ± 12.50 |"))
    assert "| no difference shown |" in heldout
    assert table.index("(EM on seen questions, points)") < table.index("(EM on held-out questions, points)")


def test_fe_curves_are_tabled_per_update():
    data = harness_results("fe", {})
    data["curves"] = [{"experiment": "fe", "row": row, "seed": 1, "points": [[20, first], [40, last]]}
                      for row, (first, last) in (("mlm", (9.0, 8.0)), ("fe_subword", (8.5, 7.5)))]
    assert "| 40 | 8.000 | 7.500 | -0.500 (1 seeds) |" in science_results.summarize(data)


def test_bad_arguments_are_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        gpu_science.main(["--data", str(tmp_path), "--work", str(tmp_path), "--out", str(tmp_path / "o"),
                          "--only", "selective,nope"])
    assert "unknown experiment(s) nope" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no such file"):
        gpu_science.main(["--data", str(tmp_path), "--work", str(tmp_path / "w"), "--out", str(tmp_path / "o")])


def test_a_work_folder_holding_other_data_is_refused_before_any_job(tmp_path, capsys):
    """The lent machine's second command found the first one's work folder (smoke-sized data) and
    trained nothing: a work folder whose data is not --data's stops the command at once."""
    for name, sentences in (("data", 40000), ("old", 3000)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(json.dumps({"settings": {"general_sentences": sentences}}))
    (tmp_path / "work" / "base").mkdir(parents=True)
    (tmp_path / "old").rename(tmp_path / "work" / "base" / "data")
    with pytest.raises(SystemExit, match="holds an earlier run's data, not --data"):
        gpu_science.main(["--data", str(tmp_path / "data"), "--work", str(tmp_path / "work"),
                          "--out", str(tmp_path / "science.json"), "--only", "fe"])
    assert not (tmp_path / "work" / "base" / "logs").exists()


def test_install_unpacks_fairseq_for_a_parallel_build_and_hides_ninja(tmp_path):
    source = tmp_path / "pkg-1.0"
    source.mkdir()
    (source / "setup.cfg").write_text("[metadata]\nname = pkg\n")
    archive = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname="pkg-1.0")
    unpacked = offline_install.parallel_source(archive, tmp_path / "build", 6)
    assert (unpacked / "setup.cfg").read_text().endswith("[build_ext]\nparallel = 6\n")
    env = offline_install.without_ninja({"PATH": os.environ["PATH"]}, tmp_path / "build")
    found = subprocess.run(["ninja", "--version"], env=env, capture_output=True)
    assert found.returncode != 0  # torch's is_ninja_available() runs this command
    with pytest.raises(SystemExit, match="--build-jobs must be at least 1"):
        offline_install.parallel_source(archive, tmp_path / "again", 0)


@pytest.mark.e2e
@pytest.mark.full
def test_two_c_extensions_build_side_by_side_with_torchs_build_extension(tmp_path):
    """What install.py does to fairseq-fixed, on a package of two C extensions built with torch's
    BuildExtension (fairseq's cmdclass): both are built, side by side, without ninja."""
    source = tmp_path / "twoext-1.0"
    source.mkdir()
    for name in ("one", "two"):
        (source / f"{name}.c").write_text(
            '#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "%s", NULL, -1, NULL};\n'
            "PyMODINIT_FUNC PyInit_%s(void) { return PyModule_Create(&m); }\n" % (name, name))
    (source / "setup.py").write_text(
        "from setuptools import Extension, setup\nfrom torch.utils import cpp_extension\n"
        "setup(name='twoext', version='1.0', ext_modules=[Extension('one', ['one.c']), Extension('two', ['two.c'])],"
        " cmdclass={'build_ext': cpp_extension.BuildExtension})\n")
    archive = tmp_path / "twoext-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname="twoext-1.0")
    unpacked = offline_install.parallel_source(archive, tmp_path / "build", 2)
    env = offline_install.without_ninja(dict(os.environ), tmp_path / "build")
    result = check(subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=unpacked, env=env,
                                  capture_output=True, text=True))
    assert sorted(p.name.split(".")[0] for p in unpacked.glob("*.so")) == ["one", "two"]
    assert "ninja" not in result.stdout.lower().replace("falling back", "")  # the compiler backend built them


@pytest.mark.e2e
@pytest.mark.full
def test_the_science_command_runs_at_toy_size_and_keeps_every_finished_row(tmp_path):
    """The CPU run of the device command: toy data and model, the general model trained, then FE-MLM's plan by the
    compare command for one seed, its four arms (their loss curves and MR rows; two seeds took 206 s of the full
    tier, the report's reading over seeds is the compare command's own test), its report stored and summarized."""
    from release_helpers import fake_demo_sources

    data = tmp_path / "data"
    fake_demo_sources(tmp_path / "downloads", mr=400, reviews=100)
    check(subprocess.run([sys.executable, "-m", "preprocess.prepare_demo", "--out", data, "--cache",
                          tmp_path / "downloads", "--general-sentences", "300", "--indomain-sentences", "400",
                          "--vocab-size", "100"], cwd=REPO, capture_output=True, text=True))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "benchmarks/gpu_science.py", "--data", data, "--work", tmp_path / "w",
                             "--out", out, "--shape", "tiny", "--seeds", "1", "--only", "fe",
                             "--parallel", "2", "--budget", "1200"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    fe = json.loads((out / "fe.json").read_text())
    assert fe["meta"]["kind"] == "comparison" and fe["meta"]["harness"]["shape"] == "tiny"
    assert fe["meta"]["harness"]["command"][:2] == ["python", "benchmarks/gpu_science.py"]
    tested = {(s["row"], s["seed"]) for s in fe["scores"] if s["split"] == "test"}
    units = {(arm, 1) for arm in ("mlm", "fe_subword", "mlm_span", "fe_span")}  # the plan's four arms, one seed
    assert tested == units  # MR fine-tuning
    assert all(len(s["correct"]) == s["n"] for s in fe["scores"])
    assert {(c["row"], c["seed"]) for c in fe["curves"]} == units
    assert "| fe_subword − mlm | 1 × " in result.stdout  # the paired table of the MR rows (not read: one seed)
    assert (out / "summary.md").read_text().strip() in result.stdout
    assert re.fullmatch(r"ratio_fe_test_accuracy=\d+\.\d{4} ratio_fe_valid_loss=\d+\.\d{4}",
                        result.stdout.strip().splitlines()[-1])


def test_the_harness_smoke_finds_the_planted_difference_over_five_seeds(tmp_path):
    """--smoke (quick tier, seconds): five toy replicates, each a process, read as a plan's report: the per-arm
    table, the paired intervals over seeds and over seeds x items, the verdict and the ratio line. The toy rows
    differ by about 16 points by construction (benchmarks/science_toy.py), so both intervals exclude zero and the
    reading is "A better"."""
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "benchmarks/gpu_science.py", "--smoke", "--work", tmp_path / "w",
                             "--out", out], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "smoke run (--smoke)" in result.stdout
    toy = json.loads((out / "toy.json").read_text())
    cells = {(s["row"], s["seed"], s["split"]) for s in toy["scores"]}
    assert cells == {(r, seed, split) for r in ("method", "baseline") for seed in range(1, 6)
                     for split in ("valid", "test")}
    assert all(len(s["correct"]) == s["n"] == 400 for s in toy["scores"])
    line = next(l for l in result.stdout.splitlines() if l.startswith("| method − baseline | 5 × 400 |"))
    (low, high), (crossed_low, crossed_high) = [(float(a), float(b)) for a, b in
                                                re.findall(r"\[([-+\d.]+), ([-+\d.]+)\]", line)]
    assert 5 < low < high < 30 and 5 < crossed_low < crossed_high < 30 and "| A better |" in line
    assert "- method − baseline (test): A better, by +1" in result.stdout
    assert "| method | 5 | - | 2 of 2 | - | ok |" in result.stdout  # each seed's health, as a unit's
    ratio = float(re.fullmatch(r"ratio_toy_test_accuracy=(\d+\.\d{4})", result.stdout.strip().splitlines()[-1])[1])
    assert 1.1 < ratio < 1.4  # Bayes rates 89% and 73%: about 1.22


def test_a_results_file_names_paths_inside_the_repository_relative_to_it():
    """The command a results file records names no machine's folders: paths inside the clone become relative."""
    assert gpu_science.repository_relative(str(REPO / "work" / "data")) == "work/data"
    assert gpu_science.repository_relative(str(REPO)) == "."
    assert gpu_science.repository_relative("/elsewhere/data") == "/elsewhere/data"
    assert gpu_science.repository_relative("quickstart") == "quickstart"  # not a path: as given


@pytest.mark.parametrize("exp", sorted(gpu_science.PLANS))
def test_each_experiment_runs_its_paper_s_plan_on_the_run_s_data_and_model(exp, tmp_path):
    """The harness is a caller of fairseq-maskplug-compare: each experiment's command reads its plan in
    recipes/compare_plans/ with the run's data, general model and output folder set, at the quickstart shape
    nothing else changed (the plan's own settings are the stored runs', tests/test_compare_command.py)."""
    from types import SimpleNamespace

    from fairseq_maskplug.compare.plan import parse_setting, read_plan

    args = SimpleNamespace(seeds=["1", "2"], parallel=3, shape="quickstart")
    command = gpu_science.plan_command(args, exp, tmp_path / "base", tmp_path)
    assert command[:4] == [sys.executable, "-m", "fairseq_maskplug.compare.cli", f"recipes/compare_plans/{exp}.toml"]
    assert command[4:9] == ["--seeds", "1", "2", "--parallel", "3"]
    settings = [parse_setting(word, tmp_path) for flag, word in zip(command[9::2], command[10::2]) if flag == "--set"]
    plan = read_plan(REPO / command[3], {"seeds": [1, 2]}, [(key, value) for key, value, _ in settings])
    data = tmp_path / "base" / ("bart/data" if exp == "bart" else "data")
    assert plan.out == tmp_path / exp and plan.labelled == data / ("probe" if exp == "bart" else "mr")
    assert plan.model.parent.parent == data.parent and plan.model.name == "checkpoint_last.pt"
    assert plan.corpus == (None if exp == "tlm" else data / ("news" if exp == "bart" else "indomain"))
    assert {key.split(".")[0] for key, _, _ in settings} == {"out", "data", "model"}  # nothing else at quickstart
    if exp == "fe":  # the toy smoke's shape: short runs of 64-token blocks, scored every 20 updates
        args.shape = "tiny"
        command = gpu_science.plan_command(args, exp, tmp_path / "base", tmp_path)
        settings = [parse_setting(word, tmp_path) for flag, word in zip(command[9::2], command[10::2]) if flag == "--set"]
        tiny = read_plan(REPO / command[3], None, [(key, value) for key, value, _ in settings])
        assert (tiny.pretrain.updates, tiny.pretrain.score_every, tiny.pretrain.tokens_per_sample,
                tiny.finetune.epochs) == (40, 20, 64, 1)
