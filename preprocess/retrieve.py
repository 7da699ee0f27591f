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
import sys

from fairseq_maskplug.common.option_ranges import number
from fairseq_maskplug.retrieval.retrieve_command import run
from fairseq_maskplug.tools.sharding import add_shard_options

from . import HelpFormatter, add_version, command_main


def parse_args(argv=None):
    from fairseq_maskplug.retrieval.analysis import B, K1, TOKEN_PATTERN
    from fairseq_maskplug.retrieval.index import CHUNK_DOCS

    parser = argparse.ArgumentParser(prog="fairseq-maskplug-retrieve", description=__doc__,
                                     formatter_class=HelpFormatter)
    add_version(parser)
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


main = command_main(parse_args, run)


if __name__ == "__main__":
    sys.exit(main())
