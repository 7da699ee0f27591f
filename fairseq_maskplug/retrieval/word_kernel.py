"""Pass 1 of the index build for the default analyser (lower-cased ``\\w+``, no stop words) in a compiled
kernel: a chunk's documents become term ids and ``(document, term, frequency)`` postings without a Python
string per token.

What it computes is :func:`~.index.analyse_chunks`' Python loop, exactly (``tests/test_retrieval.py``
compares the two on random corpora of ASCII, accented, non-Latin and punctuated text):

- a document that is ASCII is split in the kernel: Python's ``\\w`` on an ASCII character is
  ``[A-Za-z0-9_]`` and ``str.lower`` is ASCII lower-casing there, so the kernel's byte classes give the
  regular expression's tokens;
- any other document is analysed by :meth:`~.analysis.Analyser.tokens` (Unicode ``\\w``, Unicode
  lower-casing) and handed to the kernel as its tokens joined by spaces (a ``\\w`` token holds no
  whitespace; its UTF-8 bytes are ASCII word characters or bytes >= 0x80, all word bytes to the kernel);
- terms are interned by their UTF-8 bytes (a bijection with the strings) in an open-addressing table
  that compares the bytes of every candidate (a hash collision never merges two terms), numbered in
  order of first appearance, as the Python loop's ``dict.setdefault`` numbers them;
- each document's terms are counted and the chunk's postings sorted by term, then document (a counting
  sort over the chunk's own terms), as :func:`~.index._chunk_postings`' ``np.unique`` gives them.

The kernel is compiled by numba (``cache=True``); without numba :data:`AVAILABLE` is False and the build
keeps the Python loop.
"""

from typing import Dict, List, Sequence, Tuple

import numpy as np

try:
    import numba
except ImportError:  # pragma: no cover - numba is a dependency; the build keeps its Python loop without it
    numba = None

AVAILABLE = numba is not None

FNV_OFFSET = np.uint64(0xCBF29CE484222325)  # 64-bit FNV-1a (Fowler, Noll, Vo)
FNV_PRIME = np.uint64(0x100000001B3)
EMPTY = -1


def _is_word_byte(c) -> bool:  # pragma: no cover - compiled
    """``[A-Za-z0-9_]`` or a byte of a multi-byte UTF-8 character (only pre-split tokens hold those)."""
    return (97 <= c <= 122) or (65 <= c <= 90) or (48 <= c <= 57) or c == 95 or c >= 128


def _folded(c, lowercase):  # pragma: no cover - compiled
    """Byte ``c`` lower-cased if ``lowercase`` and an ASCII capital (``str.lower`` on ASCII)."""
    return c + 32 if lowercase and 65 <= c <= 90 else c


def _scan(buf, starts, ends, first, lowercase, slots, hashes, term_offsets, term_bytes, n_terms, ids, n_ids,
          lengths):  # pragma: no cover - compiled
    """Split documents ``first, first + 1, ...`` (bytes ``buf[starts[i]:ends[i]]``) into words, intern each
    (lower-cased if ``lowercase``) in the table, append its id to ``ids`` and each document's word count to
    ``lengths``. Stops before a document whose new terms might fill the table past half its slots or
    overflow ``term_bytes``/``term_offsets``, or whose words might overflow ``ids``. Returns ``(next document,
    terms, ids written)``."""
    mask = np.uint64(len(slots) - 1)
    i = first
    while i < len(starts):
        start, end = starts[i], ends[i]
        most_new = (end - start + 1) // 2  # at most one new term per two bytes (a byte and a separator)
        if (n_terms + most_new) * 2 > len(slots) or n_terms + most_new + 1 > len(term_offsets) or \
                term_offsets[n_terms] + (end - start) > len(term_bytes) or n_ids + most_new > len(ids):
            break
        count = 0
        p = start
        while p < end:
            while p < end and not _is_word_byte(buf[p]):
                p += 1
            if p == end:
                break
            q = p
            h = FNV_OFFSET
            while q < end and _is_word_byte(buf[q]):
                h = (h ^ np.uint64(_folded(buf[q], lowercase))) * FNV_PRIME
                q += 1
            size = q - p
            s = h & mask
            while True:
                term = slots[s]
                if term == EMPTY:  # a new term: its lower-cased bytes are stored
                    term = n_terms
                    at = term_offsets[term]
                    for j in range(size):
                        term_bytes[at + j] = _folded(buf[p + j], lowercase)
                    term_offsets[term + 1] = at + size
                    hashes[term] = h
                    slots[s] = term
                    n_terms += 1
                    break
                if hashes[term] == h and term_offsets[term + 1] - term_offsets[term] == size:
                    at = term_offsets[term]
                    same = True
                    for j in range(size):
                        if term_bytes[at + j] != _folded(buf[p + j], lowercase):
                            same = False
                            break
                    if same:
                        break
                s = (s + np.uint64(1)) & mask
            ids[n_ids] = term
            n_ids += 1
            count += 1
            p = q
        lengths[i] = count
        i += 1
    return i, n_terms, n_ids


def _rehash(hashes, n_terms, slots):  # pragma: no cover - compiled
    """Place terms ``0 .. n_terms - 1`` into the empty table ``slots`` by their hashes."""
    mask = np.uint64(len(slots) - 1)
    for term in range(n_terms):
        s = hashes[term] & mask
        while slots[s] != EMPTY:
            s = (s + np.uint64(1)) & mask
        slots[s] = term


def _count_postings(ids, lengths, first_doc, mark, count, distinct):  # pragma: no cover - compiled
    """Count each term's documents among the chunk's (``count``, zero before), listing the terms met in
    ``distinct``; ``mark`` holds the last document that counted each term. Returns how many terms."""
    k = 0
    at = 0
    for d in range(len(lengths)):
        doc = first_doc + d
        for j in range(at, at + lengths[d]):
            term = ids[j]
            if mark[term] != doc:
                mark[term] = doc
                if count[term] == 0:
                    distinct[k] = term
                    k += 1
                count[term] += 1
        at += lengths[d]
    return k


def _place_postings(ids, lengths, first_doc, mark, place, slot, out):  # pragma: no cover - compiled
    """The chunk's ``(document, term, frequency)`` postings into the rows of ``out``, sorted by term, then
    document: each document's posting of a term at the term's next place (``place``, the start of its range
    to begin with); ``mark`` set to ``-(document + 2)`` (never a document of :func:`_count_postings`)."""
    at = 0
    for d in range(len(lengths)):
        doc = first_doc + d
        marker = -(doc + 2)
        for j in range(at, at + lengths[d]):
            term = ids[j]
            if mark[term] != marker:
                mark[term] = marker
                slot[term] = place[term]
                place[term] += 1
                out[0, slot[term]] = doc
                out[1, slot[term]] = term
                out[2, slot[term]] = 1
            else:
                out[2, slot[term]] += 1
        at += lengths[d]


if numba is not None:
    _is_word_byte = numba.njit(cache=True, inline="always")(_is_word_byte)
    _folded = numba.njit(cache=True, inline="always")(_folded)
    _scan = numba.njit(cache=True, nogil=True)(_scan)
    _rehash = numba.njit(cache=True, nogil=True)(_rehash)
    _count_postings = numba.njit(cache=True, nogil=True)(_count_postings)
    _place_postings = numba.njit(cache=True, nogil=True)(_place_postings)


class TermTable:
    """Terms interned by their UTF-8 bytes, numbered in order of first appearance; grows as needed. Beside each
    term, the scratch of a chunk's postings (:func:`postings`): about 48 bytes a term in all, its bytes apart."""

    def __init__(self, slots: int = 1 << 16, term_bytes: int = 1 << 20):
        if slots < 2 or slots & (slots - 1):
            raise ValueError(f"slots must be a power of two >= 2, got {slots}")
        self.slots = np.full(slots, EMPTY, dtype=np.int64)
        self.hashes = np.zeros(slots // 2, dtype=np.uint64)
        self.offsets = np.zeros(slots // 2 + 1, dtype=np.int64)
        self.bytes = np.zeros(max(1, term_bytes), dtype=np.uint8)
        self.mark = np.full(slots // 2, -1, dtype=np.int64)  # the scratch of postings(), one value a term each
        self.count = np.zeros(slots // 2, dtype=np.int32)
        self.slot = np.zeros(slots // 2, dtype=np.int32)
        self.terms = 0

    def grow(self, new_terms: int, new_bytes: int) -> None:
        """Room for ``new_terms`` more terms of ``new_bytes`` bytes (the slots at most half full)."""
        slots = len(self.slots)
        while (self.terms + new_terms) * 2 > slots:
            slots *= 2
        if slots != len(self.slots):
            self.slots = np.full(slots, EMPTY, dtype=np.int64)
            _rehash(self.hashes, self.terms, self.slots)
        if len(self.hashes) < slots // 2:
            more = slots // 2 - len(self.hashes)
            self.hashes = np.concatenate([self.hashes, np.zeros(more, np.uint64)])
            self.offsets = np.concatenate([self.offsets, np.zeros(more, np.int64)])
            self.mark = np.concatenate([self.mark, np.full(more, -1, np.int64)])
            self.count = np.concatenate([self.count, np.zeros(more, np.int32)])
            self.slot = np.concatenate([self.slot, np.zeros(more, np.int32)])
        needed = int(self.offsets[self.terms]) + new_bytes
        if needed > len(self.bytes):
            self.bytes = np.concatenate([self.bytes, np.zeros(max(needed, 2 * len(self.bytes)) - len(self.bytes),
                                                              np.uint8)])

    def strings(self) -> List[str]:
        """The terms in id order."""
        raw = self.bytes.tobytes()
        bounds = self.offsets[:self.terms + 1].tolist()
        return [raw[a:b].decode("utf-8") for a, b in zip(bounds, bounds[1:])]


def analyse(texts: Sequence[str], table: TermTable, analyser, first_doc: int) -> Tuple[np.ndarray, np.ndarray,
                                                                                       np.ndarray]:
    """``(term ids end to end, document lengths, postings)`` of the documents ``texts`` numbered from
    ``first_doc``, their terms interned in ``table`` (the module's docstring); the lengths are int64, the
    postings an int32 array of rows (documents, terms, frequencies) sorted by term, then document."""
    parts = [text if text.isascii() else " ".join(analyser.tokens(text)) for text in texts]
    sizes = np.fromiter((len(part) if part.isascii() else len(part.encode("utf-8")) for part in parts),
                        dtype=np.int64, count=len(parts))
    buf = np.frombuffer("\n".join(parts).encode("utf-8"), dtype=np.uint8)
    del parts
    starts = np.concatenate([[0], np.cumsum(sizes + 1)[:-1]]).astype(np.int64) if len(sizes) else sizes
    ends = starts + sizes
    ids = np.empty(int(sizes.sum()) // 4 + 16, dtype=np.int32)  # about a word in 4 bytes; grown if more
    lengths = np.zeros(len(sizes), dtype=np.int64)
    doc, n_ids = 0, 0
    while doc < len(sizes):
        doc, table.terms, n_ids = _scan(buf, starts, ends, doc, analyser.lowercase, table.slots, table.hashes,
                                        table.offsets, table.bytes, table.terms, ids, n_ids, lengths)
        if doc < len(sizes):  # the next document might not fit: room for all its bytes as new terms and words
            most = int(sizes[doc]) // 2 + 1
            table.grow(most, int(sizes[doc]))
            if n_ids + most > len(ids):
                ids = np.concatenate([ids, np.empty(max(most, len(ids) // 2), dtype=np.int32)])
    ids = ids[:n_ids]
    return ids, lengths, postings(ids, lengths, first_doc, table)


def postings(ids: np.ndarray, lengths: np.ndarray, first_doc: int, table: TermTable) -> np.ndarray:
    """The ``(documents, terms, frequencies)`` rows (int32) of a chunk's term ids ``ids`` (documents of
    ``lengths`` words, numbered from ``first_doc``), sorted by term, then document: a counting sort over the
    chunk's own terms, linear in its words (its distinct terms sorted), whatever the vocabulary's size."""
    distinct = np.empty(min(len(ids), table.terms), dtype=np.int32)
    found = _count_postings(ids, lengths, first_doc, table.mark, table.count, distinct)
    terms = np.sort(distinct[:found])
    counts = table.count[terms].astype(np.int64)
    ends = np.cumsum(counts)
    table.count[terms] = ends - counts  # each term's first place; the count array is the places now
    out = np.empty((3, int(ends[-1]) if found else 0), dtype=np.int32)
    _place_postings(ids, lengths, first_doc, table.mark, table.count, table.slot, out)
    table.count[terms] = 0  # zero again for the next chunk
    return out


def applies_to(analyser) -> bool:
    """Whether the kernel computes ``analyser``'s tokens: the default pattern without stop words, numba there."""
    from .analysis import TOKEN_PATTERN

    return AVAILABLE and analyser.pattern == TOKEN_PATTERN and not analyser.stopwords


def vocabulary(table: TermTable) -> Dict[str, int]:
    """The table's terms as the Python loop's vocabulary: term -> id, in order of first appearance."""
    return {term: i for i, term in enumerate(table.strings())}
