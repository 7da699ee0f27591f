"""Every benchmark script runs (``--smoke``: its own code path at tiny sizes) and ends with its
ratio line, so that a benchmark cannot break unnoticed (two did, when the data helpers moved).
The figures of a smoke run measure nothing; the README's figures come from full-size runs."""

import re

import pytest

from fairseq_helpers import BIN, REPO, run

SCRIPTS = sorted(path for path in (REPO / "benchmarks").glob("*.py")
                 if 'if __name__ == "__main__"' in path.read_text(encoding="utf-8"))
LAST_LINE = re.compile(r"ratio\w*=-?\d+(\.\d+)?( \w+=-?\d+(\.\d+)?)*")


def test_every_benchmark_script_is_found():
    names = {path.stem for path in SCRIPTS}
    assert {"bench_masking", "bench_denoising", "bench_buffer", "bench_pll", "bench_tartan", "bench_meta_step",
            "bench_bm25", "fe_variance"} <= names


@pytest.mark.e2e  # bench_masking, bench_denoising, bench_meta_step and fe_variance start fairseq-train
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_smoke_run_ends_with_its_ratio_line(script):
    result = run([BIN / "python", script, "--smoke"], timeout=600)  # a real process, as users run it
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "smoke run (--smoke)" in result.stdout
    last = result.stdout.strip().splitlines()[-1]
    assert LAST_LINE.fullmatch(last), f"{script.name}: the last line is {last!r}, not ratio=..."
