"""recipes/plot_valid_loss.py: the curves it reads from fairseq logs (json and simple formats) and
evaluate_mlm scores, and the SVG it draws of them (each point where its value says)."""

import json
import subprocess
import xml.etree.ElementTree as ET

import pytest

from fairseq_helpers import BIN, REPO

JSON_LOG = [
    '2026-11-24 03:38:50 | INFO | valid | {"epoch": 1, "valid_loss": "0.987", "valid_accuracy": "52.8", '
    '"valid_num_updates": "100"}',
    '2026-11-24 03:38:51 | INFO | train | {"epoch": 1, "train_loss": "0.5", "train_num_updates": "100"}',
    '2026-11-24 03:39:05 | INFO | valid | {"epoch": 2, "valid_loss": "0.934", "valid_accuracy": "66.5", '
    '"valid_num_updates": "200", "valid_best_accuracy": "66.5"}',
    # a resumed run validates update 200 again: the last record counts
    '2026-11-24 03:40:05 | INFO | valid | {"epoch": 2, "valid_loss": "0.9", "valid_accuracy": "67.0", '
    '"valid_num_updates": "200"}',
]
SIMPLE_LOG = [
    "2026-11-24 03:40:22 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 10.113 | accuracy 49.8 | "
    "wps 629 | num_updates 40",
    "2026-11-24 03:41:36 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 9.5 | accuracy 51.5 | "
    "num_updates 80 | best_loss 9.5",
]


def plot(tmp_path, *args):
    return subprocess.run([BIN / "python", REPO / "recipes" / "plot_valid_loss.py", *map(str, args)],
                          capture_output=True, text=True, cwd=tmp_path)


def test_curves_from_both_log_formats_and_evaluate_mlm_scores(tmp_path):
    (tmp_path / "a.log").write_text("\n".join(JSON_LOG) + "\n")
    (tmp_path / "b.log").write_text("\n".join(SIMPLE_LOG) + "\n")
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"checkpoint": f"c{u}.pt", "updates": u, "loss": loss}) + "\n"
                                              for u, loss in ((200, 8.5), (100, 9.25))))
    result = plot(tmp_path, "--out", "loss.svg", "a=a.log", "b=b.log", "c=c.jsonl")
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows == ["| updates | a | b | c |", "| 40 | nan | 10.113 | nan |", "| 80 | nan | 9.500 | nan |",
                    "| 100 | 0.987 | nan | 9.250 |", "| 200 | 0.900 | nan | 8.500 |"]
    accuracy = plot(tmp_path, "--out", "acc.svg", "--metric", "accuracy", "a=a.log", "b=b.log")
    assert "| 200 | 67.000 | nan |" in accuracy.stdout and "| 80 | nan | 51.500 |" in accuracy.stdout

    svg = ET.parse(tmp_path / "acc.svg").getroot()
    ns = "{http://www.w3.org/2000/svg}"
    lines = {p.get("data-run"): [tuple(map(float, xy.split(","))) for xy in p.get("points").split()]
             for p in svg.iter(f"{ns}polyline")}
    assert list(lines) == ["a", "b"] and [len(v) for v in lines.values()] == [2, 2]
    assert "stroke-dasharray" in ET.tostring(svg.find(f"{ns}polyline")).decode()  # the first run: the baseline
    # positions are linear in the values: recover the axes from two points, check the others
    points = [(40, 49.8), (80, 51.5), (100, 52.8), (200, 67.0)]
    drawn = lines["b"] + lines["a"]
    (u0, v0), (x0, y0) = points[0], drawn[0]
    (u1, v1), (x1, y1) = points[3], drawn[3]
    for (u, v), (x, y) in zip(points, drawn):
        assert x == pytest.approx(x0 + (u - u0) * (x1 - x0) / (u1 - u0), abs=0.15)
        assert y == pytest.approx(y0 + (v - v0) * (y1 - y0) / (v1 - v0), abs=0.15)
    assert y1 < y0  # a higher accuracy is drawn higher


def test_refusals_name_the_run_or_the_option(tmp_path):
    (tmp_path / "train_only.log").write_text(JSON_LOG[1] + "\n")
    result = plot(tmp_path, "--out", "x.svg", "a=train_only.log")
    assert result.returncode != 0 and "train_only.log: no validation loss against updates" in result.stderr
    assert "give a path ending in .svg" in plot(tmp_path, "--out", "x.png", "a=train_only.log").stderr
    assert "give each run as NAME=PATH" in plot(tmp_path, "--out", "x.svg", "train_only.log").stderr
    assert not list(tmp_path.glob("x.*"))
    (tmp_path / "c.jsonl").write_text(json.dumps({"checkpoint": "c.pt", "updates": 10, "loss": 9.0}) + "\n")
    assert "hold only the loss" in plot(tmp_path, "--out", "x.svg", "--metric", "accuracy", "c=c.jsonl").stderr
