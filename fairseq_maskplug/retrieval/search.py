"""The two BM25 backends and the shared top-K: the same documents in the same order from both.

* ``bm25s``: the chunked index of :mod:`.index` (compressed postings, :mod:`.postings`, memory-mapped); a
  query is the sum of each of its terms' float32 posting scores, ranked by block-max MaxScore
  (:mod:`.maxscore`, numba); without numba (or ``maxscore=False``) over its postings alone
  (:class:`PostingScores`) when they are fewer than half the documents, else in a vector of one float per
  document: the same floats every way.
* ``rank_bm25``: ``rank_bm25.BM25Okapi`` over the analysed corpus in memory, with its idf
  replaced by Lucene's and its scores divided by ``k1 + 1`` (Lucene 8 has no ``k1 + 1``
  factor), in float64. It re-reads the corpus every run: a reference, and a fallback for
  small corpora.

Both take only documents that match a query token (score > 0, as Elasticsearch returns
only matching documents) and break ties by the lower line number (:func:`top_k`), so
documents with equal scores (the same text, or the same counts of the query's terms at the
same length) come in the same order from both. Two documents whose scores differ by less
than float32 precision (about 1e-7 relative) may come in either order: the index sums float32
posting scores, rank_bm25 computes in float64.
"""

import json
import math
import os
from typing import List, Tuple

import numpy as np

from .analysis import Analyser, check_bm25_parameters
from .corpus import read_lines


def top_k(scores: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """The ``k`` best documents with a positive score (ids, scores), best first, ties by the
    lower index."""
    if k < 1:
        raise ValueError(f"--top-k must be >= 1, got {k}")
    if len(scores) > k:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]  # the k-th largest score
        docs = np.flatnonzero(scores >= kth) if kth > 0 else np.flatnonzero(scores > 0)  # ties with it stay
    else:
        docs = np.flatnonzero(scores > 0)
    order = np.lexsort((docs, -scores[docs]))[:k]
    return docs[order], scores[docs[order]]


class PostingScores:
    """BM25 scores of one query at a time over its terms' postings alone (:class:`~.postings.Postings`), and
    their top k: a query's cost follows its postings, not the number of documents.

    Each document's posting scores are summed in the query's term order in float32, as :meth:`dense` sums
    them into a vector of one float per document (the same floats, bit for bit), into one such vector that
    lives as long as this object and of which only the postings' entries are written, read and reset. A
    repeated term counts twice."""

    def __init__(self, index):
        self.index = index
        self.sums = np.zeros(index.num_docs, dtype=np.float32)  # zero between queries

    def count(self, term_ids: List[int]) -> int:
        """How many postings the query's terms have."""
        return sum(self.index.count(t) for t in term_ids)

    def dense(self, term_ids: List[int]) -> np.ndarray:
        """Every document's score (float32, 0 where no query term occurs), summed term by term."""
        scores = np.zeros(self.index.num_docs, dtype=np.float32)
        for term in term_ids:
            docs, values = self.index.term_scores(term)
            scores[docs] += values  # a document once per term
        return scores

    def postings(self, term_ids: List[int]) -> Tuple[np.ndarray, np.ndarray]:
        """``(documents, scores)`` of every posting of the query's terms, one entry per posting, its
        document's whole score (the scores of the query's other terms included)."""
        if not term_ids:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        decoded = [self.index.term_scores(t) for t in term_ids]
        docs = np.concatenate([d for d, _ in decoded])
        np.add.at(self.sums, docs, np.concatenate([v for _, v in decoded]))
        scores = self.sums[docs]
        self.sums[docs] = 0
        return docs, scores

    def top_k(self, term_ids: List[int], k: int) -> Tuple[np.ndarray, np.ndarray]:
        """:func:`top_k` of the query's dense scores: the same documents, order and scores.

        A document holds at most one posting per query term, so the top ``k`` documents lie among the
        ``k x len(term_ids)`` highest postings (ties with the last of them kept), which alone are sorted."""
        if k < 1:
            raise ValueError(f"--top-k must be >= 1, got {k}")
        docs, scores = self.postings(term_ids)
        keep = min(len(docs), k * len(term_ids))
        if 0 < keep < len(docs):
            kth = np.partition(scores, len(docs) - keep)[len(docs) - keep]
            docs, scores = docs[scores >= kth], scores[scores >= kth]
        docs, first = np.unique(docs, return_index=True)
        scores = scores[first]
        docs, scores = docs[scores > 0], scores[scores > 0]
        order = np.lexsort((docs, -scores))[:k]
        return docs[order], scores[order]


class Bm25sSearcher:
    """Queries against an index directory written by :func:`~.index.build_index` (the ``bm25s`` backend: its
    name from the format it used before the compressed postings of :mod:`.postings`)."""

    name = "bm25s"
    #: without MaxScore: above this share of the documents in a query's postings, ranking the vector of every
    #: document's score beats sorting the postings (a micro-benchmark at 1M documents on the previous format:
    #: 14 ms against 6 ms with as many postings as documents, 1.3 ms against 43 ms with a tenth as many)
    DENSE_SHARE = 0.5

    def __init__(self, index_dir: str, analyser: Analyser, maxscore: bool = None):
        """``maxscore``: None takes MaxScore where numba is installed, False never, True or an error."""
        from .postings import Postings

        params = os.path.join(index_dir, "params.json")
        if not os.path.isfile(params):
            raise ValueError(f"{index_dir} holds no params.json: not an index of this version (compressed "
                             "postings); remove the --index directory to rebuild it")
        with open(params) as f:
            self.index = Postings(index_dir, json.load(f))
        self.analyser = analyser
        self.vocab = self.index.vocab
        self.num_docs = self.index.num_docs
        self.postings = PostingScores(self.index)
        self.maxscore = None
        if maxscore is not False:
            from . import maxscore as pruning

            if pruning.AVAILABLE:
                self.maxscore = pruning.MaxScore(self.index)
            elif maxscore:
                raise ValueError("MaxScore needs numba, which is not installed: pip install numba")

    def term_ids(self, query: str) -> List[int]:
        """The query's token ids in the index vocabulary; tokens the corpus never has are dropped."""
        return [self.vocab[t] for t in self.analyser.tokens(query) if t in self.vocab]

    def scores(self, query: str) -> np.ndarray:
        return self.postings.dense(self.term_ids(query))

    def search(self, query: str, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """The top ``k`` by block-max MaxScore (:mod:`.maxscore`; unless ``maxscore=False`` or numba is
        missing); else from the query terms' postings alone (:class:`PostingScores`, numpy) when they are fewer
        than :data:`DENSE_SHARE` of the documents, else from the vector of every document's score. The same
        documents, order and scores every way (tested)."""
        ids = self.term_ids(query)
        if self.maxscore is not None:
            return self.maxscore.top_k(ids, k)[:2]
        if self.postings.count(ids) > self.DENSE_SHARE * self.num_docs:
            return top_k(self.postings.dense(ids), k)
        return self.postings.top_k(ids, k)


def merge_top_k(hits: List[Tuple[np.ndarray, np.ndarray]], k: int) -> Tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of several top-k lists of disjoint documents, by score descending then document id
    ascending (:func:`top_k`'s order): each list holds its documents' ``k`` best, so the ``k`` best of all lie
    among them."""
    docs = np.concatenate([d for d, _ in hits]) if hits else np.zeros(0, dtype=np.int64)
    scores = np.concatenate([s for _, s in hits]) if hits else np.zeros(0, dtype=np.float32)
    order = np.lexsort((docs, -scores))[:k]
    return docs[order], scores[order]


class ShardedSearcher:
    """Queries against an index built in corpus shards (``build_index(corpus_shards=K)``): every shard
    answers with its top k, in its own document ids, which are offset by its first document and merged
    (:func:`merge_top_k`). Its postings hold the floats of the one-index build (global statistics) and each
    document's sum is taken in the query's term order either way, so the result is the one-index result."""

    name = "bm25s"

    def __init__(self, index_dir: str, analyser: Analyser, shards: List[dict]):
        import os

        self.shards = [(Bm25sSearcher(os.path.join(index_dir, shard["directory"]), analyser),
                        int(shard["first_document"])) for shard in shards]
        self.num_docs = sum(searcher.num_docs for searcher, _ in self.shards)

    def scores(self, query: str) -> np.ndarray:
        return np.concatenate([searcher.scores(query) for searcher, _ in self.shards])

    def search(self, query: str, k: int) -> Tuple[np.ndarray, np.ndarray]:
        hits = []
        for searcher, first in self.shards:
            docs, scores = searcher.search(query, k)
            hits.append((docs + first, scores))
        return merge_top_k(hits, k)


def open_bm25s(index_dir: str, analyser: Analyser):
    """The searcher of an index of :func:`~.index.build_index`: one index, or its corpus shards."""
    from .index import read_manifest

    shards = read_manifest(index_dir).get("shards")
    return ShardedSearcher(index_dir, analyser, shards) if shards else Bm25sSearcher(index_dir, analyser)


class RankBm25Searcher:
    """``rank_bm25.BM25Okapi`` with Lucene's idf and score scale over the analysed corpus."""

    name = "rank_bm25"

    def __init__(self, corpus: str, analyser: Analyser, k1: float, b: float, progress: bool = True):
        from rank_bm25 import BM25Okapi

        from ..common.progress import progress_bar

        check_bm25_parameters(k1, b)
        self.analyser, self.k1 = analyser, k1
        token_lists = [analyser.tokens(text) for _, text in progress_bar(
            read_lines(corpus, "corpus"), desc="rank_bm25 analyse", unit="doc", disable=None if progress else True)]
        self.num_docs = len(token_lists)
        # Lucene's N and avgdl count only documents with a token: rank_bm25 sees those alone
        self.scored_docs = np.array([i for i, t in enumerate(token_lists) if t], dtype=np.int64)
        if len(self.scored_docs) == 0:
            raise ValueError(f"{corpus}: no line of the corpus has a token the analyser keeps")

        class LuceneBM25Okapi(BM25Okapi):
            def _calc_idf(self, nd):  # Lucene: ln(1 + (N - n + 0.5) / (n + 0.5)), never negative
                for word, freq in nd.items():
                    self.idf[word] = math.log(1.0 + (self.corpus_size - freq + 0.5) / (freq + 0.5))

        self.model = LuceneBM25Okapi([token_lists[i] for i in self.scored_docs], k1=k1, b=b)

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(self.num_docs, dtype=np.float64)
        tokens = [t for t in self.analyser.tokens(query) if t in self.model.idf]
        if tokens:
            out[self.scored_docs] = self.model.get_scores(tokens) / (self.k1 + 1.0)
        return out

    def search(self, query: str, k: int) -> Tuple[np.ndarray, np.ndarray]:
        return top_k(self.scores(query), k)
