"""A validation metric against updates for the runs of a recipe: a Markdown table, and an SVG plot.

    python recipes/plot_valid_loss.py --out valid_loss.svg NAME=RUN [NAME=RUN ...] [--metric accuracy]

Each RUN is either a JSONL file of ``python -m fairseq_maskplug.evaluation.evaluate_mlm`` lines
(``{"checkpoint", "updates", "loss"}``: every checkpoint of the run scored under the same masks,
so runs trained with different masking compare fairly) or a fairseq training log, whose
validation records (``--log-format json`` or ``simple``) give ``--metric`` (default ``loss``)
against ``num_updates``. The first run is drawn as the baseline (dashed). The SVG is plain text
written here (no plotting library), so the same curves give the same file.
"""

import argparse
import json
import math
import re
from html import escape

from fairseq_maskplug.common.atomic import write_text

COLOURS = ("#444444", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
SIMPLE_VALID = re.compile(r"\| valid on '[^']+' subset \|(?P<fields>.*)$")


def _valid_records(line):
    """The metric record of a fairseq validation log line ({name: value}), or None."""
    if "| valid | {" in line:
        record = json.loads(line.split("| valid | ", 1)[1])
        return {key[len("valid_"):]: value for key, value in record.items() if key.startswith("valid_")}
    match = SIMPLE_VALID.search(line)
    if match:
        fields = [field.strip().rsplit(" ", 1) for field in match["fields"].split("|") if field.strip()]
        return {field[0]: field[1] for field in fields if len(field) == 2}
    return None


def read_curve(path, metric="loss"):
    """``[(updates, value), ...]`` sorted by updates, from an evaluate_mlm JSONL file or a fairseq log."""
    points = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if path.endswith(".jsonl"):
                if line.strip():
                    record = json.loads(line)
                    if metric != "loss":
                        raise SystemExit(f"{path}: evaluate_mlm scores hold only the loss, not --metric {metric}")
                    points.append((int(record["updates"]), float(record["loss"])))
                continue
            record = _valid_records(line)
            if record is not None and metric in record and "num_updates" in record:
                points.append((int(float(record["num_updates"])), float(record[metric])))
    if not points:
        raise SystemExit(f"{path}: no validation {metric} against updates (a fairseq log or evaluate_mlm JSONL)")
    return sorted(dict(points).items())  # a resumed run may log an update twice: keep the last


def _ticks(low, high, count=5):
    """About ``count`` round tick values covering [low, high]."""
    if high <= low:
        high = low + 1.0
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if m * step >= raw)
    first = math.floor(low / step) * step
    return [first + i * step for i in range(int(math.ceil((high - first) / step)) + 1)]


def svg_plot(curves, ylabel, title="", width=560, height=340):
    """An SVG line plot of ``curves`` ({name: [(x, y), ...]}): axes with round ticks, one polyline
    and its points per curve (the first dashed, as the baseline), a legend."""
    left, right, top, bottom = 64, 150, 28, 44
    xs = [x for c in curves.values() for x, _ in c]
    ys = [y for c in curves.values() for _, y in c]
    xt, yt = _ticks(min(0, min(xs)), max(xs)), _ticks(min(ys), max(ys))
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]
    px = lambda x: left + (x - x0) / (x1 - x0) * (width - left - right)  # noqa: E731
    py = lambda y: height - bottom - (y - y0) / (y1 - y0) * (height - top - bottom)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="16" font-size="12">{escape(title)}</text>']
    for x in xt:
        out.append(f'<line x1="{px(x):.1f}" y1="{top}" x2="{px(x):.1f}" y2="{height - bottom}" stroke="#eeeeee"/>')
        out.append(f'<text x="{px(x):.1f}" y="{height - bottom + 14}" text-anchor="middle">{x:g}</text>')
    for y in yt:
        out.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{width - right}" y2="{py(y):.1f}" stroke="#eeeeee"/>')
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{width - left - right}" height="{height - top - bottom}" '
               'fill="none" stroke="black"/>')
    out.append(f'<text x="{(left + width - right) / 2:.1f}" y="{height - 8}" text-anchor="middle">updates</text>')
    out.append(f'<text transform="translate(14 {(top + height - bottom) / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle">{escape(ylabel)}</text>')
    for i, (name, curve) in enumerate(curves.items()):
        colour, dash = COLOURS[i % len(COLOURS)], ' stroke-dasharray="5 3"' if i == 0 else ""
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in curve)
        out.append(f'<polyline data-run="{escape(name)}" points="{points}" fill="none" stroke="{colour}" '
                   f'stroke-width="1.8"{dash}/>')
        out.extend(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{colour}"/>' for x, y in curve)
        ly = top + 8 + 16 * i
        out.append(f'<line x1="{width - right + 10}" y1="{ly}" x2="{width - right + 30}" y2="{ly}" '
                   f'stroke="{colour}" stroke-width="1.8"{dash}/>')
        out.append(f'<text x="{width - right + 35}" y="{ly + 4}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def table(curves):
    """The curves as a Markdown table, one row per update count (nan where a run has no point)."""
    rows = ["| updates | " + " | ".join(curves) + " |", "| --- " * (len(curves) + 1) + "|"]
    for u in sorted({u for c in curves.values() for u, _ in c}):
        rows.append(f"| {u} | " + " | ".join(f"{dict(c).get(u, math.nan):.3f}" for c in curves.values()) + " |")
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="SVG path")
    parser.add_argument("--metric", default="loss", help="validation metric of the fairseq logs (loss, accuracy, ...)")
    parser.add_argument("--ylabel", help="y axis label (default: 'validation METRIC')")
    parser.add_argument("--title", default="", help="title above the plot")
    parser.add_argument("runs", nargs="+", help="NAME=RUN: an evaluate_mlm JSONL file or a fairseq log; the "
                        "first is the baseline")
    args = parser.parse_args(argv)
    if not args.out.endswith(".svg"):
        parser.error(f"--out {args.out}: the plot is written as SVG; give a path ending in .svg")
    runs = [run.split("=", 1) for run in args.runs]
    for run in runs:
        if len(run) != 2 or not run[0]:
            parser.error(f"{'='.join(run)}: give each run as NAME=PATH")
    curves = {name: read_curve(path, args.metric) for name, path in runs}
    print(table(curves))
    write_text(args.out, svg_plot(curves, args.ylabel or f"validation {args.metric}", args.title))
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
