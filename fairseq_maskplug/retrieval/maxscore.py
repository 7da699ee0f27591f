"""Top-k BM25 by block-max MaxScore (Turtle & Flood 1995, "Query evaluation: strategies and
optimizations", Sec. 4, with per-block maxima as Lucene's ``MaxScoreBulkScorer``), with the exhaustive
path's exact scores and tie order.

A document's score is the sum, in the query's term order and in float32, of its posting scores of the
query's terms (bm25s's sum, :class:`~.search.PostingScores`). The documents are taken in windows of
``window`` ids. In each window every query term gets an upper bound ``m``: the largest score of its
blocks of ``block`` postings that reach into the window (:func:`block_maxima`). With the terms sorted by
``m`` ascending, once the k-th best score so far, ``theta``, exceeds ``m_1 + ... + m_j``, a document
holding none but the first ``j`` terms cannot enter the top k: only the other, *essential* terms'
postings are summed per document (into a window-sized array); the first ``j`` terms are then added,
largest ``m`` first (by a galloping search for few documents, or the term's postings in the window
added to all), and a document leaves the race as soon as its sum plus the ``m`` of the terms not yet
added is below ``theta``. The documents left are summed exactly and offered to the top k. Before k
documents are held, the k-th largest sum of the first window bounds the k-th score from below and
prunes in the same way.

Exactness: the bounds are float64 sums of float32 values inflated by ``(n + 1) * 2**-23`` relative (more
than the rounding of a float32 sum of ``n`` terms can move a score), and a document is dropped only when
its bound is *below* ``theta`` (a document with ``theta``'s score comes after the k-th, whose id is
lower, so it never enters). Every document offered is summed exactly as the exhaustive path sums it
(zeros for absent terms change no float32 sum). So the top k, their scores and their order (score
descending, then lower id) are the exhaustive path's: ``tests/test_retrieval.py`` checks it on random
corpora and queries for several block and window sizes, ``benchmarks/bench_bm25.py`` on every query it
runs.

The kernel is compiled by numba (``cache=True``: once per machine, then loaded); without numba this
module's :data:`AVAILABLE` is False and the searcher keeps its exhaustive paths.
"""

import numpy as np

try:
    import numba
except ImportError:  # pragma: no cover - numba is a dependency; this keeps retrieval working without it
    numba = None

AVAILABLE = numba is not None


def block_maxima(data: np.ndarray, indptr: np.ndarray, block: int):
    """``(block_max, block_ptr)``: the largest score of every run of ``block`` postings of each term (its last
    run may be shorter), term ``t``'s runs at ``block_max[block_ptr[t]:block_ptr[t + 1]]`` (Lucene's impacts,
    one per block of postings)."""
    if block < 1:
        raise ValueError(f"the block size must be >= 1, got {block}")
    counts = np.diff(np.asarray(indptr, dtype=np.int64))
    runs = -(-counts // block)
    block_ptr = np.concatenate([[0], np.cumsum(runs)]).astype(np.int64)
    first = np.repeat(np.asarray(indptr[:-1], dtype=np.int64), runs)
    first += block * (np.arange(int(block_ptr[-1]), dtype=np.int64) - np.repeat(block_ptr[:-1], runs))
    # consecutive runs tile the postings, so each reduceat range is one run
    block_max = np.maximum.reduceat(data, first) if len(first) else np.zeros(0, dtype=np.float32)
    return block_max.astype(np.float32, copy=False), block_ptr


def _seek(indices, c, end, doc):  # pragma: no cover - compiled by numba
    """The first position in ``indices[c:end]`` (sorted) holding a document >= ``doc``: a galloping
    search from ``c`` (few steps when it is near)."""
    if c >= end or indices[c] >= doc:
        return c
    low = c
    high = c + 1
    step = 1
    while high < end and indices[high] < doc:
        low = high
        step *= 2
        high = min(c + step, end)
    while low + 1 < high:  # indices[low] < doc; indices[high] >= doc or high == end
        mid = (low + high) // 2
        if indices[mid] < doc:
            low = mid
        else:
            high = mid
    return high


def _kernel(data, indices, starts, ends, block_max, block_starts, block, window, k):  # pragma: no cover
    n = starts.shape[0]
    slack = 1.0 + (n + 1) * 2.0 ** -23
    cursor = starts.copy()  # each term's first posting not before the window
    stop = starts.copy()  # each term's first posting after the window
    probe = starts.copy()
    window_max = np.zeros(n, dtype=np.float32)
    order = np.arange(n)
    prefix = np.zeros(n + 1, dtype=np.float64)  # prefix[j]: the sum of the j smallest window maxima
    partial = np.zeros(window, dtype=np.float64)  # a window document's sum so far (bounds only)
    touched = np.zeros(window, dtype=np.bool_)
    live = np.empty(window, dtype=np.int64)  # offsets in the window of the documents still in the race
    seen = np.empty(window, dtype=np.int64)
    top_docs = np.empty(k, dtype=np.int64)
    top_scores = np.empty(k, dtype=np.float32)
    held = 0
    worst = 0  # index of the k-th entry (lowest score, then highest id) once k are held
    theta = np.float32(0.0)
    evaluated = 0
    while True:
        lo = -1  # the next window: from the lowest document any term still has
        for p in range(n):
            if cursor[p] < ends[p] and (lo < 0 or indices[cursor[p]] < lo):
                lo = indices[cursor[p]]
        if lo < 0:
            break
        hi = lo + window
        for p in range(n):  # each term's postings in [lo, hi) and the largest score of its blocks there
            stop[p] = _seek(indices, cursor[p], ends[p], hi)
            best = np.float32(0.0)
            if stop[p] > cursor[p]:
                for b in range((cursor[p] - starts[p]) // block, (stop[p] - 1 - starts[p]) // block + 1):
                    if block_max[block_starts[p] + b] > best:
                        best = block_max[block_starts[p] + b]
            window_max[p] = best
        for j in range(n):  # the query positions by window maximum, ascending (insertion sort: n is small)
            order[j] = j
        for j in range(1, n):
            x = order[j]
            i = j - 1
            while i >= 0 and window_max[order[i]] > window_max[x]:
                order[i + 1] = order[i]
                i -= 1
            order[i + 1] = x
        for j in range(n):
            prefix[j + 1] = prefix[j] + np.float64(window_max[order[j]])
        full = held == k
        essential = 0  # order[essential:] are walked; order[:essential] only looked up for live documents
        if full:
            while essential < n and prefix[essential + 1] * slack < theta:
                essential += 1
        # the essential terms' postings, summed per document of the window
        count = 0
        for j in range(essential, n):
            p = order[j]
            for i in range(cursor[p], stop[p]):
                off = indices[i] - lo
                partial[off] += np.float64(data[i])
                if not touched[off]:
                    touched[off] = True
                    seen[count] = off
                    count += 1
        if count < window // 16:  # the documents in id order: sort few, scan the window for many
            seen[:count].sort()
        else:
            count = 0
            for off in range(window):
                if touched[off]:
                    seen[count] = off
                    count += 1
        alive = 0
        for x in range(count):
            off = seen[x]
            touched[off] = False
            if not full or (partial[off] + prefix[essential]) * slack >= theta:
                live[alive] = off
                alive += 1
        scattered = False
        # the other terms, largest window maximum first: add their scores to the live documents, drop those
        # whose bound falls below theta
        for j in range(essential - 1, -1, -1):
            if alive == 0:
                break
            p = order[j]
            a = cursor[p]
            b = stop[p]
            if (b - a) > 16 * alive:  # few documents, a long list: search
                for x in range(alive):
                    a = _seek(indices, a, b, lo + live[x])
                    if a < b and indices[a] == lo + live[x]:
                        partial[live[x]] += np.float64(data[a])
            else:  # add the term's postings to every document of the window (the dead ones are never read)
                for i in range(a, b):
                    partial[indices[i] - lo] += np.float64(data[i])
                scattered = True
            kept = 0
            for x in range(alive):
                if (partial[live[x]] + prefix[j]) * slack >= theta:
                    live[kept] = live[x]
                    kept += 1
            alive = kept
        if held == 0 and alive > k:
            # before the first k: the k-th largest sum here, less its rounding, is below the k-th exact score,
            # so a document whose bound is below it cannot enter
            sums = np.empty(alive, dtype=np.float64)
            for x in range(alive):
                sums[x] = partial[live[x]]
            floor = np.sort(sums)[alive - k] / slack
            kept = 0
            for x in range(alive):
                if partial[live[x]] * slack >= floor:
                    live[kept] = live[x]
                    kept += 1
            alive = kept
        # the documents left: their exact scores, summed in the query's order in float32
        for p in range(n):
            probe[p] = cursor[p]
        for x in range(alive):
            doc = lo + live[x]
            evaluated += 1
            score = np.float32(0.0)
            for p in range(n):
                probe[p] = _seek(indices, probe[p], stop[p], doc)
                if probe[p] < stop[p] and indices[probe[p]] == doc:
                    score = np.float32(score + data[probe[p]])
            if score <= 0:
                continue
            if held < k:
                top_docs[held] = doc
                top_scores[held] = score
                held += 1
            elif score > theta:  # an equal score comes after the k-th, whose id is lower
                top_docs[worst] = doc
                top_scores[worst] = score
            else:
                continue
            if held == k:
                worst = 0
                for i in range(1, k):
                    if top_scores[i] < top_scores[worst] or (top_scores[i] == top_scores[worst]
                                                             and top_docs[i] > top_docs[worst]):
                        worst = i
                theta = top_scores[worst]
        if scattered:
            partial[:] = 0.0
        else:
            for x in range(count):
                partial[seen[x]] = 0.0
        for p in range(n):
            cursor[p] = stop[p]
    return top_docs[:held], top_scores[:held], evaluated


if AVAILABLE:
    _seek = numba.njit(cache=True, nogil=True)(_seek)
    _compiled = numba.njit(cache=True, nogil=True)(_kernel)


class MaxScore:
    """Top-k queries by block-max MaxScore over one CSC index (a column of float32 posting scores per
    term, documents ascending): the module's docstring. ``block``: postings per stored maximum; ``window``:
    documents per window of the walk (the terms are split into essential and not per window, with the
    maxima of their blocks that reach into it)."""

    #: postings per block maximum (Lucene keeps impacts per 128 postings too) and documents per window:
    #: the fastest of blocks 16-1024 and windows 1,024-65,536 for 20-word Zipf queries at 1M documents
    #: (2 cores, 2026-11-27; 64-256 and 4,096 within noise of each other)
    BLOCK = 128
    WINDOW = 4096

    def __init__(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, num_docs: int,
                 block: int = BLOCK, window: int = WINDOW):
        if window < 1:
            raise ValueError(f"the window must be >= 1 document, got {window}")
        self.data, self.indices, self.indptr = np.asarray(data), np.asarray(indices), np.asarray(indptr)
        # a window's arrays hold 21 bytes a document: never more documents than the index has
        self.block, self.window = block, max(1, min(window, num_docs))
        self.block_max, self.block_ptr = block_maxima(self.data, self.indptr, block)
        if len(self.indptr) > 1:
            self.top_k([0], 1)  # compiled (or loaded from numba's cache) now, before any worker is forked

    def top_k(self, term_ids, k: int):
        """The top ``k`` documents ``(ids, scores)`` of the query ``term_ids`` (a repeated term counts twice),
        best first, ties by the lower id: :func:`~.search.top_k` of the exhaustive scores. Also returns how
        many documents were summed in full."""
        if k < 1:
            raise ValueError(f"--top-k must be >= 1, got {k}")
        terms = np.asarray(term_ids, dtype=np.int64)
        if len(terms) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=self.data.dtype), 0
        docs, scores, evaluated = _compiled(self.data, self.indices, self.indptr[terms], self.indptr[terms + 1],
                                            self.block_max, self.block_ptr[terms], self.block, self.window, k)
        order = np.lexsort((docs, -scores))
        return docs[order], scores[order], int(evaluated)
