"""The seeded comparisons of benchmarks/gpu_science.py: what it collects from the plans' units, its
tables (the analysis itself: tests/test_paired_comparison.py); the parallel fairseq-fixed build of
install.py; and (full tier) the whole command at toy size on CPU, its smoke."""

import json
import math
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from fairseq_helpers import REPO, check
from recipes import offline_install

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_science  # noqa: E402


def test_mean_and_standard_error():
    assert gpu_science.mean_se([1.0, 2.0, 3.0]) == pytest.approx((2.0, 1.0 / math.sqrt(3)))
    mean, se = gpu_science.mean_se([4.0])
    assert mean == 4.0 and math.isnan(se)
    with pytest.raises(ValueError):
        gpu_science.mean_se([])


def unit_results(out: Path, seed: int, rows: dict, splits=("valid", "test")) -> None:
    """What fairseq-maskplug-compare's units write: OUT/units/ARM__seedS/result.SPLIT.json
    (fairseq-maskplug-evaluate's records, or recipes/probe_em.py --split-output's)."""
    for row, correct in rows.items():
        unit = out / "units" / f"{row}__seed{seed}"
        unit.mkdir(parents=True, exist_ok=True)
        for split, outcomes in zip(splits, correct if isinstance(correct, tuple) else (correct,) * len(splits)):
            accuracy = 100.0 * outcomes.count("1") / len(outcomes)
            (unit / f"result.{split}.json").write_text(json.dumps(
                {"split": split, "n": len(outcomes), "accuracy": accuracy, "macro_f1": accuracy - 1,
                 "units": "percent", "classes_predicted": 2, "correct": outcomes}))


def test_collect_adds_each_finished_score_once_and_the_summary_pairs_them(tmp_path):
    results = gpu_science.Results(tmp_path / "science.json", {"device": "CPU", "shape": "tiny", "seeds": ["1", "2"]})
    outcomes = {1: {"selective": "1111111100", "matched-random": "1111110000", "no-TaskPT": "1111000000"},
                2: {"selective": "1111111110", "matched-random": "1111111000", "no-TaskPT": "1111100000"}}
    job = {"experiment": "selective", "seed": None, "work": tmp_path / "selective", "started": 0.0}
    unit_results(job["work"], 1, outcomes[1])
    assert gpu_science.collect(job, results) == 6  # seed 1's units: 3 rows x 2 splits
    unit_results(job["work"], 2, outcomes[2])
    assert gpu_science.collect(job, results) == 6  # then seed 2's, as they land
    assert gpu_science.collect(job, results) == 0  # nothing twice
    results.write()
    data = json.loads((tmp_path / "science.json").read_text())
    assert {(s["row"], s["seed"], s["split"]) for s in data["scores"]} == {
        (row, seed, split) for seed in (1, 2) for row in outcomes[1] for split in ("valid", "test")}
    table = gpu_science.summarize(data)
    # selective: 80 and 90 -> 85 +- 5; the pair selective - matched-random: differences 20 and 20
    assert "| selective | 2 | 85.0 ± 5.0 |" in table
    interval, line = [l for l in table.splitlines() if l.startswith("| selective − matched-random |")]
    # differences 20 and 20 points: no spread over seeds, so the interval over seeds (these 10 sentences) is a
    # point; but 10 sentences say little of the task: the crossed interval holds 0, and no direction is named
    assert "| 2 × 10 | 20.00 ± 0.00 | [+20.00, +20.00] | [-5.01, +45.01] | no difference shown |" in interval
    # the pooled discordant pairs are a description: selective alone right 4 times, matched-random never
    assert line.endswith("| 4 / 0 |") and "the larger), Holm over 3 |" in table
    # each row's rule p (the larger of the two) against its Holm adjustment over the experiment's three comparisons
    found = gpu_science.comparisons("selective", {row: {(s["split"], s["seed"]): s for s in data["scores"]
                                                        if s["row"] == row} for row in outcomes[1]})
    assert [c.adjusted_p for c in found] == pytest.approx(
        __import__("fairseq_maskplug.evaluation.paired_comparison", fromlist=["adjusted"]).adjusted(
            [max(c.p, c.crossed_p) for c in found]), nan_ok=True)
    assert "selective − matched-random (test): no difference shown (Holm p" in table


def test_bart_exact_match_is_read_per_question_set_and_compared_on_each(tmp_path):
    """The BART plan's units (EM and one 0/1 per question on the seen and held-out questions, one result per
    question set) become one score per question set, and the summary compares SSM with +Rand on each, seen first."""
    results = gpu_science.Results(tmp_path / "science.json", {"device": "CPU", "shape": "quickstart", "seeds": ["1", "2"]})
    outcomes = {1: {"ssm": ("1110", "1000"), "rand": ("1000", "1000")},
                2: {"ssm": ("1100", "1100"), "rand": ("0000", "1000")}}
    job = {"experiment": "bart", "seed": None, "work": tmp_path / "bart", "started": 0.0}
    for seed, rows in outcomes.items():
        unit_results(job["work"], seed, rows, splits=("seen", "heldout"))
    assert gpu_science.collect(job, results) == 8  # 2 rows x 2 question sets x 2 seeds
    table = gpu_science.summarize(results.data)
    assert "| ssm | 2 | 62.5 ± 12.5 | 37.5 ± 12.5 |" in table  # seen 75 and 50, held-out 25 and 50
    seen = next(l for l in table.splitlines() if l.startswith("| ssm − rand | 2 × 4 | 50.00 ± 0.00 |"))
    # +50 points in both seeds on these 4 questions; 4 questions say little of the task (the crossed interval)
    assert "| [+50.00, +50.00] | [-14.96, +114.96] | no difference shown |" in seen
    heldout = next(l for l in table.splitlines() if l.startswith("| ssm − rand | 2 × 4 | 12.50 ± 12.50 |"))
    assert "| no difference shown |" in heldout
    assert table.index("(EM on seen questions, points)") < table.index("(EM on held-out questions, points)")
    assert gpu_science.ratio_line(results.data) == f"ratio_bart_em_seen={62.5 / 12.5:.4f}"


def test_fe_curves_are_read_from_the_scored_checkpoints(tmp_path):
    job = {"experiment": "fe", "seed": None, "work": tmp_path / "fe", "started": 0.0}
    for row, losses in (("mlm", (9.0, 8.0)), ("fe_subword", (8.5, 7.5))):
        (job["work"] / "units" / f"{row}__seed1").mkdir(parents=True)
    results = gpu_science.Results(tmp_path / "science.json", {})
    assert gpu_science.collect(job, results) == 0  # not scored yet: no curve.jsonl
    for row, losses in (("mlm", (9.0, 8.0)), ("fe_subword", (8.5, 7.5))):
        # fairseq_maskplug.evaluation.evaluate_mlm's records, one per checkpoint (the plan's [pretrain] score_every)
        (job["work"] / "units" / f"{row}__seed1" / "curve.jsonl").write_text("".join(
            json.dumps({"checkpoint": f"checkpoint_{i}_{u}.pt", "updates": u, "loss": loss, "masked": 100}) + "\n"
            for i, (u, loss) in enumerate(zip((20, 40), losses), 1)))
    assert gpu_science.collect(job, results) == 2
    assert next(c for c in results.data["curves"] if c["row"] == "mlm")["points"] == [[20, 9.0], [40, 8.0]]
    assert "| 40 | 8.000 | 7.500 | -0.500 (1 seeds) |" in gpu_science.summarize(results.data)


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
    assert not (tmp_path / "work" / "logs" / "general.log").exists()


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
    """The CPU smoke of the device command: toy data and model, two seeds, FE-MLM (its loss curves and its MR
    rows: both kinds of cell, both kinds of table; about 3 minutes on 2 cores)."""
    from release_helpers import fake_demo_sources

    data = tmp_path / "data"
    fake_demo_sources(tmp_path / "downloads", mr=400, reviews=100)
    check(subprocess.run([sys.executable, "-m", "preprocess.prepare_demo", "--out", data, "--cache",
                          tmp_path / "downloads", "--general-sentences", "300", "--indomain-sentences", "400",
                          "--vocab-size", "100"], cwd=REPO, capture_output=True, text=True))
    out = tmp_path / "science.json"
    result = subprocess.run([sys.executable, "benchmarks/gpu_science.py", "--data", data, "--work", tmp_path / "w",
                             "--out", out, "--shape", "tiny", "--seeds", "1", "2", "--only", "fe",
                             "--parallel", "2", "--budget", "1200"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    science = json.loads(out.read_text())
    tested = {(s["experiment"], s["row"], s["seed"]) for s in science["scores"] if s["split"] == "test"}
    assert tested == {("fe", row, seed) for row in ("mlm", "fe_subword") for seed in (1, 2)}  # MR fine-tuning
    assert all(len(s["correct"]) == s["n"] for s in science["scores"])
    assert {(c["row"], c["seed"]) for c in science["curves"]} == {(r, s) for r in ("mlm", "fe_subword") for s in (1, 2)}
    assert "| fe_subword − mlm | 2 × " in result.stdout  # the paired table of the MR rows
    assert all(job["status"] == "finished" for job in science["jobs"].values())
    assert re.fullmatch(r"ratio_fe_valid_loss=\d+\.\d{4}",
                        result.stdout.strip().splitlines()[-1])


def test_the_harness_smoke_finds_the_planted_difference_over_five_seeds(tmp_path):
    """--smoke (quick tier, seconds): five toy replicates as processes of the scheduler, their results
    collected into the JSON file, the per-row table, the paired intervals over seeds and over seeds x
    sentences, and the ratio line. The toy rows differ by about 16 points by construction
    (benchmarks/science_toy.py), so both intervals exclude zero and the reading is "A better"."""
    out = tmp_path / "science.json"
    result = subprocess.run([sys.executable, "benchmarks/gpu_science.py", "--smoke", "--work", tmp_path / "w",
                             "--out", out], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "smoke run (--smoke)" in result.stdout
    science = json.loads(out.read_text())
    cells = {(s["row"], s["seed"], s["split"]) for s in science["scores"]}
    assert cells == {(r, seed, split) for r in ("method", "baseline") for seed in range(1, 6)
                     for split in ("valid", "test")}
    assert all(len(s["correct"]) == s["n"] == 400 for s in science["scores"])
    line = next(l for l in result.stdout.splitlines() if l.startswith("| method − baseline | 5 × 400 |"))
    (low, high), (crossed_low, crossed_high) = [(float(a), float(b)) for a, b in
                                                re.findall(r"\[([-+\d.]+), ([-+\d.]+)\]", line)]
    assert 5 < low < high < 30 and 5 < crossed_low < crossed_high < 30 and "| A better |" in line
    ratio = float(re.fullmatch(r"ratio_toy_accuracy=(\d+\.\d{4})", result.stdout.strip().splitlines()[-1]).group(1))
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
