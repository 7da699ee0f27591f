"""Producers at 1 vs 2 ranks: the same track, and how much faster two ranks write it.

For ``score-pll`` and ``annotate-importance`` (the costliest producers of L3Masking and selective
masking) this runs the real command once as one process and once as two ``torchrun`` ranks
(``--standalone --nproc-per-node 2``: each rank a shard, rank 0 merging) on copies of the same data,
asserts that the two tracks are byte-identical, and prints each run's wall time (the whole command:
start, model load, scoring, merge) and the speed-up. Every process computes with the same number of
threads (``OMP_NUM_THREADS`` = half the cores): the tracks are byte-identical only between processes
that run the same kernels, and a matrix product split over another number of threads may round
differently (seen here: a single process on 2 threads against two ranks on 1 thread each wrote another
score-pll track). The ratio is then what a second rank with its own cores (or GPU) gains.

Default: a synthetic Zipf corpus and models trained on it for ``--updates`` updates (as
``bench_precision.py``: a masked LM and a tagger fine-tuned from it). The last line is
``ratio_pll=<1-rank wall / 2-rank wall> ratio_tag=<the same>``.

    python benchmarks/bench_scaleout.py [--lines 2000] [--shape quickstart]   # about 8 min on 2 cores
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_precision import SHAPES, train_models  # noqa: E402
from commands import run_checked  # noqa: E402
from gpu_acceptance import BIN, make_data  # noqa: E402
from smoke import add_smoke_option, shrink  # noqa: E402

PRODUCERS = (("pll", "score-pll", ["--word-starts", "token"]), ("tag", "annotate-importance", []))


def track(data: Path, name: str) -> dict:
    return {p.name: p.read_bytes() for p in sorted(data.glob(f"train.{name}.*")) if "preview" not in p.name}


def produce(command, checkpoint, data, name, extra, ranks: int, threads: int) -> float:
    """Wall seconds of one run of ``command`` as ``ranks`` processes of ``threads`` threads each."""
    args = [BIN / f"fairseq-maskplug-{command}", "--checkpoint", checkpoint, "--data", data, "--splits", "train",
            "--name", name, *extra]
    if ranks > 1:
        args = [BIN / "torchrun", "--standalone", "--nproc-per-node", str(ranks), *args]
    start = time.perf_counter()
    run_checked(args, env=dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore"))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="quickstart", help="the models' shape")
    parser.add_argument("--lines", type=int, default=2000, help="synthetic lines")
    parser.add_argument("--tokens", type=int, default=64, help="synthetic line length and model positions")
    parser.add_argument("--updates", type=int, default=20, help="training updates of the models")
    parser.add_argument("--max-tokens", type=int, default=4096, help="padded tokens per forward")
    parser.add_argument("--block-lines", type=int, default=256, help="--shard-block-lines of every run")
    add_smoke_option(parser)
    args = shrink(parser.parse_args(), shape="tiny", lines=40, tokens=32, updates=2, block_lines=8)
    cores = os.cpu_count() or 2
    threads = max(1, cores // 2)  # per process, in both runs: the same kernels, the same rounding
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_data(root, args.lines, args.tokens, vocab=8000)
        checkpoints = dict(zip(("pll", "tag"), train_models(root, args)[:2]))
        print(f"{args.lines} synthetic lines, {args.shape} shape, {cores} cores, {threads} threads per process; "
              f"--shard-block-lines {args.block_lines} --max-tokens {args.max_tokens}")
        ratios = []
        for short, command, extra in PRODUCERS:
            options = [*extra, "--shard-block-lines", str(args.block_lines), "--max-tokens", str(args.max_tokens)]
            walls, tracks = {}, {}
            for ranks in (1, 2):
                data = shutil.copytree(root / "mlm", root / f"{short}{ranks}")
                walls[ranks] = produce(command, checkpoints[short], data, short, options, ranks, threads)
                tracks[ranks] = track(data, short)
            if not tracks[1] or tracks[1] != tracks[2]:
                raise SystemExit(f"{command}: the 2-rank track differs from the 1-rank one")
            print(f"{command:20s} 1 rank {walls[1]:7.1f} s, 2 ranks {walls[2]:7.1f} s: "
                  f"{walls[1] / walls[2]:.2f}x; tracks identical")
            ratios.append(f"ratio_{short}={walls[1] / walls[2]:.2f}")
    print(" ".join(ratios))


if __name__ == "__main__":
    main()
