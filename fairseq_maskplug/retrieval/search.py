"""The two BM25 backends and the shared top-K: the same documents in the same order from both.

* ``bm25s``: the chunked index of :mod:`.index`, opened with ``bm25s.BM25.load(mmap=True)``; a
  query is scored over its terms' postings (:func:`posting_scores`: a sum of each query term's
  precomputed, float32 posting scores, in the order bm25s sums them, without bm25s's vector of one
  float per document).
* ``rank_bm25``: ``rank_bm25.BM25Okapi`` over the analysed corpus in memory, with its idf
  replaced by Lucene's and its scores divided by ``k1 + 1`` (Lucene 8 has no ``k1 + 1``
  factor), in float64. It re-reads the corpus every run: a reference, and a fallback for
  small corpora.

Both take only documents that match a query token (score > 0, as Elasticsearch returns
only matching documents) and break ties by the lower line number (:func:`top_k`), so
documents with equal scores (the same text, or the same counts of the query's terms at the
same length) come in the same order from both. Two documents whose scores differ by less
than float32 precision (about 1e-7 relative) may come in either order: bm25s sums float32
posting scores, rank_bm25 computes in float64.
"""

import math
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


def posting_scores(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                   term_ids: List[int]) -> Tuple[np.ndarray, np.ndarray]:
    """``(documents, scores)`` of the documents holding a query term, from a CSC index (a column of posting
    scores per term): each document's posting scores summed in the query's term order, in the index's dtype,
    as bm25s sums them into its vector of one float per document, but over the postings alone: a query's
    cost follows its postings, not the number of documents. A repeated term counts twice (bm25s too)."""
    if not term_ids:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=data.dtype)
    spans = [(int(indptr[t]), int(indptr[t + 1])) for t in term_ids]
    docs = np.concatenate([indices[start:end] for start, end in spans])
    values = np.concatenate([data[start:end] for start, end in spans])
    found, where = np.unique(docs, return_inverse=True)
    sums = np.zeros(len(found), dtype=data.dtype)
    np.add.at(sums, where, values)  # in posting order: each document's terms in query order
    return found.astype(np.int64), sums


def top_k_of(docs: np.ndarray, scores: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`top_k` of sparse scores (``docs`` with their ``scores``; every other document 0): the same
    documents in the same order."""
    if k < 1:
        raise ValueError(f"--top-k must be >= 1, got {k}")
    positive = scores > 0
    docs, scores = docs[positive], scores[positive]
    order = np.lexsort((docs, -scores))[:k]
    return docs[order], scores[order]


class Bm25sSearcher:
    """Queries against an index directory written by :func:`~.index.build_index`."""

    name = "bm25s"

    def __init__(self, index_dir: str, analyser: Analyser):
        import bm25s

        self.analyser = analyser
        self.model = bm25s.BM25.load(index_dir, mmap=True, show_progress=False)
        self.vocab = self.model.vocab_dict
        self.num_docs = int(self.model.scores["num_docs"])

    def term_ids(self, query: str) -> List[int]:
        """The query's token ids in the index vocabulary; tokens the corpus never has are dropped."""
        return [self.vocab[t] for t in self.analyser.tokens(query) if t in self.vocab]

    def scores(self, query: str) -> np.ndarray:
        ids = self.term_ids(query)
        if not ids:
            return np.zeros(self.num_docs, dtype=np.float32)
        return self.model.get_scores_from_ids(ids)

    def search(self, query: str, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """The top ``k`` from the query terms' postings (:func:`posting_scores`), no per-document vector."""
        index = self.model.scores
        return top_k_of(*posting_scores(index["data"], index["indices"], index["indptr"], self.term_ids(query)), k)


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
