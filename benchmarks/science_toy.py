"""The toy replicate of ``gpu_science.py --smoke``: two real (tiny) classifiers with a planted difference,
whose results are read as a plan's report (:func:`report`), so the statistics and tables of the compare
command's reports run end to end in seconds (issue 53: "a --smoke that runs in the quick tier on toy data").

One seed: 400 training items drawn with that seed from a fixed two-class problem of 8 Gaussian features
(unit variance, class means at -/+ ``SEPARATION`` on each), 400 test items that are the same for every seed
(as MR's test sentences are). Row ``method`` fits a logistic regression on all 8 features, row ``baseline``
on the first 2 only: the Bayes rates are Phi(0.435 sqrt(8)) = 89% and Phi(0.435 sqrt(2)) = 73%
(``tests/test_gpu_science.py`` checks that the harness finds the difference, its direction and an
interval excluding zero).

    python benchmarks/science_toy.py --out DIR --seed 3        # writes DIR/results/{row}__seed3.{valid,test}.json
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

FEATURES, BASELINE_FEATURES, SEPARATION = 8, 2, 0.435
TRAIN, TEST = 400, 400


def draw(rng: np.random.Generator, n: int):
    labels = rng.integers(0, 2, size=n)
    x = rng.normal(size=(n, FEATURES)) + SEPARATION * (2 * labels[:, None] - 1)
    return x, labels


def fit_logistic(x: np.ndarray, y: np.ndarray, steps: int = 300, lr: float = 0.5) -> np.ndarray:
    """Logistic regression by full-batch gradient descent (weights then bias)."""
    design = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(design.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-design @ w))
        w -= lr * design.T @ (p - y) / len(y)
    return w


def score(w: np.ndarray, x: np.ndarray, y: np.ndarray, split: str) -> dict:
    """The record a recipe's MR scoring writes (fairseq_maskplug.evaluation.evaluate's keys)."""
    from fairseq_maskplug.common.metrics import macro_f1

    predicted = (np.hstack([x, np.ones((len(x), 1))]) @ w > 0).astype(int)
    right = predicted == y
    return {"split": split, "n": int(len(y)), "accuracy": 100 * float(right.mean()),
            "macro_f1": 100 * macro_f1(predicted, y, 2), "units": "percent",
            "classes_predicted": int(len(set(predicted.tolist()))),
            "correct": "".join("1" if r else "0" for r in right)}


def report(seeds, work: Path) -> dict:
    """This script for each seed (a process each, as a plan's units), its results read as a plan's report
    (``fairseq-maskplug-compare``'s stored dictionary) of two arms, ``method`` − ``baseline`` on test."""
    from fairseq_maskplug._version import __version__
    from fairseq_maskplug.compare.report import RECORD_FIELDS, source_commit

    scores, health = [], []
    for seed in seeds:
        subprocess.run([sys.executable, __file__, "--out", str(work), "--seed", str(seed)], check=True)
        for row in ("method", "baseline"):
            for split in ("valid", "test"):
                record = json.loads((work / "results" / f"{row}__seed{seed}.{split}.json").read_text())
                scores.append({"experiment": "toy", "row": row, "seed": seed, "split": split,
                               **{k: record.get(k) for k in RECORD_FIELDS}})
            health.append({"row": row, "seed": seed, "mask_rate": None, "classes": 2, "problems": [],
                           "classes_predicted": record["classes_predicted"]})  # on test, as a unit's
    meta = {"kind": "comparison", "plan": "benchmarks/science_toy.py", "name": "toy", "baseline": "baseline",
            "arms": [{"name": row, "task": None} for row in ("method", "baseline")], "splits": ["valid", "test"],
            "compared": ["test"], "seeds": [str(s) for s in seeds], "family": [["method", "baseline"]],
            "devices": ["CPU"], "version": __version__, "commit": source_commit(), "date": time.strftime("%Y-%m-%d")}
    return {"meta": meta, "scores": scores, "health": health, "missing": []}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, required=True)
    args = parser.parse_args(argv)
    from fairseq_maskplug.common.atomic import write_text

    train_x, train_y = draw(np.random.default_rng(args.seed), TRAIN)
    held_out = {"valid": draw(np.random.default_rng(10_000), TEST), "test": draw(np.random.default_rng(10_001), TEST)}
    (args.out / "results").mkdir(parents=True, exist_ok=True)
    for row, columns in (("method", FEATURES), ("baseline", BASELINE_FEATURES)):
        w = fit_logistic(train_x[:, :columns], train_y)
        for split, (x, y) in held_out.items():
            record = score(w, x[:, :columns], y, split)
            # whole or absent, as a unit's result
            write_text(str(args.out / "results" / f"{row}__seed{args.seed}.{split}.json"), json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
