"""Validation MLM loss against updates: a table, and a PNG if matplotlib is installed.

    python recipes/plot_valid_loss.py --out valid_loss.png NAME=SCORES.jsonl [NAME=SCORES.jsonl ...]

Each JSONL file holds ``python -m fairseq_maskplug.evaluation.evaluate_mlm`` lines
(``{"checkpoint", "updates", "loss"}``) for the checkpoints of one run.
"""

import argparse
import json
import math


def read_curve(path):
    with open(path, encoding="utf-8") as f:
        points = sorted((r["updates"], r["loss"]) for r in map(json.loads, filter(str.strip, f)))
    if not points:
        raise SystemExit(f"{path}: no scores")
    return points


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="PNG path")
    parser.add_argument("runs", nargs="+", help="NAME=SCORES.jsonl")
    args = parser.parse_args()
    curves = {name: read_curve(path) for name, path in (run.split("=", 1) for run in args.runs)}
    print("| updates | " + " | ".join(curves) + " |")
    print("| --- " * (len(curves) + 1) + "|")
    for u in sorted({u for c in curves.values() for u, _ in c}):
        print(f"| {u} | " + " | ".join(f"{dict(c).get(u, math.nan):.3f}" for c in curves.values()) + " |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (pip install -e .[bench]): no plot")
        return
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, curve in curves.items():
        ax.plot(*zip(*curve), marker="o", label=name)
    ax.set_xlabel("updates")
    ax.set_ylabel("validation MLM loss, same random masks (bits)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
