"""Table of the BART policy recipe: exact match (seen / held-out) per row, mean ± std over seeds,
then each row against no intermediate stage, SSM against +Rand and +Orig, and the learned
policies against SSM and each other, in standard errors of the difference.

The standard error of a row's mean is the larger of the seed-to-seed one (std / sqrt(seeds))
and the binomial one of its questions (sqrt(p (1 - p) / (questions x seeds))), so two
seeds that happen to agree do not claim more precision than the question count allows.

    python recipes/bart_table.py work/bart/results --rows none,orig,rand,ssm,sup,meta,transfer
"""

import argparse
import json
import math
import statistics
from pathlib import Path


def load(results: Path, row: str):
    runs = [json.loads(p.read_text()) for p in sorted(results.glob(f"{row}__seed*.json"))]
    if not runs:
        raise SystemExit(f"no results for row {row!r} in {results}")
    return runs


def summary(runs, split):
    values = [r[split] for r in runs]
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    p = mean / 100
    binomial = 100 * math.sqrt(max(p * (1 - p), 1e-12) / (runs[0][f"n_{split}"] * len(values)))
    return mean, std, max(std / math.sqrt(len(values)), binomial)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--rows", default="none,orig,rand,ssm")
    args = parser.parse_args()
    rows = args.rows.split(",")
    stats = {row: load(args.results, row) for row in rows}
    print("| row | seeds | EM seen | EM held-out |")
    print("| --- | --- | --- | --- |")
    table = {}
    for row in rows:
        table[row] = {split: summary(stats[row], split) for split in ("seen", "heldout")}
        cells = " | ".join(f"{m:.1f} ± {s:.1f}" for m, s, _ in table[row].values())
        print(f"| {row} | {len(stats[row])} | {cells} |")
    print()
    pairs = [(row, "none") for row in rows if row != "none"] + [("ssm", "rand"), ("ssm", "orig"), ("rand", "orig"),
                                                                ("sup", "ssm"), ("meta", "ssm"), ("meta", "sup"),
                                                                ("transfer", "sup")]
    for row, base in pairs:
        if row not in table or base not in table:
            continue
        parts = []
        for split in ("seen", "heldout"):
            (m1, _, se1), (m2, _, se2) = table[row][split], table[base][split]
            se = math.sqrt(se1 ** 2 + se2 ** 2)
            parts.append(f"{split} {m1 - m2:+.1f} ({(m1 - m2) / se:+.1f} SE)")
        print(f"{row} - {base}: " + ", ".join(parts))

if __name__ == "__main__":
    main()
