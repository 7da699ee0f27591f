"""Validation loss against updates from fairseq-train logs: a table, and a PNG if matplotlib is installed.

    python recipes/plot_valid_loss.py --out valid_loss.png NAME=LOG [NAME=LOG ...]
"""

import argparse
import json


def valid_curve(log_path):
    points = []
    with open(log_path, encoding="utf-8") as f:
        for line in f:
            if "| valid | " in line:
                record = json.loads(line.split("| valid | ", 1)[1])
                points.append((int(record["valid_num_updates"]), float(record["valid_loss"])))
    return sorted(set(points))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="PNG path")
    parser.add_argument("runs", nargs="+", help="NAME=LOG")
    args = parser.parse_args()
    curves = {}
    for run in args.runs:
        name, path = run.split("=", 1)
        curves[name] = valid_curve(path)
        if not curves[name]:
            raise SystemExit(f"{path}: no validation records")
    updates = sorted({u for c in curves.values() for u, _ in c})
    print("| updates | " + " | ".join(curves) + " |")
    print("| --- " * (len(curves) + 1) + "|")
    for u in updates:
        cells = [f"{dict(c).get(u, float('nan')):.3f}" for c in curves.values()]
        print(f"| {u} | " + " | ".join(cells) + " |")
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
    ax.set_ylabel("validation MLM loss (base 2)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
