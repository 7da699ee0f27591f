"""Every benchmark script runs (``--smoke``: its own code path at tiny sizes) and ends with its
ratio line, so that a benchmark cannot break unnoticed (two did, when the data helpers moved).
The figures of a smoke run measure nothing; the README's figures come from full-size runs."""

import re

import pytest

from fairseq_helpers import BIN, REPO, run

SCRIPTS = sorted(path for path in (REPO / "benchmarks").glob("*.py")
                 if 'if __name__ == "__main__"' in path.read_text(encoding="utf-8"))
# gpu_acceptance trains every task (13 runs, about 2 minutes on 2 cores): the full tier runs it, on CPU
EXTRA_ARGS = {"gpu_acceptance": ["--cpu"]}
FULL_TIER = {"gpu_acceptance"}
VARIANTS = {"fe_variance": [["--mask-policy", "l3"]]}  # further smoke runs: a second code path
LAST_LINE = re.compile(r"ratio\w*=-?\d+(\.\d+)?( \w+=-?\d+(\.\d+)?)*")


def test_every_benchmark_script_is_found():
    names = {path.stem for path in SCRIPTS}
    assert {"bench_masking", "bench_denoising", "bench_buffer", "bench_pll", "bench_tartan", "bench_meta_step",
            "bench_bm25", "fe_variance", "gpu_acceptance"} <= names


@pytest.mark.e2e  # bench_masking, bench_denoising, bench_meta_step and fe_variance start fairseq-train
@pytest.mark.parametrize("script, extra", [
    pytest.param(path, extra, marks=[pytest.mark.full] if path.stem in FULL_TIER else [],
                 id=" ".join([path.stem, *extra[1:]]))
    for path in SCRIPTS for extra in [EXTRA_ARGS.get(path.stem, [])] + VARIANTS.get(path.stem, [])])
def test_smoke_run_ends_with_its_ratio_line(script, extra):
    result = run([BIN / "python", script, "--smoke", *extra], timeout=600)  # a real process, as users run it
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "smoke run (--smoke)" in result.stdout
    last = result.stdout.strip().splitlines()[-1]
    assert LAST_LINE.fullmatch(last), f"{script.name}: the last line is {last!r}, not ratio=..."


def test_gpu_acceptance_covers_every_registered_task(tmp_path):
    import sys

    from fairseq.tasks import TASK_REGISTRY

    import fairseq_maskplug.plugin  # noqa: F401
    sys.path.insert(0, str(REPO / "benchmarks"))
    import gpu_acceptance

    specs = gpu_acceptance.tasks(tmp_path, tmp_path / "checkpoint.pt")
    covered = {str(args[args.index("--task") + 1]) for _, _, args, _ in specs.values()}
    registered = {name for name, cls in TASK_REGISTRY.items() if cls.__module__.startswith("fairseq_maskplug.")}
    assert registered <= covered, f"gpu_acceptance.py does not run {sorted(registered - covered)}"
    assert {"masked_lm", "denoising"} <= covered  # fairseq's own tasks, the two references


def test_a_failed_preparation_command_names_its_signal_and_shows_its_output():
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    from commands import run_checked

    aborting = [sys.executable, "-c", "import os, signal, sys; print('half done', file=sys.stderr, flush=True); "
                "os.kill(os.getpid(), signal.SIGABRT)"]
    with pytest.raises(RuntimeError, match=r"(?s)ended with signal SIGABRT.*half done"):
        run_checked(aborting)
    with pytest.raises(RuntimeError, match="ended with exit status 3"):
        run_checked([sys.executable, "-c", "raise SystemExit(3)"])
    assert run_checked([sys.executable, "-c", "print('ok')"]).stdout == "ok\n"
