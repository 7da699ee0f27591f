"""The work of ``fairseq-maskplug-retrieve`` (``preprocess/retrieve.py`` parses its options, ``args``): every input
and output checked before any work (:func:`check_outputs`), the index built, in corpus shards, or reused
(:func:`open_searcher`), the queries answered in one process or in query shards (:func:`run`), and ``--out`` written
atomically (:func:`write_outputs`; the parts of query shards merged by :func:`merge_query_shards`)."""

import json
import os
import sys
import time
from pathlib import Path


def analyser_of(args):
    from . import Analyser
    from .corpus import read_lines

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
    from ..common.atomic import check_creatable, check_output_directory
    from .index import MANIFEST, is_empty_directory

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
    from . import RankBm25Searcher
    from .index import (build_index, check_reusable, index_lock, index_settings,
                                                  is_empty_directory)
    from .search import open_bm25s

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
            checked = ("every file's SHA-256 checked" if args.verify_data else
                       "its files checked by length, not content: --verify-data hashes them")
            print(f"[retrieve] reusing the index {args.index} ({manifest['documents']} documents; {checked})",
                  file=sys.stderr)
        else:
            from .run import default_workers

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
    from ..integration.launch import detect_launch

    if args.build_shard is not None:
        return args.build_shard, None
    launch = detect_launch(os.environ)
    if args.corpus_shards > 1 and launch is not None and launch.world_size == args.corpus_shards:
        return launch.rank, launch
    return None


def build_corpus_shard(args, analyser, settings):
    """Build this job's corpus shard (:mod:`~fairseq_maskplug.retrieval.index_shards`); the index's manifest
    once it is whole, else None."""
    from .index_shards import build_index_shard
    from ..tools.sharding import Shard, meet

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
    from ..tools.binarize import atomic_directory
    from .corpus import read_lines
    from .run import union_in_corpus_order

    union = union_in_corpus_order(found.best_ranks())
    queries = len(found.hits)
    with atomic_directory(Path(out), COMMAND, WRITES, keep_others=True) as tmp:
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
    from ..common.file_records import file_sha256

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
    from ..common.locks import OutputLock

    with OutputLock(out, COMMAND):  # one writer of --out (OUT.lock), as training's --save-dir
        return _merge_query_shards(out)


def _merge_query_shards(out: str) -> dict:
    from ..common.atomic import check_output_directory
    from ..common.file_records import check_same_content
    from .query_shards import parts_directory, read_parts, remove_parts
    from .run import Retrieval

    parts = parts_directory(out)
    hits, seconds, options = read_parts(parts)
    check_output_directory(out, "--out", COMMAND, legacy=WRITES)
    check_same_content(options["corpus"], options["settings"]["corpus_sha256"], "--corpus", "the query shards")
    found = Retrieval.of(hits, options["top_k"])
    summary = write_outputs(out, options["corpus"], options, found, seconds)
    remove_parts(parts)
    report(summary, found, options["queries_file"], out)
    return summary


def run(args) -> int:
    """The command's work (:func:`run_checked`); a run in one process holds ``--out``'s lock (``OUT.lock``, one
    writer, as training's ``--save-dir``) from before any work to its end."""
    from ..common.locks import lock_output
    from ..tools.sharding import shard_of

    if not args.queries or shard_of(args).num_shards > 1:
        return run_checked(args)
    check_outputs(args)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)  # the lock file's directory
    lock = lock_output(args.out, COMMAND)
    try:
        return run_checked(args)
    finally:
        lock.release()


def run_checked(args) -> int:
    """Every input and output checked, then the index built or opened and the queries run."""
    from .corpus import read_queries
    from .query_shards import (check_parts_directory, part_done, parts_directory,
                                                         query_range, write_part)
    from .rake import rake_query
    from .run import default_workers, retrieve
    from ..tools.sharding import shard_of, wait_for_every_shard

    shard = shard_of(args) if args.queries else None
    check_outputs(args)
    if shard is not None and shard.num_shards > 1:
        check_parts_directory(parts_directory(args.out))
    if args.backend == "bm25s" and build_shard_of(args) is not None:
        from . import index_shards
        from ..tools.pass_parts import check_parts_directory as check_index_parts

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
