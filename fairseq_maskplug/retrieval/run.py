"""Run every query against a searcher: per-query top-K, the union, and what could not be scored."""

import os
from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np


@dataclass
class Retrieval:
    """What a run found: ``hits[q]`` = (doc ids, scores) of query ``q``, best first."""

    hits: List[tuple] = field(default_factory=list)
    unscored: List[int] = field(default_factory=list)  # queries without a token in the corpus
    short: List[int] = field(default_factory=list)  # queries matching fewer than k documents

    @classmethod
    def of(cls, hits: List[tuple], k: int) -> "Retrieval":
        """The run of these hits (one per query, in query order) at top ``k``."""
        out = cls(hits=list(hits))
        for q, (docs, _) in enumerate(out.hits):
            if len(docs) == 0:
                out.unscored.append(q)
            elif len(docs) < k:
                out.short.append(q)
        return out

    def best_ranks(self) -> Dict[int, int]:
        """Union over queries: each retrieved document with its best (smallest, 1-based) rank."""
        best: Dict[int, int] = {}
        for docs, _ in self.hits:
            for rank, doc in enumerate(docs.tolist(), 1):
                if rank < best.get(doc, rank + 1):
                    best[doc] = rank
        return best


_SEARCHER = None


def _search_chunk(args):
    queries, k = args
    return [_SEARCHER.search(q, k) for q in queries]


def retrieve(searcher, queries: List[str], k: int, workers: int = 1, progress: bool = True,
             chunk: int = 64) -> Retrieval:
    """Top-``k`` of every query; with ``workers`` > 1, in forked processes sharing the searcher
    (a memory-mapped index is shared through the page cache). Results are in query order."""
    global _SEARCHER
    from ..common.progress import progress_bar

    bar = progress_bar(total=len(queries), desc=f"retrieve ({searcher.name})", unit="query",
               disable=None if progress else True)
    chunks = [(queries[i:i + chunk], k) for i in range(0, len(queries), chunk)]
    _SEARCHER = searcher
    hits = []
    try:
        if workers > 1 and len(chunks) > 1:
            import multiprocessing

            with multiprocessing.get_context("fork").Pool(workers) as pool:
                for results in pool.imap(_search_chunk, chunks):
                    hits.extend(results)
                    bar.update(len(results))
        else:
            for item in chunks:
                results = _search_chunk(item)
                hits.extend(results)
                bar.update(len(results))
    finally:
        _SEARCHER = None
        bar.close()
    return Retrieval.of(hits, k)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def union_in_corpus_order(best: Dict[int, int]) -> np.ndarray:
    return np.array(sorted(best), dtype=np.int64)
