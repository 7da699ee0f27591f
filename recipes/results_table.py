"""Print a results table from evaluation JSON files named ``<row>__seed<k>.<split>.json``.

    python recipes/results_table.py RESULTS_DIR [--rows row1,row2,...]

Each row shows mean ± standard deviation over seeds of accuracy and macro-F1 for
the valid and test splits (in %). Under the table, a note when a row's models predicted one
class only (a constant predictor) or every row has the same scores: such a table measures
nothing (train longer).
"""

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

NAME = re.compile(r"(?P<row>.+)__seed(?P<seed>\d+)\.(?P<split>\w+)\.json$")


def percent(record, key):
    """``record[key]`` in percent (files written before evaluate reported percent hold fractions)."""
    return record[key] if record.get("units") == "percent" else 100 * record[key]


def fmt(values):
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def notes(scores, constant) -> list:
    """What makes the table uninformative: rows whose every model predicted a single class on
    test, or rows that all have the same test accuracy and macro-F1."""
    out = []
    if constant:
        out.append(f"note: {', '.join(constant)} predicted a single class on test (a constant predictor: its accuracy "
                   "is the share of the class it predicts, the majority's or the minority's): these rows measure "
                   "nothing; train longer")
    same = {(round(sum(s[("test", "accuracy")]), 6), round(sum(s[("test", "macro_f1")]), 6)) for s in scores}
    if len(scores) > 1 and len(same) == 1:
        out.append("note: every row has the same test scores: the table does not separate the methods")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--rows", default=None, help="comma-separated row order (default: sorted)")
    args = parser.parse_args()
    scores = defaultdict(lambda: defaultdict(list))
    seeds = defaultdict(set)
    single = defaultdict(list)  # per test file: predicted one class only
    for path in sorted(args.results.glob("*.json")):
        match = NAME.match(path.name)
        if match:
            record = json.loads(path.read_text())
            scores[match["row"]][(match["split"], "accuracy")].append(percent(record, "accuracy"))
            scores[match["row"]][(match["split"], "macro_f1")].append(percent(record, "macro_f1"))
            seeds[match["row"]].add(match["seed"])
            if match["split"] == "test":
                single[match["row"]].append(record.get("classes_predicted") == 1)
    rows = args.rows.split(",") if args.rows else sorted(scores)
    header = ["model", "seeds", "valid acc", "test acc", "test macro-F1"]
    lines = [header, ["---"] * len(header)]
    for row in rows:
        if row not in scores:
            raise SystemExit(f"no results for row {row!r} in {args.results}")
        s = scores[row]
        lines.append([row, str(len(seeds[row])), fmt(s[("valid", "accuracy")]), fmt(s[("test", "accuracy")]),
                      fmt(s[("test", "macro_f1")])])
    for line in lines:
        print("| " + " | ".join(line) + " |")
    for note in notes([scores[row] for row in rows], [row for row in rows if single[row] and all(single[row])]):
        print(note)


if __name__ == "__main__":
    main()
