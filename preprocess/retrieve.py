"""Retrieve task-relevant documents from a general corpus with BM25 (TLM, Yao et al. 2022, Sec. 3.1).

Each line of ``--queries`` (a task's training texts, one per line) is a query into
``--corpus`` (one document per line); the ``--top-k`` best documents of every query are
kept and their union is written, de-duplicated, in corpus order. Index once, query many: the
``bm25s`` backend keeps its index in ``--index`` (built in chunks, memory-mapped when read)
and reuses it when the corpus content and the scoring settings are unchanged.

Example (index the corpus, then retrieve for a task)::

    fairseq-maskplug-retrieve --corpus general.txt --index general.bm25 \\
        --queries task.train.txt --top-k 50 --out retrieved/

Output in ``--out`` (a new or empty directory, or this command's earlier output, replaced
atomically; never a directory that is, holds or lies in another input or output):
``retrieved.txt`` (the documents), ``retrieved.ids`` (their 0-based corpus line numbers),
``provenance.tsv`` (``query rank doc score``: one row per query and rank, 0-based line numbers,
1-based rank) and
``summary.json`` (counts, settings, timings, and every query that matched no document,
with its line number). Without ``--queries`` only the index is built.

Defaults follow what the TLM authors' Elasticsearch index computed: Lucene BM25 (k1 1.2,
b 0.75, idf ln(1 + (N - n + 0.5)/(n + 0.5))) over lower-cased ``\\w+`` tokens, no stop
words, no stemming. ``--rake``: the query is the 20 best RAKE keyphrases of the text.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

from fairseq_maskplug.common.option_ranges import number
from fairseq_maskplug.tools.sharding import add_shard_options

from . import HelpFormatter, command_main


def parse_args(argv=None):
    from fairseq_maskplug.retrieval.analysis import B, K1, TOKEN_PATTERN
    from fairseq_maskplug.retrieval.index import CHUNK_DOCS

    parser = argparse.ArgumentParser(prog="fairseq-maskplug-retrieve", description=__doc__,
                                     formatter_class=HelpFormatter)
    parser.add_argument("--corpus", required=True, help="general corpus: UTF-8, one document per line")
    parser.add_argument("--queries", help="task texts: UTF-8, one query per line, none empty (without it: "
                                          "only build --index)")
    parser.add_argument("--out", help="output directory (required with --queries): new or empty, or this "
                                      "command's earlier output, which is replaced atomically")
    parser.add_argument("--index", help="index directory of the bm25s backend: built if absent, reused if "
                                        "built from the same corpus content and settings, refused otherwise")
    parser.add_argument("--backend", choices=["bm25s", "rank_bm25"], default="bm25s",
                        help="bm25s: chunked memory-mapped index, fast; rank_bm25: the reference, the "
                             "corpus analysed in memory on every run (no --index)")
    parser.add_argument("--top-k", type=number("[1, inf)", int), default=50,
                        help="documents kept per query (the paper: 50, 500 or 5000 by task)")
    parser.add_argument("--rake", action="store_true",
                        help="query with the 20 best RAKE keyphrases of each text (the authors' --rake)")
    parser.add_argument("--k1", type=number("[0, inf)", float), default=K1, help="BM25 k1 (Lucene default)")
    parser.add_argument("--b", type=number("[0, 1]", float), default=B, help="BM25 b (Lucene default)")
    parser.add_argument("--token-pattern", default=TOKEN_PATTERN, help="regular expression of a token")
    parser.add_argument("--keep-case", action="store_true", help="do not lower-case before tokenising")
    parser.add_argument("--stopwords", help="file of stop words (one per line) removed from documents and "
                                            "queries (default: none, as the authors)")
    parser.add_argument("--chunk-docs", type=number("[1, inf)", int), default=CHUNK_DOCS,
                        help="documents analysed per chunk while indexing (bounds the memory used; ours: the "
                             "fastest and leanest of 10,000 to 100,000 at 1M documents of 50-200 words)")
    parser.add_argument("--corpus-shards", type=number("[1, inf)", int), default=1,
                        help="build the index as this many shards of contiguous documents, every posting scored with "
                             "the whole corpus's statistics (N, document frequencies, average length): every shard "
                             "answers every query and their top-k lists are merged into the one-index result "
                             "(ours; docs/scale.md)")
    parser.add_argument("--build-shard", type=number("[0, inf)", int), default=None,
                        help="build only this corpus shard of --index (of --corpus-shards), as one of several jobs "
                             "(a Slurm array, separate machines): each job's first run writes its shard's "
                             "statistics, its second run scores its postings with every shard's, and the last one "
                             "assembles the index (docs/scale.md). Under torchrun/srun with as many ranks as "
                             "--corpus-shards, each rank builds its shard without it")
    parser.add_argument("--verify-data", action="store_true",
                        help="before reusing --index, compare every index file with the SHA-256 its manifest "
                             "records (one pass over the index; the files' lengths are always compared)")
    parser.add_argument("--workers", type=number("[1, inf)", int), default=None,
                        help="processes of the bm25s backend: the index's analysis (pass 1) and the queries "
                             "(default: the CPU cores)")
    add_shard_options(parser, "queries")
    args = parser.parse_args(argv)
    if args.num_shards is not None and not args.queries:
        parser.error("--num-shards shards the queries: give --queries and --out (the index is built whole)")
    if args.queries and not args.out:
        parser.error("--out is required with --queries")
    if args.out and not args.queries:
        parser.error("--out needs --queries")
    if args.backend == "bm25s" and not args.index:
        parser.error("--backend bm25s needs --index DIR (built there if absent)")
    if args.backend == "rank_bm25" and args.corpus_shards > 1:
        parser.error("--corpus-shards belongs to --backend bm25s; rank_bm25 keeps no index")
    if args.backend == "rank_bm25" and args.index:
        parser.error("--index belongs to --backend bm25s; rank_bm25 keeps no index")
    if args.build_shard is not None and (args.corpus_shards < 2 or args.build_shard >= args.corpus_shards):
        parser.error(f"--build-shard {args.build_shard} needs --corpus-shards K > 1 and an id below K")
    if args.build_shard is not None and args.queries:
        parser.error("--build-shard builds one corpus shard of the index: run the queries once it is whole")
    if not args.queries and args.backend == "rank_bm25":
        parser.error("--backend rank_bm25 builds no index: give --queries and --out")
    return args


def analyser_of(args):
    from fairseq_maskplug.retrieval import Analyser
    from fairseq_maskplug.retrieval.corpus import read_lines

    stopwords = frozenset()
    if args.stopwords:
        stopwords = frozenset(w.strip().lower() if not args.keep_case else w.strip()
                              for _, w in read_lines(args.stopwords, "stop-word file") if w.strip())
    return Analyser(args.token_pattern, not args.keep_case, stopwords)


COMMAND = "fairseq-maskplug-retrieve"
WRITES = ("provenance.tsv", "retrieved.txt", "retrieved.ids", "summary.json")  # --out before owner files


def check_outputs(args) -> None:
    """Refuse now, before any work: an ``--out`` this command may not replace (absent, empty, or
    its own earlier output: ``atomic.check_output_directory``), outputs that are, hold or lie in
    an input or each other, and an ``--index`` that is neither absent, empty, nor an index."""
    from fairseq_maskplug.common.atomic import check_creatable, check_output_directory
    from fairseq_maskplug.retrieval.index import MANIFEST, is_empty_directory

    inputs = [("--corpus", args.corpus), ("--queries", args.queries), ("--stopwords", args.stopwords)]
    if args.out:
        check_output_directory(args.out, "--out", COMMAND, inputs + [("--index", args.index)], legacy=WRITES)
    if args.index:
        index = os.path.realpath(args.index)
        for option, path in inputs:
            if path and (os.path.realpath(path) + os.sep).startswith(index.rstrip(os.sep) + os.sep):
                raise ValueError(f"--index {args.index} holds {option} {path}: give the index a directory of its own")
        if os.path.exists(index) and not (os.path.isfile(os.path.join(index, MANIFEST)) or is_empty_directory(index)):
            raise ValueError(f"--index {args.index} exists and is not an index of this tool (no {MANIFEST}) nor an "
                             "empty directory: give a new --index directory")
        check_creatable(index)


def open_searcher(args, analyser):
    """The searcher of ``--backend``, a description of its index, and what its scores depend on (the corpus's
    content and the scoring settings, :func:`~fairseq_maskplug.retrieval.index.index_settings`)."""
    from fairseq_maskplug.retrieval import RankBm25Searcher
    from fairseq_maskplug.retrieval.index import (build_index, check_reusable, index_lock, index_settings,
                                                  is_empty_directory)
    from fairseq_maskplug.retrieval.search import open_bm25s

    settings = index_settings(args.corpus, analyser, args.k1, args.b, args.corpus_shards)
    if args.backend == "rank_bm25":
        return RankBm25Searcher(args.corpus, analyser, args.k1, args.b), {"backend": "rank_bm25"}, settings
    if build_shard_of(args) is not None and not (os.path.exists(args.index) and not is_empty_directory(args.index)):
        manifest = build_corpus_shard(args, analyser, settings)
        if manifest is None:
            return None, None, settings
    with index_lock(args.index):
        if os.path.exists(args.index) and not is_empty_directory(args.index):
            manifest = check_reusable(args.index, settings, args.verify_data)
            print(f"[retrieve] reusing the index {args.index} ({manifest['documents']} documents)", file=sys.stderr)
        else:
            from fairseq_maskplug.retrieval.run import default_workers

            manifest = build_index(args.corpus, args.index, analyser, args.k1, args.b, args.chunk_docs,
                                   settings=settings, corpus_shards=args.corpus_shards,
                                   workers=args.workers or default_workers())
            shards = f" in {args.corpus_shards} corpus shards" if args.corpus_shards > 1 else ""
            print(f"[retrieve] indexed {manifest['documents']} documents, {manifest['terms']} terms{shards} in "
                  f"{manifest['build_seconds']:.1f} s -> {args.index}", file=sys.stderr)
    return open_bm25s(args.index, analyser), manifest, settings


def build_shard_of(args):
    """``(shard id, launch)`` of the corpus shard this job builds (``--build-shard``, or the rank of a launch of
    ``--corpus-shards`` ranks), or None: the index is built whole by one process."""
    from fairseq_maskplug.integration.launch import detect_launch

    if args.build_shard is not None:
        return args.build_shard, None
    launch = detect_launch(os.environ)
    if args.corpus_shards > 1 and launch is not None and launch.world_size == args.corpus_shards:
        return launch.rank, launch
    return None


def build_corpus_shard(args, analyser, settings):
    """Build this job's corpus shard (:mod:`~fairseq_maskplug.retrieval.index_shards`); the index's manifest
    once it is whole, else None."""
    from fairseq_maskplug.retrieval.index_shards import build_index_shard
    from fairseq_maskplug.tools.sharding import Shard, meet

    shard_id, launch = build_shard_of(args)
    shard = Shard(args.corpus_shards, shard_id, launch)
    manifest = build_index_shard(args.corpus, args.index, analyser, args.k1, args.b, args.corpus_shards, shard_id,
                                 settings, COMMAND, args.chunk_docs, meet=lambda: meet(shard),
                                 say=lambda line: print(f"[retrieve] {line}", file=sys.stderr, flush=True))
    if manifest is not None:
        print(f"[retrieve] the index {args.index} is whole: {manifest['documents']} documents, {manifest['terms']} "
              f"terms in {args.corpus_shards} corpus shards", file=sys.stderr)
    return manifest


#: what the summary reports of the index
INDEX_INFO = ("documents", "scored_documents", "terms", "avgdl", "k1", "b", "corpus_shards", "analyser")


def write_outputs(out: str, corpus: str, options: dict, found, seconds: float) -> dict:
    """``--out``, written atomically from the hits of every query (``found``); ``options``: the run's
    settings as :func:`run_options` records them."""
    from fairseq_maskplug.tools.binarize import atomic_directory
    from fairseq_maskplug.retrieval.corpus import read_lines
    from fairseq_maskplug.retrieval.run import union_in_corpus_order

    union = union_in_corpus_order(found.best_ranks())
    queries = len(found.hits)
    with atomic_directory(Path(out), COMMAND, WRITES) as tmp:
        with open(tmp / "provenance.tsv", "w") as f:
            f.write("query\trank\tdoc\tscore\n")
            for q, (docs, scores) in enumerate(found.hits):
                for rank, (doc, score) in enumerate(zip(docs.tolist(), scores.tolist()), 1):
                    f.write(f"{q}\t{rank}\t{doc}\t{score:.7g}\n")
        wanted = set(union.tolist())
        with open(tmp / "retrieved.txt", "w", encoding="utf-8") as f:
            for n, text in read_lines(corpus, "corpus"):
                if n in wanted:
                    f.write(text + "\n")
        with open(tmp / "retrieved.ids", "w") as f:
            f.writelines(f"{doc}\n" for doc in union.tolist())
        summary = {
            "queries": queries, "top_k": options["top_k"], "backend": options["backend"], "rake": options["rake"],
            "documents_retrieved": int(len(union)), "rows": sum(len(d) for d, _ in found.hits),
            "queries_without_match": len(found.unscored), "queries_with_fewer_than_k": len(found.short),
            "query_seconds": round(seconds, 3), "queries_per_second": round(queries / max(seconds, 1e-9), 1),
            "corpus": os.path.abspath(corpus), "index": options["index"],
            "unmatched_query_lines": [q + 1 for q in found.unscored],
        }
        (tmp / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def run_options(args, queries: int, index_info: dict, settings: dict) -> dict:
    """What the hits depend on, recorded in every query shard's part and compared on a rerun and at the
    merge, with what the merge needs to write ``--out``."""
    from fairseq_maskplug.common.file_records import file_sha256

    return {"queries_file": os.path.abspath(args.queries), "queries_sha256": file_sha256(args.queries),
            "queries": queries, "top_k": args.top_k, "rake": args.rake, "backend": args.backend,
            "corpus": os.path.abspath(args.corpus), "out": os.path.abspath(args.out), "settings": settings,
            "index": {k: index_info[k] for k in INDEX_INFO if k in index_info}}


def report(summary: dict, found, queries_file: str, out: str) -> None:
    """The command's stderr warning about queries that matched nothing, and its one-line summary."""
    if found.unscored:
        lines = ", ".join(str(q + 1) for q in found.unscored[:10])
        more = f" and {len(found.unscored) - 10} more" if len(found.unscored) > 10 else ""
        print(f"warning: {len(found.unscored)} of {len(found.hits)} queries match no document (no token of theirs "
              f"is in the corpus): {queries_file} lines {lines}{more}; listed in {out}/summary.json",
              file=sys.stderr)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("index", "unmatched_query_lines")}))


def merge_query_shards(out: str) -> dict:
    """Write ``out`` from the parts its query shards wrote (:mod:`~fairseq_maskplug.retrieval.query_shards`),
    then remove them; returns the summary (the merge step of rank 0, and of ``fairseq-maskplug-merge-shards``)."""
    from fairseq_maskplug.common.atomic import check_output_directory
    from fairseq_maskplug.retrieval.query_shards import parts_directory, read_parts, remove_parts
    from fairseq_maskplug.retrieval.run import Retrieval

    parts = parts_directory(out)
    hits, seconds, options = read_parts(parts)
    check_output_directory(out, "--out", COMMAND, legacy=WRITES)
    found = Retrieval.of(hits, options["top_k"])
    summary = write_outputs(out, options["corpus"], options, found, seconds)
    remove_parts(parts)
    report(summary, found, options["queries_file"], out)
    return summary


def run(args) -> int:
    """The command's work: every input and output checked, then the index built or opened and the queries run."""
    from fairseq_maskplug.retrieval.corpus import read_queries
    from fairseq_maskplug.retrieval.query_shards import (check_parts_directory, part_done, parts_directory,
                                                         query_range, write_part)
    from fairseq_maskplug.retrieval.rake import rake_query
    from fairseq_maskplug.retrieval.run import default_workers, retrieve
    from fairseq_maskplug.tools.sharding import shard_of, wait_for_every_shard

    shard = shard_of(args) if args.queries else None
    check_outputs(args)
    if shard is not None and shard.num_shards > 1:
        check_parts_directory(parts_directory(args.out))
    if args.backend == "bm25s" and build_shard_of(args) is not None:
        from fairseq_maskplug.retrieval import index_shards
        from fairseq_maskplug.tools.pass_parts import check_parts_directory as check_index_parts

        check_index_parts(index_shards.parts_directory(args.index), COMMAND)
    analyser = analyser_of(args)
    queries = read_queries(args.queries) if args.queries else []  # every line checked first
    searcher, index_info, settings = open_searcher(args, analyser)
    if not queries or searcher is None:
        return 0
    options = run_options(args, len(queries), index_info, settings)
    workers = args.workers or default_workers()
    if shard.num_shards == 1:
        started = time.perf_counter()
        texts = [rake_query(q) for q in queries] if args.rake else queries
        found = retrieve(searcher, texts, args.top_k, workers if args.backend == "bm25s" else 1)
        summary = write_outputs(args.out, args.corpus, options, found, time.perf_counter() - started)
        report(summary, found, args.queries, args.out)
        return 0
    parts = parts_directory(args.out)
    mine = query_range(len(queries), shard.num_shards, shard.shard_id)
    if part_done(parts, shard.num_shards, shard.shard_id, options):
        print(f"query shard {shard.shard_id} of {shard.num_shards} is already written: skipped")
    else:
        started = time.perf_counter()
        texts = [rake_query(q) if args.rake else q for q in queries[mine.start:mine.stop]]
        found = retrieve(searcher, texts, args.top_k, workers if args.backend == "bm25s" else 1)
        wrote = write_part(parts, shard.num_shards, shard.shard_id, mine, found.hits,
                           time.perf_counter() - started, options)
        print(f"query shard {shard.shard_id} of {shard.num_shards}: {wrote}")
    wait_for_every_shard(shard)
    if shard.merges:
        merge_query_shards(args.out)
    else:
        print(f"when every shard is written: fairseq-maskplug-merge-shards {args.out}")
    return 0


main = command_main(parse_args, run)


if __name__ == "__main__":
    sys.exit(main())
