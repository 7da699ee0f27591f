"""Mutation testing of the comparisons' statistics (issue 86): each mutation below (the audit's 15 kinds and more)
is applied to a copy of the package, and the known-answer tests (tests/test_reading_rule.py and
tests/test_paired_comparison.py, neither of which reads docs/) must fail on it. The unmutated copy must pass
first, and must be the copy imported. Full tier: about 5 to 15 s a mutation (each run imports scipy and statsmodels).

Run by hand: ``python -m pytest tests/test_statistics_mutations.py -m full -v``.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.full

ROOT = Path(__file__).resolve().parents[1]
TESTS = ("test_reading_rule.py", "test_paired_comparison.py")
PC = "fairseq_maskplug/evaluation/paired_comparison.py"
RULE = "fairseq_maskplug/evaluation/reading_rule.py"

#: (name, file, the source text, what it becomes)
MUTATIONS = [
    ("seed interval: df S instead of S - 1", PC,
     "float(means.var(ddof=1)) / means.size, means.size - 1, alpha)", "float(means.var(ddof=1)) / means.size, means.size, alpha)"),
    ("seed interval: population variance", PC,
     "float(means.var(ddof=1)) / means.size, means.size - 1, alpha)", "float(means.var(ddof=0)) / means.size, means.size - 1, alpha)"),
    ("seed p halved", PC, "return float(stats.ttest_1samp(means, 0.0).pvalue)",
     "return float(stats.ttest_1samp(means, 0.0).pvalue) / 2"),
    ("Holm misaligned with its comparisons", PC, "for i, p in zip(present, corrected):",
     "for i, p in zip(present[1:] + present[:1], corrected):"),
    ("BH for Holm", PC, "alpha=ALPHA, method=method)[1]", "alpha=ALPHA, method=\"fdr_bh\")[1]"),
    ("crossed df capped at the items' N - 1", PC, "np.minimum(df, s - 1)", "np.minimum(df, n - 1)"),
    ("crossed df never capped", PC, "np.minimum(df, s - 1)", "df"),
    ("broken pairing: B's seeds in their given order", PC,
     "x, y = (np.array([float(c) for c in side[seed]]) for side in (a, b))",
     "x, y = np.array([float(c) for c in a[seed]]), np.array([float(c) for c in list(b.values())[seeds.index(seed)]])"),
    ("seed mean square over S", PC, "n * ((seed_means - grand) ** 2).sum() / (s - 1)",
     "n * ((seed_means - grand) ** 2).sum() / s"),
    ("item mean square times N", PC, "s * ((item_means - grand) ** 2).sum() / (n - 1)",
     "n * ((item_means - grand) ** 2).sum() / (n - 1)"),
    ("residual mean square over S N", PC, "(residual ** 2).sum() / ((s - 1) * (n - 1))", "(residual ** 2).sum() / (s * n)"),
    ("components not clamped at 0", PC, "max(0.0, (self.seed - self.residual) / self.items)",
     "(self.seed - self.residual) / self.items"),
    ("crossed variance over S only", PC, "total / (s * n), 0.0)", "total / s, 0.0)"),
    ("a 90% interval", PC, "stats.t.ppf(1 - alpha / 2, df)", "stats.t.ppf(1 - alpha, df)"),
    ("either interval instead of both", PC, "if all(low > 0 for low, _ in intervals):",
     "if any(low > 0 for low, _ in intervals):"),
    ("the rule's p the smaller of the two", PC, "return max(seed_p(d), crossed_p(d, cap))",
     "return min(seed_p(d), crossed_p(d, cap))"),
    ("one-sided crossed p", PC, "p = 2.0 * stats.t.sf(", "p = stats.t.sf("),
    ("power at 0.05 whatever the family", PC, "    return alpha / family", "    return alpha"),
    ("simulated seed mean square without its N", PC, "(se + items * su) * rng.chisquare", "(se + su) * rng.chisquare"),
    ("seed standard error with the population variance", PC,
     "seed_se = float(seed_means.std(ddof=1) / math.sqrt(seeds))", "seed_se = float(seed_means.std(ddof=0) / math.sqrt(seeds))"),
    ("discordant counts swapped", PC, "return int((d > 0).sum()), int((d < 0).sum())",
     "return int((d < 0).sum()), int((d > 0).sum())"),
    ("the seeds' upper bound at the chi-square's upper quantile", PC, "stats.chi2.ppf(1 - confidence, df)",
     "stats.chi2.ppf(confidence, df)"),
    ("the seeds' upper bound keeps the residual in", PC, "return max(su, (bound - se) / items), sv, se",
     "return max(su, bound / items), sv, se"),
    ("power figures for a family of 1", RULE, "c.detectable = pc.detectable(c.components, c.seeds, c.items, sims=sims, "
     "family=max(size, 1))", "c.detectable = pc.detectable(c.components, c.seeds, c.items, sims=sims, family=1)"),
    ("the split dropped from the comparison key", PC, "repr((split, d.shape))", "repr(d.shape)"),
    ("identical comparisons counted twice", RULE, "first.setdefault(c.key, c)",
     "first.setdefault(c.key + c.name + c.split, c)"),
    ("a direction named on the unadjusted p", RULE, "for c, p in zip(comparisons, out_p)]",
     "for c, p in zip(comparisons, map(p_of, comparisons))]"),
    ("across runs: a comparison held by two runs counted twice", RULE, "first.setdefault(c.key, c.rule_p)",
     "first.setdefault(c.key + str(id(found)), c.rule_p)"),
    ("across runs: each run's own Holm p kept", RULE, "return [(run, c, adjusted.get(c.key, math.nan))",
     "return [(run, c, c.adjusted_p)"),
]


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """The package and the known-answer tests copied to a folder of their own (and pytest.ini beside them)."""
    root = tmp_path_factory.mktemp("mutations")
    shutil.copytree(ROOT / "fairseq_maskplug", root / "fairseq_maskplug",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in TESTS:
        shutil.copy(ROOT / "tests" / name, root / name)
    (root / "pytest.ini").write_text((ROOT / "pytest.ini").read_text().replace("testpaths = tests\n", ""))
    return root


def run_tests(root: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           *TESTS], cwd=root, env=env, capture_output=True, text=True, timeout=900)


def test_the_unmutated_copy_passes_and_is_the_one_imported(copy):
    env = dict(os.environ, PYTHONPATH=str(copy))
    where = subprocess.run([sys.executable, "-c", "import fairseq_maskplug; print(fairseq_maskplug.__file__)"],
                           cwd=copy, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert where.startswith(str(copy)), where
    result = run_tests(copy)
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.parametrize("name,path,old,new", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_each_mutation_of_the_statistics_fails_a_known_answer_test(copy, name, path, old, new):
    source = (copy / path).read_text()
    assert source.count(old) == 1, f"{name}: the text to mutate is no longer in {path} once"
    try:
        (copy / path).write_text(source.replace(old, new))
        result = run_tests(copy)
    finally:
        (copy / path).write_text(source)
    assert result.returncode == 1, f"{name}: no test failed (exit {result.returncode})\n{result.stdout[-2000:]}"
