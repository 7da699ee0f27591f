"""Every benchmark script runs (``--smoke``: its own code path at tiny sizes) and ends with its
ratio line, so that a benchmark cannot break unnoticed (two did, when the data helpers moved).
The figures of a smoke run measure nothing; the README's figures come from full-size runs."""

import re

import pytest

from fairseq_helpers import BIN, REPO, run

# scripts whose smoke their own test module runs, with assertions on what it writes (gpu_science's --smoke
# and the toy replicate it starts, science_toy, which is no benchmark of its own), and the pages' generator
OWN_TEST = {"gpu_science": "tests/test_gpu_science.py", "science_toy": "tests/test_gpu_science.py",
            "pages": "tests/test_stored_results.py",
            "gpu_policy_speed": "tests/test_gpu_speed.py"}
SCRIPTS = sorted(path for path in (REPO / "benchmarks").glob("*.py")
                 if 'if __name__ == "__main__"' in path.read_text(encoding="utf-8") and path.stem not in OWN_TEST)
# gpu_acceptance trains every task (13 runs, about 3 minutes on 2 cores): the full tier runs it on CPU in fp16
# (--memory-efficient-fp16) only; both precisions took 6 minutes, and --bf16 on CPU has its own test
# (test_data_parallel.py::test_bf16_trains_in_bfloat16_without_torch_xla)
# (every task trains in half precision in test_data_parallel.py, so the smoke run trains the two compared pairs its
# ratio line reads: 13 tasks took 4 minutes of the full tier, 2026-11-29); bench_scaleout's smoke measures the
# producers (pll), retrieval and a counting producer (difference) through the one helper every stage uses; that
# sharded outputs equal one process's is each producer's own test (test_pmi.py, test_informask.py, test_dsir.py, ...)
EXTRA_ARGS = {"gpu_acceptance": ["--cpu", "--precision", "fp16", "--only",
                                 "masked_lm,guided_mlm,denoising,guided_denoising"],
              "bench_scaleout": ["--stages", "pll,retrieve,difference"]}
# bench_precision and bench_scaleout train two models (1-1.5 min), bench_threads four runs under load (40 s);
# bench_denoising, bench_masking, bench_meta_step, bench_tartan and bench_policies (25-70 s each), which the quick
# tier's 10 minutes no longer held (its smoke runs took 5.4 of the 24 minutes of test time, 2026-11-26)
# fe_variance, bench_buffer and bench_pll (15-30 s each): the quick tier measured 10 min 34 s with the Hugging Face
# tests (2026-11-26), over its 10 minutes
FULL_TIER = {"bench_collators", "gpu_acceptance", "bench_precision", "bench_scaleout", "bench_threads", "bench_denoising", "bench_masking",
             "bench_meta_step", "bench_tartan", "bench_policies", "fe_variance", "bench_buffer", "bench_pll"}
# further smoke runs: a second code path (fe_variance's l3 masks and its mean over several seeds, in one run: two
# runs of about 35 s each before)
VARIANTS = {"fe_variance": [["--mask-policy", "l3", "--seeds", "2"]]}
LAST_LINE = re.compile(r"ratio\w*=-?\d+(\.\d+)?( \w+=-?\d+(\.\d+)?)*")


def test_every_benchmark_script_is_found():
    names = {path.stem for path in SCRIPTS}
    assert {"bench_masking", "bench_denoising", "bench_buffer", "bench_pll", "bench_tartan", "bench_meta_step",
            "bench_bm25", "fe_variance", "gpu_acceptance"} <= names


@pytest.mark.e2e  # bench_masking, bench_denoising, bench_meta_step and fe_variance start fairseq-train
@pytest.mark.parametrize("script, extra", [  # a variant (a second code path) runs in the full tier
    pytest.param(path, extra, marks=[pytest.mark.full] if path.stem in FULL_TIER or variant else [],
                 id=" ".join([path.stem, *extra[1:]]))
    for path in SCRIPTS
    for variant, extra in enumerate([EXTRA_ARGS.get(path.stem, [])] + VARIANTS.get(path.stem, []))])
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


def test_running_moments_give_the_sample_variance_of_their_stream():
    """fe_variance keeps its variances as running moments (no gradient stored): they equal numpy's
    two-pass sample variance (ddof 1) summed over parameters, per parameter, up to float64 rounding,
    on vectors with a large common offset (where the naive sum of squares loses its digits)."""
    import sys

    import numpy as np
    import torch

    sys.path.insert(0, str(REPO / "benchmarks"))
    from fe_variance import RunningMoments

    rng = np.random.default_rng(0)
    draws = 1e4 + rng.normal(size=(40, 1000)) * rng.uniform(0.1, 3.0, 1000)
    moments = RunningMoments()
    for row in draws:
        moments.add(torch.from_numpy(row).float())
    expected = np.var(draws.astype(np.float32).astype(np.float64), axis=0, ddof=1).sum() / draws.shape[1]
    assert moments.variance_per_parameter() == pytest.approx(expected, rel=1e-9)
    assert np.allclose(moments.mean.numpy(), draws.astype(np.float32).mean(0, dtype=np.float64), rtol=0, atol=1e-9)
    with pytest.raises(ValueError, match="two draws"):
        one = RunningMoments()
        one.add(torch.zeros(3))
        one.variance_per_parameter()


def test_a_commands_peak_memory_is_its_own_not_the_benchmarks():
    """From a process holding 512 MiB, ``python -c pass`` started directly reports the parent's peak as its own
    ``ru_maxrss`` (Linux records the address space it leaves at exec); through the benchmarks' launcher, its own
    few MiB."""
    import os
    import subprocess
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    from peak_memory import run_measured

    ballast = bytearray(os.urandom(1 << 20)) * 512  # every page written
    direct = subprocess.Popen([sys.executable, "-c", "pass"])
    _, _, usage = os.wait4(direct.pid, 0)
    _, launched = run_measured([sys.executable, "-c", "pass"])
    assert usage.ru_maxrss / 1024 > 500 and launched < 100, (usage.ru_maxrss / 1024, launched, len(ballast))


def test_every_benchmark_script_is_a_tool_the_tests_run_and_the_page_lists():
    """docs/development.md's rule for benchmarks/: each script is named with its command on docs/benchmarks.md and
    run by a test (its smoke run, or the test that imports it), or it goes (git keeps it)."""
    from fairseq_helpers import REPO

    page = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    tests = "".join(path.read_text(encoding="utf-8") for path in (REPO / "tests").glob("*.py"))
    scripts = sorted(path.stem for path in (REPO / "benchmarks").glob("*.py"))
    assert len(scripts) >= 20
    unlisted = [name for name in scripts if f"{name}.py" not in page]
    text = {name: (REPO / "benchmarks" / f"{name}.py").read_text(encoding="utf-8") for name in scripts}
    tested = {name for name in scripts if name in tests}
    tested |= {name for name in scripts if any(f"from {name} import" in text[other] for other in tested)}  # shared
    untested = [name for name in scripts if name not in tested]
    assert not unlisted and not untested, (unlisted, untested)
