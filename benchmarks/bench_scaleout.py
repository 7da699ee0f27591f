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
``bench_bm25.py``, top 50, one query process per rank, the index built beforehand and shared); ``select``
(DSIR) in document shards on the same corpus with the queries as its target; ``pmi-units`` on the corpus's
first ``--pmi-lines`` lines, ``informask`` on its first ``--informask-lines``, ``difference`` on its first
``--difference-lines`` (as target and general corpus). Their outputs must be byte-identical. The last line is
``ratio_pll=<1-rank wall / 2-rank wall> ratio_tag=<the same> ratio_retrieve=... ratio_select=...
ratio_pmi=... ratio_informask=... ratio_difference=...``.

    python benchmarks/bench_scaleout.py [--lines 2000] [--shape quickstart]   # about 8 min on 2 cores
"""

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
from smoke import benchmark_parser, shrink  # noqa: E402
from bench_bm25 import write_corpus, zipf_words  # noqa: E402

PRODUCERS = (("pll", "score-pll", ["--word-starts", "token"]), ("tag", "annotate-importance", []))
STAGES = ("pll", "tag", "retrieve", "select", "pmi", "informask", "difference")


def track(data: Path, name: str) -> dict:
    return {p.name: p.read_bytes() for p in sorted(data.glob(f"train.{name}.*")) if "preview" not in p.name}


def producer_args(command, checkpoint, data, name, extra) -> list:
    """The command line of ``command`` writing the track ``name`` of ``data``'s train split."""
    return [BIN / f"fairseq-maskplug-{command}", "--checkpoint", checkpoint, "--data", data, "--splits", "train",
            "--name", name, *extra]


def one_vs_two(name: str, command_args, outputs, threads: int) -> dict:
    """Wall seconds of ``command_args(ranks)`` as one process and as two torchrun ranks; ``outputs(ranks)``
    (what the run wrote, as bytes) must be the same."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore")
    walls, written = {}, {}
    for ranks in (1, 2):
        args = command_args(ranks)
        if ranks > 1:
            args = [BIN / "torchrun", "--standalone", "--nproc-per-node", str(ranks), *args]
        start = time.perf_counter()
        run_checked(args, env=env)
        walls[ranks] = time.perf_counter() - start
        written[ranks] = outputs(ranks)
    if not written[1] or written[1] != written[2]:
        raise SystemExit(f"{name}: the 2-rank output differs from the 1-rank one")
    return walls


def zipf_corpus(root: Path, docs: int, queries: int) -> None:
    """``corpus.txt`` (as ``bench_bm25.py``) and ``queries.txt``: 20 Zipf words each."""
    import numpy as np

    write_corpus(root / "corpus.txt", docs, 50_000, seed=0)
    words, p = zipf_words(50_000)
    rng = np.random.default_rng(1)
    (root / "queries.txt").write_text("".join(" ".join(words[rng.choice(len(words), size=20, p=p)]) + "\n"
                                              for _ in range(queries)))


def out_files(out: Path) -> dict:
    return {name: (out / name).read_bytes() for name in ("provenance.tsv", "retrieved.ids", "retrieved.txt")}


def retrieve_walls(root: Path, threads: int) -> dict:
    """``retrieve`` in query shards over an index built beforehand and shared, one query process per rank."""
    common = [BIN / "fairseq-maskplug-retrieve", "--corpus", root / "corpus.txt", "--index", root / "index",
              "--top-k", "50"]
    run_checked(common, env=dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore"))  # the index
    return one_vs_two("retrieve", lambda ranks: [*common, "--queries", root / "queries.txt", "--out",
                                                 root / f"retrieved{ranks}", "--workers", "1"],
                      lambda ranks: out_files(root / f"retrieved{ranks}"), threads)


def select_walls(root: Path, threads: int) -> dict:
    """``select`` (DSIR) in document shards: the queries as the target, 1,000 documents drawn."""
    return one_vs_two("select", lambda ranks: [BIN / "fairseq-maskplug-select", "--corpus", root / "corpus.txt",
                                               "--target", root / "queries.txt", "--num-docs", "1000", "--out",
                                               root / f"selected{ranks}"],
                      lambda ranks: out_files(root / f"selected{ranks}"), threads)


def corpus_data(root: Path, name: str, lines: int) -> dict:
    """The Zipf corpus's first ``lines`` lines binarized (words are tokens; valid = train), one copy per run:
    ``{ranks: directory}``."""
    import itertools

    from gpu_acceptance import preprocess, write_lines

    with open(root / "corpus.txt") as corpus:
        text = write_lines(root / f"{name}.txt", (line.rstrip("\n") for line in itertools.islice(corpus, lines)))
    data = {ranks: root / f"{name}{ranks}" for ranks in (1, 2)}
    for path in data.values():
        preprocess(path, text, "--validpref", text)
    return data


def pmi_walls(root: Path, lines: int, block_lines: int, threads: int) -> dict:
    """``pmi-units`` on ``lines`` lines of the Zipf corpus."""
    data = corpus_data(root, "pmi", lines)
    return one_vs_two("pmi-units", lambda ranks: [BIN / "fairseq-maskplug-pmi-units", "--data", data[ranks],
                                                  "--splits", "train", "--shard-block-lines", str(block_lines)],
                      lambda ranks: track(data[ranks], "pmi_units"), threads)


def informask_walls(root: Path, lines: int, block_lines: int, threads: int) -> dict:
    """``informask`` on ``lines`` lines of the Zipf corpus (its pairs grow with the square of a line's length:
    fewer lines than pmi-units)."""
    data = corpus_data(root, "informask", lines)
    return one_vs_two("informask", lambda ranks: [BIN / "fairseq-maskplug-informask", "--data", data[ranks],
                                                  "--splits", "train", "--shard-block-lines", str(block_lines)],
                      lambda ranks: track(data[ranks], "informask_rate"), threads)


def difference_walls(root: Path, lines: int, block_lines: int, threads: int) -> dict:
    """``difference`` of ``lines`` lines of the Zipf corpus against the same lines as the general corpus (the
    counts are what is measured; the anchors are then the corpus's own rarest words), with the input embeddings
    of a tiny masked LM trained 2 updates on them."""
    data = corpus_data(root, "difference", lines)
    run_checked([BIN / "fairseq-maskplug-train", data[1], "--task", "guided_mlm", "--arch", "roberta_base",
                 "--encoder-layers", "1", "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
                 "--encoder-attention-heads", "2", "--tokens-per-sample", "64", "--max-positions", "64", "--cpu",
                 "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "8", "--max-update", "2",
                 "--disable-validation", "--no-progress-bar", "--num-workers", "0", "--save-dir", root / "difference_ck"],
                env=dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore"))
    checkpoint = root / "difference_ck" / "checkpoint_last.pt"
    return one_vs_two("difference", lambda ranks: [BIN / "fairseq-maskplug-difference", "--data", data[ranks],
                                                   "--general", data[ranks], "--general-split", "valid",
                                                   "--checkpoint", checkpoint, "--splits", "train",
                                                   "--shard-block-lines", str(block_lines)],
                      lambda ranks: track(data[ranks], "difference_score"), threads)


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="quickstart", help="the models' shape")
    parser.add_argument("--lines", type=int, default=2000, help="synthetic lines")
    parser.add_argument("--tokens", type=int, default=64, help="synthetic line length and model positions")
    parser.add_argument("--updates", type=int, default=20, help="training updates of the models")
    parser.add_argument("--max-tokens", type=int, default=4096, help="padded tokens per forward")
    parser.add_argument("--block-lines", type=int, default=256, help="--shard-block-lines of every run")
    parser.add_argument("--retrieve-docs", type=int, default=200_000, help="synthetic documents of retrieve")
    parser.add_argument("--retrieve-queries", type=int, default=4000,
                        help="synthetic queries of retrieve (select's target texts)")
    parser.add_argument("--pmi-lines", type=int, default=50_000, help="lines of the corpus pmi-units runs on")
    parser.add_argument("--pmi-block-lines", type=int, default=1024,
                        help="--shard-block-lines of pmi-units, informask and difference")
    parser.add_argument("--informask-lines", type=int, default=10_000, help="lines of the corpus informask runs on")
    parser.add_argument("--difference-lines", type=int, default=200_000,
                        help="lines of the corpus difference counts (as its target and as its general corpus)")
    parser.add_argument("--stages", default=",".join(STAGES),
                        help=f"comma-separated stages to measure, of {','.join(STAGES)} (default: all)")
    args = shrink(parser.parse_args(), shape="tiny", lines=40, tokens=32, updates=2, block_lines=8,
                  retrieve_docs=2000, retrieve_queries=40, pmi_lines=200, pmi_block_lines=16, informask_lines=100,
                  difference_lines=200)
    stages = args.stages.split(",")
    if not stages or set(stages) - set(STAGES):
        parser.error(f"--stages: give some of {','.join(STAGES)}, got {args.stages!r}")
    cores = os.cpu_count() or 2
    threads = max(1, cores // 2)  # per process, in both runs: the same kernels, the same rounding
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        producers = [p for p in PRODUCERS if p[0] in stages]
        if producers:
            make_data(root, args.lines, args.tokens, vocab=8000)
            checkpoints = dict(zip(("pll", "tag"), train_models(root, args)[:2]))
        print(f"{args.lines} synthetic lines, {args.shape} shape, {cores} cores, {threads} threads per process; "
              f"--shard-block-lines {args.block_lines} --max-tokens {args.max_tokens}")
        ratios = []
        for short, command, extra in producers:
            options = [*extra, "--shard-block-lines", str(args.block_lines), "--max-tokens", str(args.max_tokens)]
            data = {ranks: root / f"{short}{ranks}" for ranks in (1, 2)}
            for copy in data.values():  # a copy of the data each: every run writes its own track
                shutil.copytree(root / "mlm", copy)
            walls = one_vs_two(command, lambda ranks: producer_args(command, checkpoints[short], data[ranks], short,
                                                                    options),
                               lambda ranks: track(data[ranks], short), threads)
            print(f"{command:20s} 1 rank {walls[1]:7.1f} s, 2 ranks {walls[2]:7.1f} s: "
                  f"{walls[1] / walls[2]:.2f}x; tracks identical")
            ratios.append(f"ratio_{short}={walls[1] / walls[2]:.2f}")
        if {"retrieve", "select", "pmi", "informask", "difference"} & set(stages):
            zipf_corpus(root, args.retrieve_docs, args.retrieve_queries)
        others = (("retrieve", lambda: retrieve_walls(root, threads),
                   f"outputs identical ({args.retrieve_queries} queries, {args.retrieve_docs:,} documents)"),
                  ("select", lambda: select_walls(root, threads),
                   f"outputs identical ({args.retrieve_docs:,} documents)"),
                  ("pmi", lambda: pmi_walls(root, args.pmi_lines, args.pmi_block_lines, threads),
                   f"tracks identical ({args.pmi_lines:,} lines)"),
                  ("informask", lambda: informask_walls(root, args.informask_lines, args.pmi_block_lines, threads),
                   f"tracks identical ({args.informask_lines:,} lines)"),
                  ("difference", lambda: difference_walls(root, args.difference_lines, args.pmi_block_lines, threads),
                   f"tracks identical ({args.difference_lines:,} lines)"))
        for short, measure, what in others:
            if short in stages:
                walls = measure()
                name = "pmi-units" if short == "pmi" else short
                print(f"{name:20s} 1 rank {walls[1]:7.1f} s, 2 ranks {walls[2]:7.1f} s: "
                      f"{walls[1] / walls[2]:.2f}x; {what}")
                ratios.append(f"ratio_{short}={walls[1] / walls[2]:.2f}")
    print(" ".join(ratios))


if __name__ == "__main__":
    main()
