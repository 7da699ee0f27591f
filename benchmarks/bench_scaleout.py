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
``bench_precision.py``: a masked LM and a tagger fine-tuned from it). ``retrieve`` runs the same way in
query shards (``--retrieve-queries`` Zipf queries of 20 words into ``--retrieve-docs`` Zipf documents, as
``bench_bm25.py``, top 50, one query process per rank, the index built beforehand and shared); its
provenance, ids and documents must be byte-identical. The last line is
``ratio_pll=<1-rank wall / 2-rank wall> ratio_tag=<the same> ratio_retrieve=<the same>``.

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
from bench_bm25 import write_corpus, zipf_words  # noqa: E402

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


def retrieve_walls(root: Path, docs: int, queries: int, threads: int) -> dict:
    """Wall seconds of ``retrieve`` as one process and as two ranks over a prebuilt index, outputs compared."""
    import numpy as np

    corpus, index = root / "corpus.txt", root / "index"
    write_corpus(corpus, docs, 50_000, seed=0)
    words, p = zipf_words(50_000)
    rng = np.random.default_rng(1)
    (root / "queries.txt").write_text("".join(" ".join(words[rng.choice(len(words), size=20, p=p)]) + "\n"
                                              for _ in range(queries)))
    common = [BIN / "fairseq-maskplug-retrieve", "--corpus", corpus, "--index", index, "--top-k", "50"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore")
    run_checked(common, env=env)  # the index, built once
    walls, outputs = {}, {}
    for ranks in (1, 2):
        args = [*common, "--queries", root / "queries.txt", "--out", root / f"retrieved{ranks}", "--workers", "1"]
        if ranks > 1:
            args = [BIN / "torchrun", "--standalone", "--nproc-per-node", str(ranks), *args]
        start = time.perf_counter()
        run_checked(args, env=env)
        walls[ranks] = time.perf_counter() - start
        outputs[ranks] = {name: (root / f"retrieved{ranks}" / name).read_bytes()
                          for name in ("provenance.tsv", "retrieved.ids", "retrieved.txt")}
    if outputs[1] != outputs[2]:
        raise SystemExit("retrieve: the 2-rank output differs from the 1-rank one")
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="quickstart", help="the models' shape")
    parser.add_argument("--lines", type=int, default=2000, help="synthetic lines")
    parser.add_argument("--tokens", type=int, default=64, help="synthetic line length and model positions")
    parser.add_argument("--updates", type=int, default=20, help="training updates of the models")
    parser.add_argument("--max-tokens", type=int, default=4096, help="padded tokens per forward")
    parser.add_argument("--block-lines", type=int, default=256, help="--shard-block-lines of every run")
    parser.add_argument("--retrieve-docs", type=int, default=200_000, help="synthetic documents of retrieve")
    parser.add_argument("--retrieve-queries", type=int, default=4000, help="synthetic queries of retrieve")
    add_smoke_option(parser)
    args = shrink(parser.parse_args(), shape="tiny", lines=40, tokens=32, updates=2, block_lines=8,
                  retrieve_docs=2000, retrieve_queries=40)
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
        walls = retrieve_walls(root, args.retrieve_docs, args.retrieve_queries, threads)
        print(f"{'retrieve':20s} 1 rank {walls[1]:7.1f} s, 2 ranks {walls[2]:7.1f} s: {walls[1] / walls[2]:.2f}x; "
              f"outputs identical ({args.retrieve_queries} queries, {args.retrieve_docs:,} documents)")
        ratios.append(f"ratio_retrieve={walls[1] / walls[2]:.2f}")
    print(" ".join(ratios))


if __name__ == "__main__":
    main()
