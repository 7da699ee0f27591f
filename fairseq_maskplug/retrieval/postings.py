"""The compressed postings of an index (format 2): document ids and term frequencies packed in blocks of
:data:`BLOCK` postings (the index's ``block``), with each block's first and last document and largest score,
and the exact document lengths; a posting's score is computed when it is read.

Layout of an index directory (one per corpus shard), every array little-endian:

* ``postings.u32``: the packed words (uint32, one zero word after the last block). Block ``g`` starts at
  word ``block_words[g]``: first its document gaps minus one (``doc - previous doc - 1``; the previous
  document of a term's first posting is -1), ``block_bits[g, 0]`` bits each (0, 8, 16 or 32: read as
  bytes, halves or words, with no shifts, by the pruning kernel), then its term frequencies minus one,
  ``block_bits[g, 1]`` bits each (any width: one is read at a time), each run starting on a word, values
  least significant bit first (Lucene's postings are blocks of 128 "frame of reference" packed values too).
* ``block_words.npy`` (int64, blocks + 1), ``block_bits.npy`` (uint8, blocks x 2), ``block_first.npy`` and
  ``block_last.npy`` (int32: the block's first and last documents, to skip blocks and bound windows without
  decoding them), ``block_max.npy`` (float32: the block's largest posting score, for dynamic pruning,
  Lucene's "impacts").
* ``term_postings.npy`` (int64, terms + 1: term ``t``'s postings are ``term_postings[t]`` up to
  ``term_postings[t + 1]``, in blocks from the ``ceil``-sum of the counts before it), ``term_idf.npy``
  (float64, Lucene's idf from the statistics the index was scored with), ``doc_lengths.npy`` (int32, the
  analysed length of each document) and ``vocab.json`` (term -> id).

Scores: ``float32(idf * tf / (tf + k1 * (1 - b + b * |d| / avgdl)))`` in float64, the expression and
order of operations of :func:`~.analysis.lucene_term_score`, so a posting's score is the float32 that
the previous format stored (tested). The bytes a posting takes depend on its gap: about 1.8 on the
benchmark's 1M-document Zipf corpus (``docs/scale.md``).
"""

import json
import os
from typing import Tuple

import numpy as np

from .analysis import lucene_term_score

BLOCK = 128
ARRAYS = ("block_words", "block_bits", "block_first", "block_last", "block_max", "term_postings", "term_idf",
          "doc_lengths")


def bit_width(values: np.ndarray) -> np.ndarray:
    """The bits each non-negative integer needs (0 for 0): frexp's exponent, exact below 2**53."""
    return np.frexp(np.asarray(values, dtype=np.float64))[1].astype(np.uint8)


def term_blocks(term_postings: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """Each term's first block (terms + 1 entries): its postings fill ``ceil(count / block)`` blocks."""
    counts = np.diff(np.asarray(term_postings, dtype=np.int64))
    return np.concatenate([[0], np.cumsum(-(-counts // block))]).astype(np.int64)


def _words(counts: np.ndarray, widths: np.ndarray) -> np.ndarray:
    return -(-(counts.astype(np.int64) * widths.astype(np.int64)) // 32)


def _pack(values: np.ndarray, bit_pos: np.ndarray, widths: np.ndarray, words: int) -> np.ndarray:
    """``values`` (< 2**widths each) at bit ``bit_pos`` of a run of ``words`` uint32 words: every value's
    bits in its word and, where they run over, the next; disjoint bits, so their sum is their OR (summed in
    float64, exact below 2**53)."""
    out = np.zeros(words + 1, dtype=np.uint64)
    values = values.astype(np.uint64)
    word = bit_pos >> 5
    shift = (bit_pos & 31).astype(np.uint64)
    low = (values << shift) & np.uint64(0xFFFFFFFF)
    out += np.bincount(word, weights=low.astype(np.float64), minlength=words + 1).astype(np.uint64)
    over = (shift + widths.astype(np.uint64)) > 32
    if over.any():
        high = values[over] >> (np.uint64(32) - shift[over])
        out += np.bincount(word[over] + 1, weights=high.astype(np.float64), minlength=words + 1).astype(np.uint64)
    return out[:words].astype(np.uint32)


def encode(docs: np.ndarray, tf: np.ndarray, counts: np.ndarray, scores: np.ndarray, block: int = BLOCK):
    """Pack the postings of consecutive whole terms (``counts`` postings each, documents ascending within a
    term; ``scores``: each posting's float32 score). Returns ``(words, block_words, block_bits, block_first,
    block_last, block_max)`` of these terms' blocks of ``block`` postings, ``block_words`` counted from 0 with the total
    last."""
    if block < 1:
        raise ValueError(f"the block size must be >= 1, got {block}")
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    if n != len(docs) or n != len(tf) or n != len(scores):
        raise ValueError(f"{n} postings counted, {len(docs)} documents, {len(tf)} frequencies, {len(scores)} scores")
    if n == 0:
        return (np.zeros(0, np.uint32), np.zeros(1, np.int64), np.zeros((0, 2), np.uint8), np.zeros(0, np.int32),
                np.zeros(0, np.int32), np.zeros(0, np.float32))
    docs = np.asarray(docs, dtype=np.int64)
    if docs.min() < 0 or np.asarray(tf).min() < 1:
        raise ValueError("documents must be >= 0 and term frequencies >= 1")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    in_term = np.arange(n, dtype=np.int64) - np.repeat(starts, counts)
    previous = np.empty(n, dtype=np.int64)
    previous[0] = -1
    previous[1:] = docs[:-1]
    previous[in_term == 0] = -1
    gaps = docs - previous - 1
    if gaps.min() < 0:
        raise ValueError("a term's documents must be strictly ascending")
    freqs = np.asarray(tf, dtype=np.int64) - 1
    first = np.flatnonzero(in_term % block == 0)  # each block's first posting
    sizes = np.diff(np.concatenate([first, [n]]))
    gap_bits = bit_width(np.maximum.reduceat(gaps, first))
    gap_bits = np.select([gap_bits == 0, gap_bits <= 8, gap_bits <= 16], [0, 8, 16], 32).astype(np.uint8)
    bits = np.stack([gap_bits, bit_width(np.maximum.reduceat(freqs, first))], 1)
    doc_words, tf_words = _words(sizes, bits[:, 0]), _words(sizes, bits[:, 1])
    block_words = np.concatenate([[0], np.cumsum(doc_words + tf_words)]).astype(np.int64)
    of = np.repeat(np.arange(len(first)), sizes)  # each posting's block
    at = in_term - np.repeat(in_term[first], sizes)  # its position in the block
    doc_bits = block_words[of] * 32 + at * bits[of, 0]
    tf_bits = (block_words[of] + doc_words[of]) * 32 + at * bits[of, 1]
    total = int(block_words[-1])
    words = _pack(gaps, doc_bits, bits[of, 0], total) | _pack(freqs, tf_bits, bits[of, 1], total)
    last = docs[np.concatenate([first[1:], [n]]) - 1].astype(np.int32)
    return (words, block_words, bits, docs[first].astype(np.int32), last,
            np.maximum.reduceat(np.asarray(scores, dtype=np.float32), first))


def posting_scores(idf, tf, doc_len, avgdl: float, k1: float, b: float) -> np.ndarray:
    """The float32 scores of postings: :func:`~.analysis.lucene_term_score` rounded once."""
    return lucene_term_score(idf, tf, doc_len, avgdl, k1, b).astype(np.float32)


class Postings:
    """The compressed postings of one index directory, memory-mapped (the module's docstring)."""

    def __init__(self, directory: str, params: dict):
        self.directory = directory
        self.words = np.memmap(os.path.join(directory, "postings.u32"), dtype="<u4", mode="r")
        for name in ARRAYS:
            setattr(self, name, np.load(os.path.join(directory, name + ".npy"), mmap_mode="r"))
        with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
            self.vocab = json.load(f)
        self.k1, self.b, self.avgdl = float(params["k1"]), float(params["b"]), float(params["avgdl"])
        self.block = int(params["block"])
        self.term_block = term_blocks(self.term_postings, self.block)
        self.num_docs = len(self.doc_lengths)

    def count(self, term: int) -> int:
        return int(self.term_postings[term + 1] - self.term_postings[term])

    def decode(self, term: int) -> Tuple[np.ndarray, np.ndarray]:
        """``(documents, term frequencies)`` of a term's postings (int64, documents ascending)."""
        n = self.count(term)
        if n == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        size = self.block
        at = np.arange(n, dtype=np.int64)
        first_block = int(self.term_block[term])
        blocks = int(self.term_block[term + 1]) - first_block
        sizes = np.full(blocks, size, dtype=np.int64)
        sizes[-1] = n - (blocks - 1) * size
        bits = np.asarray(self.block_bits[first_block:first_block + blocks], dtype=np.int64)
        starts = np.asarray(self.block_words[first_block:first_block + blocks], dtype=np.int64)
        local = at // size
        doc_words = _words(sizes, bits[:, 0])
        gaps = self._read(starts[local] * 32 + (at % size) * bits[local, 0], bits[local, 0])
        freqs = self._read((starts[local] + doc_words[local]) * 32 + (at % size) * bits[local, 1], bits[local, 1])
        return np.cumsum(gaps + 1) - 1, freqs + 1

    def _read(self, bit_pos: np.ndarray, widths: np.ndarray) -> np.ndarray:
        word = np.where(widths > 0, bit_pos >> 5, 0)  # a run of width 0 takes no word (it may start at the end)
        pair = self.words[word].astype(np.uint64) | (self.words[word + 1].astype(np.uint64) << np.uint64(32))
        mask = (np.uint64(1) << widths.astype(np.uint64)) - np.uint64(1)
        return ((pair >> (bit_pos & 31).astype(np.uint64)) & mask).astype(np.int64)

    def term_scores(self, term: int) -> Tuple[np.ndarray, np.ndarray]:
        """``(documents, float32 scores)`` of a term's postings."""
        docs, tf = self.decode(term)
        return docs, posting_scores(self.term_idf[term], tf, self.doc_lengths[docs], self.avgdl, self.k1, self.b)


def write(directory: str, parts, term_postings: np.ndarray, term_idf: np.ndarray, doc_lengths: np.ndarray,
          vocab: dict, block: int = BLOCK) -> None:
    """Write an index's files from ``parts``: ``(docs, tf, counts, scores)`` of consecutive whole terms, in
    term order (:func:`encode`'s input; together the ``term_postings`` counts), streamed so that one part is in
    memory at a time."""
    offset = 0
    blocks = {"block_words": [np.zeros(0, np.int64)], "block_bits": [np.zeros((0, 2), np.uint8)],
              "block_first": [np.zeros(0, np.int32)], "block_last": [np.zeros(0, np.int32)],
              "block_max": [np.zeros(0, np.float32)]}
    with open(os.path.join(directory, "postings.u32"), "wb") as f:
        for docs, tf, counts, scores in parts:
            words, block_words, bits, first, last, best = encode(docs, tf, counts, scores, block)
            f.write(words.astype("<u4").tobytes())
            blocks["block_words"].append(block_words[:-1] + offset)
            offset += int(block_words[-1])
            blocks["block_bits"].append(bits)
            blocks["block_first"].append(first)
            blocks["block_last"].append(last)
            blocks["block_max"].append(best)
        f.write(np.zeros(1, "<u4").tobytes())  # read in pairs: the last block's last word has a successor
    blocks["block_words"].append(np.array([offset], dtype=np.int64))
    for name, pieces in blocks.items():
        np.save(os.path.join(directory, name + ".npy"), np.concatenate(pieces))
    np.save(os.path.join(directory, "term_postings.npy"), np.asarray(term_postings, dtype=np.int64))
    np.save(os.path.join(directory, "term_idf.npy"), np.asarray(term_idf, dtype=np.float64))
    np.save(os.path.join(directory, "doc_lengths.npy"), np.asarray(doc_lengths, dtype=np.int32))
    with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
