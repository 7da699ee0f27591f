"""The seeded comparisons of benchmarks/gpu_science.py: its statistics against scipy's, what it
collects from the recipes' output files, its tables; the parallel fairseq-fixed build of
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
from scipy import stats as scipy_stats

from fairseq_helpers import REPO, check
from recipes import offline_install

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_science  # noqa: E402
import science_stats as stats  # noqa: E402


@pytest.mark.parametrize("t, df", [(2.776445, 4), (4.302653, 2), (12.7062, 1), (0.3, 7), (-1.5, 3), (8.0, 30),
                                   (1.959964, 100000)])
def test_student_t_two_sided_p_is_scipys(t, df):
    assert stats.student_t_sf2(t, df) == pytest.approx(2 * scipy_stats.t.sf(abs(t), df), rel=1e-7, abs=1e-12)


@pytest.mark.parametrize("b, c", [(0, 0), (5, 0), (30, 10), (12, 15), (100, 131)])
def test_mcnemar_is_the_exact_binomial_test_of_the_discordant_pairs(b, c):
    # A right where B is wrong (b times), the reverse (c times), both right, both wrong
    correct_a = "1" * b + "0" * c + "1" * 7 + "0" * 3
    correct_b = "0" * b + "1" * c + "1" * 7 + "0" * 3
    result = stats.mcnemar(correct_a, correct_b)
    assert (result["a_only"], result["b_only"], result["pairs"]) == (b, c, b + c + 10)
    expected = 1.0 if b + c == 0 else scipy_stats.binomtest(b, b + c, 0.5).pvalue
    assert result["p"] == pytest.approx(expected, rel=1e-9)


def test_what_a_difference_would_need_to_be_significant():
    # 30 against 10 of 40 pairs: z = 20 / sqrt(40) = 3.16; with the same shares, z = 1.96 at
    # n = 1.96^2 * (40/40) / (20/40)^2 = 15.4 pairs -> 16
    assert stats.sentences_needed(30, 10, 40) == 16
    assert stats.sentences_needed(5, 5, 40) is None
    # seeds: mean difference 1 with spread 2 -> (1.96 * 2 / 1)^2 = 15.4 -> 16
    assert stats.seeds_needed(1.0, 2.0) == 16
    test = stats.paired_over_seeds({1: 80.0, 2: 82.0, 3: 81.0}, {1: 79.0, 2: 80.0, 3: 81.0, 4: 50.0})
    assert test["seeds"] == 3 and test["difference"] == pytest.approx(1.0)
    assert test["p"] == pytest.approx(scipy_stats.ttest_rel([80, 82, 81], [79, 80, 81]).pvalue, rel=1e-7)


def test_intervals_and_detectable_differences():
    low, high = stats.t_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    expected = scipy_stats.t.interval(0.95, 4, loc=3.0, scale=scipy_stats.sem([1, 2, 3, 4, 5]))
    assert (low, high) == pytest.approx(expected, rel=1e-7)
    assert stats.student_t_quantile(0.8, 4) == pytest.approx(scipy_stats.t.ppf(0.8, 4), rel=1e-7)
    # paired t at 80% power: (t_.975 + t_.80) sd / sqrt(S), the usual approximation
    assert stats.detectable_over_seeds(2.0, 5) == pytest.approx(
        (scipy_stats.t.ppf(0.975, 4) + scipy_stats.t.ppf(0.8, 4)) * 2.0 / math.sqrt(5), rel=1e-7)
    assert stats.detectable_over_sentences(0.1, 2000) == pytest.approx((1.959964 + 0.841621) * math.sqrt(0.1 / 2000),
                                                                     rel=1e-5)
    assert math.isnan(stats.detectable_over_seeds(0.0, 5)) and math.isnan(stats.detectable_over_sentences(0.0, 9))


def test_the_paired_bootstrap_covers_a_planted_difference_and_excludes_zero():
    """Two rows over 5 seeds x 400 sentences, A right on 10 points more of them: the interval holds
    10 and excludes 0; with the rows swapped it mirrors; equal rows give an interval of zero width."""
    import random
    rng = random.Random(3)
    a, b = {}, {}
    for seed in range(5):
        truth = [rng.random() for _ in range(400)]
        a[seed] = "".join("1" if t < 0.80 else "0" for t in truth)
        b[seed] = "".join("1" if t < 0.70 else "0" for t in truth)
    low, high = stats.paired_bootstrap(a, b, resamples=500)
    assert 0 < low < 10 < high < 20
    swapped = stats.paired_bootstrap(b, a, resamples=500)
    assert swapped == pytest.approx((-high, -low), abs=1.0)
    assert stats.paired_bootstrap(a, a, resamples=50) == (0.0, 0.0)


def test_mean_and_standard_error():
    assert stats.mean_se([1.0, 2.0, 3.0]) == pytest.approx((2.0, 1.0 / math.sqrt(3)))
    mean, se = stats.mean_se([4.0])
    assert mean == 4.0 and math.isnan(se)
    with pytest.raises(ValueError):
        stats.mean_se([])


def recipe_outputs(work: Path, seed: int, rows: dict) -> None:
    """What recipes/selective_masking.sh writes per fine-tuning: results/ROW__seedS.{valid,test}.json."""
    results = work / "selective" / "results"
    results.mkdir(parents=True, exist_ok=True)
    for row, correct in rows.items():
        for split in ("valid", "test"):
            accuracy = 100.0 * correct.count("1") / len(correct)
            (results / f"{row}__seed{seed}.{split}.json").write_text(json.dumps(
                {"split": split, "n": len(correct), "accuracy": accuracy, "macro_f1": accuracy - 1,
                 "units": "percent", "classes_predicted": 2, "correct": correct}))


def test_collect_adds_each_finished_score_once_and_the_summary_pairs_them(tmp_path):
    results = gpu_science.Results(tmp_path / "science.json", {"device": "CPU", "shape": "tiny", "seeds": ["1", "2"]})
    outcomes = {1: {"selective": "1111111100", "matched-random": "1111110000", "no-TaskPT": "1111000000"},
                2: {"selective": "1111111110", "matched-random": "1111111000", "no-TaskPT": "1111100000"}}
    jobs = []
    for seed, rows in outcomes.items():
        work = tmp_path / f"selective_seed{seed}"
        recipe_outputs(work, seed, rows)
        jobs.append({"experiment": "selective", "seed": str(seed), "work": work, "started": 0.0})
    assert sum(gpu_science.collect(job, results) for job in jobs) == 12  # 3 rows x 2 splits x 2 seeds
    assert sum(gpu_science.collect(job, results) for job in jobs) == 0  # nothing twice
    results.write()
    data = json.loads((tmp_path / "science.json").read_text())
    assert {(s["row"], s["seed"], s["split"]) for s in data["scores"]} == {
        (row, seed, split) for seed in (1, 2) for row in outcomes[1] for split in ("valid", "test")}
    table = gpu_science.summarize(data)
    # selective: 80 and 90 -> 85 +- 5; the pair selective - matched-random: differences 20 and 20
    assert "| selective | 2 | 85.0 ± 5.0 |" in table
    interval, line = [l for l in table.splitlines() if l.startswith("| selective − matched-random |")]
    # differences 20 and 20 points: no spread over seeds, so no t interval width and no detectable size
    assert "| 2 | 20.00 ± 0.00 | [+20.00, +20.00] |" in interval and interval.endswith("| A better |")
    # McNemar over both seeds' 20 pairs: selective alone right 4 times, matched-random never
    assert "| 4 / 0 |" in line
    assert f"| {stats.mcnemar('1111111100' + '1111111110', '1111110000' + '1111111000')['p']:.3f} |" in line


def test_bart_exact_match_is_read_per_question_set_and_compared_on_each(tmp_path):
    """recipes/probe_em.py's files (EM and one 0/1 per question on the seen and held-out questions) become
    one score per question set, and the summary compares SSM with +Rand on each, seen first."""
    results = gpu_science.Results(tmp_path / "science.json", {"device": "CPU", "shape": "quickstart", "seeds": ["1", "2"]})
    outcomes = {1: {"ssm": ("1110", "1000"), "rand": ("1000", "1000")},
                2: {"ssm": ("1100", "1100"), "rand": ("0000", "1000")}}
    jobs = []
    for seed, rows in outcomes.items():
        work = tmp_path / f"bart_seed{seed}"
        (work / "bart" / "results").mkdir(parents=True)
        for row, (seen, heldout) in rows.items():
            (work / "bart" / "results" / f"{row}__seed{seed}.json").write_text(json.dumps(
                {"seen": 25.0 * seen.count("1"), "heldout": 25.0 * heldout.count("1"), "n_seen": 4, "n_heldout": 4,
                 "correct_seen": seen, "correct_heldout": heldout}))
        (work / "bart" / "results" / "masks.json").write_text("{}")  # the recipe's mask analysis: not a score
        jobs.append({"experiment": "bart", "seed": str(seed), "work": work, "started": 0.0})
    assert sum(gpu_science.collect(job, results) for job in jobs) == 8  # 2 rows x 2 question sets x 2 seeds
    table = gpu_science.summarize(results.data)
    assert "| ssm | 2 | 62.5 ± 12.5 | 37.5 ± 12.5 |" in table  # seen 75 and 50, held-out 25 and 50
    seen = next(l for l in table.splitlines() if l.startswith("| ssm − rand | 2 | 50.00 ± 0.00 |"))
    assert seen.endswith("| A better |")  # +50 points in both seeds, 4 of 4 discordant questions for ssm
    heldout = next(l for l in table.splitlines() if l.startswith("| ssm − rand | 2 | 12.50 ± 12.50 |"))
    assert "no difference shown" in heldout
    assert table.index("(EM on seen questions, points)") < table.index("(EM on held-out questions, points)")
    assert gpu_science.ratio_line(results.data) == f"ratio_bart_em_seen={62.5 / 12.5:.4f}"


def test_fe_curves_are_read_from_the_scored_checkpoints(tmp_path):
    work = tmp_path / "fe_seed1"
    (work / "fe_mlm").mkdir(parents=True)
    (work / ".done").mkdir()
    for row, losses in (("mlm", (9.0, 8.0)), ("fe_subword", (8.5, 7.5))):
        # fairseq_maskplug.evaluation.evaluate_mlm's records, one per checkpoint
        (work / "fe_mlm" / f"valid_loss_{row}.jsonl").write_text("".join(
            json.dumps({"checkpoint": f"checkpoint_{i}_{u}.pt", "updates": u, "loss": loss, "masked": 100}) + "\n"
            for i, (u, loss) in enumerate(zip((20, 40), losses), 1)))
    results = gpu_science.Results(tmp_path / "science.json", {})
    job = {"experiment": "fe", "seed": "1", "work": work, "started": 0.0}
    assert gpu_science.collect(job, results) == 0  # not scored yet: the recipe's stage marker is missing
    (work / ".done" / "fe_mlm_score_mlm").touch()
    (work / ".done" / "fe_mlm_score_fe_subword").touch()
    assert gpu_science.collect(job, results) == 2
    assert results.data["curves"][0]["points"] == [[20, 9.0], [40, 8.0]]
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
    assert "| fe_subword − mlm | 2 |" in result.stdout  # the paired table of the MR rows
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
    line = next(l for l in result.stdout.splitlines() if l.startswith("| method − baseline | 5 |"))
    low, high = (float(x) for x in re.search(r"\[([-+\d.]+), ([-+\d.]+)\]", line).groups())
    assert 5 < low < high < 30 and line.rstrip().endswith("| A better |")
    ratio = float(re.fullmatch(r"ratio_toy_accuracy=(\d+\.\d{4})", result.stdout.strip().splitlines()[-1]).group(1))
    assert 1.1 < ratio < 1.4  # Bayes rates 89% and 73%: about 1.22
