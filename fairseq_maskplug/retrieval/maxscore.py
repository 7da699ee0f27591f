"""Top-k BM25 by block-max MaxScore (Turtle & Flood 1995, "Query evaluation: strategies and
optimizations", Sec. 4, with per-block maxima as Lucene's ``MaxScoreBulkScorer``), with the exhaustive
path's exact scores and tie order.

A document's score is the sum, in the query's term order and in float32, of its posting scores of the
query's terms (:class:`~.search.PostingScores`). The postings are read from the compressed index of
:mod:`.postings`: a block's documents are decoded when it is reached, its scores computed when they are
needed. The documents are taken in windows of ``window`` ids, each starting at the lowest document a term
may still hold (from the blocks' first and last documents, nothing decoded). In each window every query
term gets an upper bound ``m``: the largest stored maximum of its blocks that reach into the window. With
the terms sorted by ``m`` ascending, once the k-th best score so far, ``theta``, exceeds ``m_1 + ... +
m_j``, a document holding none but the first ``j`` terms cannot enter the top k: only the other,
*essential* terms' postings are summed per document (into a window-sized array); the first ``j`` terms
are then added to the documents still in the race, largest ``m`` first (looked up block by block for
few documents, or the term's window blocks walked when they hold at most 16 postings per live document),
and a document leaves the race as soon as its sum plus the ``m`` of the terms not yet added is below
``theta``. Each term's score of each window document is kept as it is added, so the documents left
(every term added to them) are summed exactly and offered to the top k. Before k documents are held,
the k-th largest sum of the first window bounds the k-th score from below and prunes in the same way.

Exactness: the bounds are float64 sums of float32 values inflated by ``(n + 1) * 2**-23`` relative (more
than the rounding of a float32 sum of ``n`` terms can move a score), and a document is dropped only when
its bound is *below* ``theta`` (a document with ``theta``'s score comes after the k-th, whose id is
lower, so it never enters). Every document offered is summed exactly as the exhaustive path sums it
(its terms' float32 scores in the query's order; absent terms add nothing), and a posting's score is
the float the exhaustive path computes (the same float64 expression, rounded once). So the top k, their
scores and their order (score descending, then lower id) are the exhaustive path's:
``tests/test_retrieval.py`` checks it on random corpora and queries for blocks of 1, 4 and 128 postings
and windows from one document to all, ``benchmarks/bench_bm25.py`` on every query it runs.

The kernel is compiled by numba (``cache=True``: once per machine, then loaded); without numba this
module's :data:`AVAILABLE` is False and the searcher keeps its exhaustive paths (numpy).
"""

import numpy as np

from .analysis import document_norms

try:
    import numba
except ImportError:  # pragma: no cover - numba is a dependency; this keeps retrieval working without it
    numba = None

AVAILABLE = numba is not None


def _decode_docs(words, halves, octets, start, width, n, base, out):  # pragma: no cover
    """The ``n`` documents of a block whose gaps start at word ``start`` and take ``width`` bits each (0, 8,
    16 or 32: read as bytes, halves or words; :mod:`.postings`) into ``out[:n]``; ``base``: the document
    before the block's first."""
    doc = np.int64(base)
    if width == 0:  # consecutive documents: no word read (the run may start past the last word)
        for j in range(n):
            doc += 1
            out[j] = doc
    elif width == 8:
        for j in range(n):
            doc += np.int64(octets[4 * start + j]) + 1
            out[j] = doc
    elif width == 16:
        for j in range(n):
            doc += np.int64(halves[2 * start + j]) + 1
            out[j] = doc
    else:
        for j in range(n):
            doc += np.int64(words[start + j]) + 1
            out[j] = doc


def _load(words, halves, octets, block_words, block_bits, block_last, g, n, first_of_term, out):  # pragma: no cover
    """Decode block ``g`` (``n`` postings; ``first_of_term``: the term's first block) into ``out``; returns the
    bit where its term frequencies start."""
    start = np.int64(block_words[g])
    base = -1 if first_of_term else np.int64(block_last[g - 1])
    _decode_docs(words, halves, octets, start, block_bits[g, 0], n, base, out)
    return (start + (n * np.int64(block_bits[g, 0]) + 31) // 32) * 32


def _score(words, start_bit, width, j, weight, norm):  # pragma: no cover
    """The float32 score of a block's posting ``j``: its term frequency (``width`` bits from ``start_bit``, one
    value read), then ``analysis.lucene_term_score``'s expression in float64 (``norm``: the document's ``k1 *
    (1 - b + b * |d| / avgdl)``, computed by numpy in that order), rounded once: the exhaustive path's float."""
    tf = 1.0
    if width > 0:
        bit = start_bit + j * width
        w = bit >> 5
        pair = np.uint64(words[w]) | (np.uint64(words[w + 1]) << np.uint64(32))
        tf = np.float64(np.int64((pair >> np.uint64(bit & 31)) & ((np.uint64(1) << np.uint64(width)) - np.uint64(1)))
                        + 1)
    return np.float32(weight * tf / (tf + norm))


def _score_block(words, start_bit, width, n, weight, docs, norms, out):  # pragma: no cover
    """:func:`_score` of a block's ``n`` postings (documents ``docs``) into ``out`` (one call per block)."""
    for j in range(n):
        tf = 1.0
        if width > 0:
            bit = start_bit + j * width
            w = bit >> 5
            pair = np.uint64(words[w]) | (np.uint64(words[w + 1]) << np.uint64(32))
            tf = np.float64(np.int64((pair >> np.uint64(bit & 31)) & ((np.uint64(1) << np.uint64(width))
                                                                        - np.uint64(1))) + 1)
        out[j] = np.float32(weight * tf / (tf + norms[docs[j]]))


def _first_block(block_last, b0, blk, last, doc):  # pragma: no cover
    """The first of a term's blocks ``blk..last`` (global numbers ``b0 + ...``) whose last document is >=
    ``doc`` (a galloping search, no decoding), or ``last + 1``."""
    if block_last[b0 + blk] >= doc:
        return blk
    low = blk  # block_last[low] < doc
    high = blk + 1
    step = 1
    while high <= last and block_last[b0 + high] < doc:
        low = high
        step *= 2
        high = min(blk + step, last + 1)
    while low + 1 < high:  # block_last[high] >= doc, or high == last + 1
        mid = (low + high) >> 1
        if block_last[b0 + mid] < doc:
            low = mid
        else:
            high = mid
    return high


def _lower_bound(row, low, high, doc):  # pragma: no cover
    """The first index in ``low..high-1`` of the ascending ``row`` holding a value >= ``doc``, or ``high``."""
    low -= 1
    while low + 1 < high:
        mid = (low + high) >> 1
        if row[mid] < doc:
            low = mid
        else:
            high = mid
    return high


def _race(seen, count_seen, touched, partial, rest, full, theta, slack, live, in_race):  # pragma: no cover
    """The window documents summed so far (``touched``; ``seen[:count_seen]`` in the order found), in id order
    in ``seen``, and those whose sum plus ``rest`` (the bound of the terms not yet added) can still reach
    ``theta`` in ``live`` and ``in_race``. Returns how many are live, and how many were seen."""
    if count_seen < seen.shape[0] // 16:  # sort few, scan the window for many
        seen[:count_seen].sort()
    else:
        count_seen = 0
        for off in range(seen.shape[0]):
            if touched[off]:
                seen[count_seen] = off
                count_seen += 1
    alive = 0
    for x in range(count_seen):
        off = seen[x]
        if not full or (partial[off] + rest) * slack >= theta:
            live[alive] = off
            in_race[off] = True
            alive += 1
    return alive, count_seen


def _kernel(words, halves, octets, block_words, block_bits, block_first, block_last, block_max, shift, first, count,
            idf, norms, window, k):  # pragma: no cover
    n = first.shape[0]
    size = 1 << shift
    low_bits = size - 1
    slack = 1.0 + (n + 1) * 2.0 ** -23
    docs = np.empty((n, size), dtype=np.int64)  # each term's decoded block: its documents and scores
    vals = np.empty((n, size), dtype=np.float32)
    loaded = np.full(n, -1, dtype=np.int64)  # the block decoded, of the term's own
    scored = np.zeros(n, dtype=np.bool_)  # its scores computed
    tf_bit = np.zeros(n, dtype=np.int64)  # where its frequencies start, in bits
    blocks = (count + low_bits) >> shift
    cursor = np.zeros(n, dtype=np.int64)  # each term's first block that may hold a document of the window
    last_in = np.zeros(n, dtype=np.int64)  # its last block that may hold one
    after = np.zeros(n, dtype=np.int64)  # its first block whose last document is past the window
    window_max = np.zeros(n, dtype=np.float32)
    order = np.arange(n)
    prefix = np.zeros(n + 1, dtype=np.float64)  # prefix[j]: the sum of the j smallest window maxima
    partial = np.zeros(window, dtype=np.float64)  # a window document's sum so far (bounds only)
    contrib = np.zeros((n, window), dtype=np.float32)  # each query term's score of each window document,
    stamp = np.full((n, window), -1, dtype=np.int32)  # valid where stamped with the current window's number
    touched = np.zeros(window, dtype=np.bool_)
    in_race = np.zeros(window, dtype=np.bool_)  # the live documents, by offset
    live = np.empty(window, dtype=np.int64)  # offsets in the window of the documents still in the race
    seen = np.empty(window, dtype=np.int64)
    top_docs = np.empty(k, dtype=np.int64)
    top_scores = np.empty(k, dtype=np.float32)
    held = 0
    worst = 0  # index of the k-th entry (lowest score, then highest id) once k are held
    theta = np.float32(0.0)
    evaluated = 0
    windows = 0
    hi = 0
    while True:
        lo = -1  # the next window: from the lowest document any term may still have (no block decoded)
        for p in range(n):
            if cursor[p] < blocks[p]:
                d = max(hi, np.int64(block_first[first[p] + cursor[p]]))
                if lo < 0 or d < lo:
                    lo = d
        if lo < 0:
            break
        hi = lo + window
        for p in range(n):  # each term's blocks that reach into [lo, hi) and the largest of their maxima
            best = np.float32(0.0)
            last_in[p] = cursor[p] - 1
            after[p] = blocks[p]
            if cursor[p] < blocks[p]:
                after[p] = _first_block(block_last, first[p], cursor[p], blocks[p] - 1, hi)
                last_in[p] = after[p]
                if after[p] == blocks[p] or block_first[first[p] + after[p]] >= hi:
                    last_in[p] -= 1
                for blk in range(cursor[p], last_in[p] + 1):
                    if block_max[first[p] + blk] > best:
                        best = block_max[first[p] + blk]
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
        # the essential terms' postings, summed per document of the window; the others' are walked too where
        # they are dense beside the documents left (scatter), else looked up for them
        count_seen = 0
        alive = -1
        for j in range(n - 1, -1, -1):
            p = order[j]
            walk = j >= essential
            if not walk and alive < 0:  # the essential terms are summed: the documents in the race
                alive, count_seen = _race(seen, count_seen, touched, partial, prefix[essential], full, theta, slack,
                                          live, in_race)
            if not walk and alive == 0:
                break
            if walk or (np.int64(last_in[p] - cursor[p] + 1) << shift) <= 16 * alive:
                # every posting of the window: decode its blocks
                for blk in range(cursor[p], last_in[p] + 1):
                    g, m = first[p] + blk, min(size, count[p] - (blk << shift))  # the block, its postings
                    if loaded[p] != blk:
                        tf_bit[p] = _load(words, halves, octets, block_words, block_bits, block_last, g, m, blk == 0,
                                          docs[p])
                        loaded[p], scored[p] = blk, False
                    width = np.int64(block_bits[g, 1])
                    i = _lower_bound(docs[p], 0, m, lo) if block_first[g] < lo else 0
                    if walk:  # every posting scored and summed
                        if not scored[p]:
                            _score_block(words, tf_bit[p], width, m, idf[p], docs[p], norms, vals[p])
                            scored[p] = True
                        while i < m and docs[p, i] < hi:
                            off = docs[p, i] - lo
                            partial[off] += np.float64(vals[p, i])
                            contrib[p, off] = vals[p, i]
                            stamp[p, off] = windows
                            if not touched[off]:
                                touched[off] = True
                                seen[count_seen] = off
                                count_seen += 1
                            i += 1
                    else:  # only the live documents' postings scored and added
                        while i < m and docs[p, i] < hi:
                            off = docs[p, i] - lo
                            if in_race[off]:
                                value = vals[p, i] if scored[p] else _score(words, tf_bit[p], width, i, idf[p],
                                                                            norms[docs[p, i]])
                                partial[off] += np.float64(value)
                                contrib[p, off] = value
                                stamp[p, off] = windows
                            i += 1
            elif last_in[p] >= cursor[p]:  # few documents, long lists: look each one up
                blk = cursor[p]
                for x in range(alive):
                    doc = lo + live[x]
                    blk = _first_block(block_last, first[p], blk, last_in[p], doc)
                    if blk > last_in[p]:
                        break
                    g, m = first[p] + blk, min(size, count[p] - (blk << shift))  # the block, its postings
                    if loaded[p] != blk:
                        tf_bit[p] = _load(words, halves, octets, block_words, block_bits, block_last, g, m, blk == 0,
                                          docs[p])
                        loaded[p], scored[p] = blk, False
                    i = _lower_bound(docs[p], 0, m, doc)
                    if i < m and docs[p, i] == doc:
                        if scored[p]:
                            value = vals[p, i]
                        else:
                            value = _score(words, tf_bit[p], np.int64(block_bits[g, 1]), i, idf[p], norms[doc])
                        partial[live[x]] += np.float64(value)
                        contrib[p, live[x]] = value
                        stamp[p, live[x]] = windows
            if not walk:  # drop the documents whose bound fell below theta
                kept = 0
                for x in range(alive):
                    if (partial[live[x]] + prefix[j]) * slack >= theta:
                        live[kept] = live[x]
                        kept += 1
                    else:
                        in_race[live[x]] = False
                alive = kept
        if alive < 0:  # every term was essential
            alive, count_seen = _race(seen, count_seen, touched, partial, 0.0, full, theta, slack, live, in_race)
        for x in range(count_seen):
            touched[seen[x]] = False
            in_race[seen[x]] = False
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
        # the documents left: their terms' scores summed in the query's order in float32 (a document left has
        # had every term's score added: the essential terms' walked, the others' looked up)
        for x in range(alive):
            off = live[x]
            doc = lo + off
            evaluated += 1
            score = np.float32(0.0)
            for p in range(n):
                if stamp[p, off] == windows:
                    score = np.float32(score + contrib[p, off])
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
        for x in range(count_seen):  # every document summed into was seen (the others added only to these)
            partial[seen[x]] = 0.0
        for p in range(n):
            cursor[p] = after[p]
        windows += 1
    return top_docs[:held], top_scores[:held], evaluated


if AVAILABLE:
    _decode_docs = numba.njit(cache=True, nogil=True)(_decode_docs)
    _load = numba.njit(cache=True, nogil=True)(_load)
    _score = numba.njit(cache=True, nogil=True)(_score)
    _score_block = numba.njit(cache=True, nogil=True)(_score_block)
    _first_block = numba.njit(cache=True, nogil=True)(_first_block)
    _lower_bound = numba.njit(cache=True, nogil=True)(_lower_bound)
    _race = numba.njit(cache=True, nogil=True)(_race)
    _compiled = numba.njit(cache=True, nogil=True)(_kernel)


class MaxScore:
    """Top-k queries by block-max MaxScore over the compressed postings of one index
    (:class:`~.postings.Postings`): the module's docstring. ``window``: documents per window of the walk (the
    terms are split into essential and not per window, with the stored maxima of their blocks that reach into
    it)."""

    #: documents per window: the fastest of windows 1,024-65,536 for 20-word Zipf queries at 1M documents (2
    #: cores, 2026-11-27; 4,096 and its neighbours within noise of each other)
    WINDOW = 4096
    #: the most (query term, window document) scores a query keeps: 4M, 32 MB with their stamps
    KEPT_SCORES = 1 << 22

    def __init__(self, index, window: int = WINDOW):
        if index.block & (index.block - 1):
            raise ValueError(f"the postings' block must be a power of two for MaxScore, got {index.block}")
        if window < 1:
            raise ValueError(f"the window must be >= 1 document, got {window}")
        self.index = index
        # a window's arrays hold 21 bytes a document: never more documents than the index has
        self.window = max(1, min(window, index.num_docs))
        words = np.asarray(index.words)
        self.arrays = (words, words.view(np.uint16), words.view(np.uint8), np.asarray(index.block_words),
                       np.asarray(index.block_bits), np.asarray(index.block_first), np.asarray(index.block_last),
                       np.asarray(index.block_max),
                       int(index.block).bit_length() - 1)
        self.norms = document_norms(index.doc_lengths, index.avgdl, index.k1, index.b)
        if len(index.term_postings) > 1:
            self.top_k([0], 1)  # compiled (or loaded from numba's cache) now, before any worker is forked

    def top_k(self, term_ids, k: int):
        """The top ``k`` documents ``(ids, scores)`` of the query ``term_ids`` (a repeated term counts twice),
        best first, ties by the lower id: :func:`~.search.top_k` of the exhaustive scores. Also returns how
        many documents were summed in full."""
        if k < 1:
            raise ValueError(f"--top-k must be >= 1, got {k}")
        terms = np.asarray(term_ids, dtype=np.int64)
        if len(terms) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), 0
        index = self.index
        count = np.asarray(index.term_postings[terms + 1] - index.term_postings[terms], dtype=np.int64)
        # a term's score of each window document is kept (8 bytes each): long queries take smaller windows, so
        # that these arrays stay within 32 MB (the window changes the speed, never the result)
        window = min(self.window, max(256, self.KEPT_SCORES // len(terms)))
        docs, scores, evaluated = _compiled(*self.arrays, index.term_block[terms], count,
                                            np.asarray(index.term_idf[terms], dtype=np.float64), self.norms,
                                            window, k)
        order = np.lexsort((docs, -scores))
        return docs[order], scores[order], int(evaluated)
