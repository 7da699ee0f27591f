"""torch's default thread pool against the package's choice (``fairseq_maskplug/tools/threads.py``), on idle cores
and with cores kept busy by other work, in one run.

The workload is ``QUICK=1 bash recipes/quickstart.sh`` in a new work directory (``--workload quickstart``, the
first-hour report's case: 118 s on idle cores, 9 min 17 s with other work on them), or 40 updates of
``fairseq-maskplug-train`` on a QUICK-shaped roberta over a synthetic corpus (``--workload train``). Each is run
twice per load: with ``OMP_NUM_THREADS`` set to torch's default pool size (what every command did before) and
without it (the package chooses). "Other work" is ``--busy`` processes that spin on a core each; before each
run the one-minute load average is let settle to them (the choice reads it), up to ``--settle-seconds``.

The last line is ``ratio_idle=<chosen/default wall time, idle> ratio_busy=<the same, busy>``.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from commands import run_checked
from smoke import benchmark_parser, shrink
from task_timing import make_data

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
SHAPE = ["--arch", "roberta_base", "--encoder-layers", "2", "--encoder-embed-dim", "64", "--encoder-ffn-embed-dim",
         "128", "--encoder-attention-heads", "2", "--max-positions", "64", "--tokens-per-sample", "64"]


def torch_default_threads() -> int:
    """The size of torch's pool in a new process without ``OMP_NUM_THREADS`` (what the commands had before)."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    code = "import torch; print(torch.get_num_threads())"
    return int(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              check=True).stdout)


def settle(busy: int, limit: float) -> float:
    """Wait until the one-minute load average rounds to ``busy`` (or ``limit`` seconds); the load it reached."""
    start = time.monotonic()
    while time.monotonic() - start < limit and round(os.getloadavg()[0]) != busy:
        time.sleep(5)
    return os.getloadavg()[0]


def run_workload(args, env: dict, root: Path, name: str) -> float:
    """Seconds of one run of the workload in a new directory under ``root``."""
    start = time.perf_counter()
    if args.workload == "quickstart":
        env = dict(env, QUICK="1", MASKPLUG_WORK=str(root / name), MASKPLUG_PROGRESS_SECONDS="600")
        run_checked(["bash", REPO / "recipes" / "quickstart.sh"], env=env, cwd=REPO)
    else:
        run_checked([BIN / "fairseq-maskplug-train", root / "bin", "--task", "guided_mlm", *SHAPE, "--cpu",
                     "--optimizer", "adam", "--lr", "1e-4", "--batch-size", "32", "--max-update", str(args.updates),
                     "--no-save", "--disable-validation", "--log-format", "simple", "--log-interval", "1000",
                     "--num-workers", "0"], env=env)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--workload", choices=["quickstart", "train"], default="quickstart")
    parser.add_argument("--updates", type=int, default=40, help="updates of --workload train")
    parser.add_argument("--lines", type=int, default=3000, help="lines of --workload train's corpus")
    parser.add_argument("--busy", type=int, default=1, help="processes spinning on a core each in the busy runs")
    parser.add_argument("--settle-seconds", type=float, default=240,
                        help="longest wait for the load average to reach the busy processes before a run")
    args = shrink(parser.parse_args(argv), workload="train", updates=2, lines=200, settle_seconds=0)
    default = torch_default_threads()
    base = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    modes = {f"torch's default pool ({default} threads)": dict(base, OMP_NUM_THREADS=str(default)),
             "the package's choice": base}
    seconds = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.workload == "train":
            make_data(root, lines=args.lines)
        for busy in (0, args.busy):
            spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
            try:
                for mode, env in modes.items():
                    load = settle(busy, args.settle_seconds)
                    seconds[busy, mode] = run_workload(args, env, root, f"{busy}-{len(seconds)}")
                    print(f"{args.workload}, {busy} core(s) busy (load {load:.2f} at the start), {mode}: "
                          f"{seconds[busy, mode]:.1f} s", flush=True)
            finally:
                for spinner in spinners:
                    spinner.kill()
    chosen, fixed = list(modes)[1], list(modes)[0]
    print(f"ratio_idle={seconds[0, chosen] / seconds[0, fixed]:.3f} "
          f"ratio_busy={seconds[args.busy, chosen] / seconds[args.busy, fixed]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
