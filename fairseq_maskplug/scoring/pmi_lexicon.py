"""PMI-Masking's lexicon and units (Levine et al., ICLR 2021, §3; the authors' README for the list policy).

1. **Words** of each binarized line: runs of subword tokens from a word start
   (:func:`fairseq_maskplug.masking.words.word_starts`), spelled as text (:func:`spell_words`).
2. **Counts** of word n-grams, 1 <= n <= 5, within lines (:class:`NGramCounts`: integer arrays, the
   n-grams of a batch of lines counted by sorting). Memory is bounded as in lossy counting (Manku and
   Motwani 2002), with a cap on the entries instead of a bucket width: when more than ``max_entries``
   n-grams are held after a batch, a threshold rises by one and every entry whose count plus its
   ``delta`` (the threshold when it was last inserted) is at most the threshold is dropped, until the
   entries fit. Then ``count <= true count <= count + delta <= count + threshold`` for every n-gram
   held, and every n-gram dropped occurred at most ``threshold`` times: the summary reports the final
   threshold (0: exact counts).
3. **Score** (:func:`pmi_n`), the paper's Eq. 3::

       PMI_n(w_1..w_n) = min over segmentations s of w_1..w_n into >= 2 parts of log p(w_1..w_n) / prod p(part)

   with ``p`` of a k-gram its count over all k-gram occurrences; ``--score authors`` multiplies in
   ``p(w_1..w_n)`` once more, the score of the authors' published lists.
4. **Lexicon** (:func:`build_lexicon`): n-grams with 2 <= n <= 5 seen more than ``min_count`` times
   (authors: over 10), ranked per length; 50% of the lexicon are the top bigrams, 25% trigrams,
   12.5% each 4- and 5-grams (the authors' list policy).
5. **Units** (:func:`segment`): a lexicon n-gram is one unit; one contained in a longer match gives way
   to it; of overlapping matches one is chosen at random (seeded by the line's number, once per line:
   ours, the same at every visit and in every shard) and the rest become words; every other word is a
   unit.
"""

import math
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

Words = Tuple[str, ...]

#: the authors' list policy: share of the lexicon per n-gram length
LENGTH_SHARES = {2: 0.5, 3: 0.25, 4: 0.125, 5: 0.125}
SCORES = ("paper", "authors")


def spell_words(tokens: np.ndarray, starts: np.ndarray, maskable: np.ndarray, spell) -> Tuple[List[str], np.ndarray]:
    """``(words, first token of each)`` of one line: the maskable words, each spelled by
    ``spell(token ids)`` (lowercased, stripped)."""
    firsts = np.flatnonzero(starts & maskable)
    bounds = np.append(np.flatnonzero(starts), len(tokens))
    ends = bounds[np.searchsorted(bounds, firsts, side="right")]
    return [spell(tokens[a:b]).strip().lower() for a, b in zip(firsts, ends)], firsts


class NGramCounts:
    """Counts of word n-grams, 1 <= n <= ``max_n``, within lines, in at most ``max_entries`` entries
    (module docstring, item 2), held in integer arrays: each length ``k`` has a sorted table of its distinct
    k-grams (:func:`pack_grams` keys of word numbers) with their counts and deltas. The tables number the
    words in sorted order (of the words counted so far), so that numbering the same words for more words
    (a later batch, or the union of two shards' words in :func:`merge_counts`) keeps the tables' order.
    :meth:`add` keeps a line's words; every ``max_entries // max_n`` words (and before any read) the lines
    kept are cut into n-grams, counted by sorting and summed into the tables, and then the entries are
    capped. The cap is thus applied after each batch of lines instead of after each line, so a batch may
    hold up to ``max_entries`` n-gram occurrences beside the tables; the bounds of item 2 hold as they are
    (a test compares them with exact counts)."""

    def __init__(self, max_n: int = 5, max_entries: int = 10_000_000):
        if max_n < 2 or max_entries < 1:
            raise ValueError(f"need max_n >= 2 and max_entries >= 1, got {max_n}, {max_entries}")
        self.max_n, self.max_entries = max_n, max_entries
        self.arrivals: Dict[str, int] = {}  # word -> the order add() first saw it in
        self._ranks = np.zeros(0, dtype=np.uint64)  # arrival -> the word's number in the tables (sorted order)
        self.tables = {k: GramTable.empty(k) for k in range(1, max_n + 1)}
        self.totals = [0] * (max_n + 1)  # occurrences of k-grams, exact
        self._threshold = 0  # counts are low by at most this (read through ``threshold``: the batch counted)
        self._pending: List[int] = []  # arrivals of the words of the lines not yet counted; where each line ends
        self._pending_ends: List[int] = []

    def add(self, words: Sequence[str]) -> None:
        arrivals = self.arrivals
        n = len(words)
        for k in range(1, min(n, self.max_n) + 1):
            self.totals[k] += n - k + 1
        self._pending.extend([arrivals.setdefault(word, len(arrivals)) for word in words])
        self._pending_ends.append(len(self._pending))
        if len(self._pending) * self.max_n >= self.max_entries:
            self._count_pending()

    @property
    def threshold(self) -> int:
        """Every count is low by at most this, and every n-gram dropped occurred at most this many times."""
        self._count_pending()
        return self._threshold

    def __len__(self) -> int:
        """The entries held."""
        self._count_pending()
        return sum(len(table) for table in self.tables.values())

    def words(self) -> List[str]:
        """Every word counted, in the tables' numbering (sorted)."""
        return sorted(self.arrivals)

    def _number_new_words(self) -> None:
        """Number every word in sorted order again (words arrived since the last batch) and renumber the
        tables to it: an increasing map, so their keys stay sorted."""
        if len(self._ranks) == len(self.arrivals):
            return
        words = list(self.arrivals)
        ranks = np.empty(len(words), dtype=np.uint64)
        ranks[sorted(range(len(words)), key=words.__getitem__)] = np.arange(len(words), dtype=np.uint64)
        if len(self._ranks):
            renumber = np.empty(len(self._ranks), dtype=np.uint64)
            renumber[self._ranks] = ranks[:len(self._ranks)]
            self.tables = {k: table.renumbered(renumber) for k, table in self.tables.items()}
        self._ranks = ranks

    def _count_pending(self) -> None:
        """Count the n-grams of the lines kept by :meth:`add`, add them to the tables, cap the entries."""
        if not self._pending:
            return
        self._number_new_words()
        numbers = self._ranks[np.asarray(self._pending, dtype=np.int64)]
        ends = np.repeat(np.asarray(self._pending_ends, dtype=np.int64), np.diff(self._pending_ends, prepend=0))
        self._pending, self._pending_ends = [], []
        positions = np.arange(len(numbers))
        for k, table in self.tables.items():
            starts = positions[positions + k <= ends]  # k-grams within one line
            keys, counts = np.unique(pack_grams(numbers[starts[:, None] + np.arange(k)]), return_counts=True)
            deltas = np.full(len(keys), self._threshold, dtype=np.int64)  # if new: up to threshold before
            self.tables[k] = table.plus(GramTable(k, keys, counts.astype(np.int64), deltas), new_only_deltas=True)
        self._cap()

    def _cap(self) -> None:
        """Lossy counting's pruning: while more than ``max_entries`` are held, raise the threshold by one and
        drop every entry with count + delta <= threshold; done at once (the smallest such threshold)."""
        held = sum(len(table) for table in self.tables.values())
        if held <= self.max_entries:
            return
        bounds = np.concatenate([table.counts + table.deltas for table in self.tables.values()])
        self._threshold = lowest_cut(bounds, self._threshold + 1, self.max_entries)
        for k, table in self.tables.items():
            self.tables[k] = table.where(table.counts + table.deltas > self._threshold)

    def count_of(self, grams: np.ndarray) -> np.ndarray:
        """Counts of the k-grams ``grams`` (a ``(m, k)`` table of word numbers; 0 where not held)."""
        self._count_pending()
        return self.tables[grams.shape[1]].count_of(pack_grams(grams))

    def log_p(self, gram: Words) -> Optional[float]:
        self._count_pending()
        count = 0
        if all(word in self.arrivals for word in gram):
            numbers = [int(self._ranks[self.arrivals[word]]) for word in gram]
            count = int(self.count_of(np.array([numbers], dtype=np.uint64))[0])
        return math.log(count / self.totals[len(gram)]) if count else None

    def as_dicts(self) -> Tuple[Dict[Words, int], Dict[Words, int]]:
        """``({n-gram: count}, {n-gram: delta, where not 0})`` of every entry held (for small counts: tests)."""
        self._count_pending()
        words = self.words()
        counts, deltas = {}, {}
        for k, table in self.tables.items():
            for row, count, delta in zip(unpack_grams(table.keys, k).tolist(), table.counts.tolist(),
                                         table.deltas.tolist()):
                gram = tuple(words[i] for i in row)
                counts[gram] = count
                if delta:
                    deltas[gram] = delta
        return counts, deltas

    def to_arrays(self) -> Dict[str, np.ndarray]:
        """Everything the counts hold as numpy arrays (a shard's part: ``np.savez``, no pickle): the words in
        their numbers' order (UTF-8, with offsets), then per n-gram length ``k`` its table: the sorted keys
        (:func:`pack_grams`), counts and deltas."""
        self._count_pending()
        encoded = [word.encode("utf-8") for word in self.words()]
        arrays = {"shape": np.array([self.max_n, self.max_entries, self._threshold], dtype=np.int64),
                  "totals": np.array(self.totals, dtype=np.int64),
                  "word_bytes": np.frombuffer(b"".join(encoded), dtype=np.uint8),
                  "word_ends": np.cumsum([len(e) for e in encoded], dtype=np.int64)}
        for k, table in self.tables.items():
            arrays[f"keys{k}"], arrays[f"counts{k}"], arrays[f"deltas{k}"] = table.keys, table.counts, table.deltas
        return arrays

    @classmethod
    def from_arrays(cls, arrays) -> "NGramCounts":
        """The counts :meth:`to_arrays` wrote (``arrays``: a mapping of its names, e.g. ``np.load``'s)."""
        max_n, max_entries, threshold = (int(v) for v in arrays["shape"])
        counts = cls(max_n, max_entries)
        counts.totals, counts._threshold = [int(v) for v in arrays["totals"]], threshold
        blob, ends = arrays["word_bytes"].tobytes(), arrays["word_ends"].tolist()
        counts.arrivals = {blob[a:b].decode("utf-8"): i for i, (a, b) in enumerate(zip([0] + ends[:-1], ends))}
        counts._ranks = np.arange(len(counts.arrivals), dtype=np.uint64)
        for k in range(1, max_n + 1):
            counts.tables[k] = GramTable(k, arrays[f"keys{k}"], arrays[f"counts{k}"], arrays[f"deltas{k}"])
        return counts


def lowest_cut(bounds: np.ndarray, least: int, most: int) -> int:
    """The smallest ``t >= least`` with at most ``most`` of ``bounds`` above it (a histogram of the small
    values: most entries of a capped table are rare n-grams; above 4,096 by sorting what is left)."""
    small = 4096
    above = len(bounds) - np.cumsum(np.bincount(np.minimum(bounds, small), minlength=small + 1))  # above[t]: > t
    fits = np.flatnonzero(above[:small] <= most)
    fits = fits[fits >= least]
    if len(fits):
        return int(fits[0])
    large = np.sort(bounds[bounds > small])
    if len(large) <= most:
        return max(least, small)
    return max(least, int(large[len(large) - most - 1]))  # dropping all up to it leaves `most`


class GramTable:
    """The distinct k-grams of one length as sorted keys (:func:`pack_grams`) with their counts and deltas."""

    def __init__(self, k: int, keys: np.ndarray, counts: np.ndarray, deltas: np.ndarray):
        self.k, self.keys, self.counts, self.deltas = k, keys, counts, deltas

    @classmethod
    def empty(cls, k: int) -> "GramTable":
        return cls(k, pack_grams(np.zeros((0, k), dtype=np.uint64)), np.zeros(0, np.int64), np.zeros(0, np.int64))

    def __len__(self) -> int:
        return len(self.keys)

    def where(self, keep: np.ndarray) -> "GramTable":
        return GramTable(self.k, take_keys(self.keys, keep), self.counts[keep], self.deltas[keep])

    def renumbered(self, renumber: np.ndarray) -> "GramTable":
        """Word number ``w`` as ``renumber[w]``; ``renumber`` increasing, so the keys stay sorted."""
        if renumber[-1:].tolist() == [len(renumber) - 1]:  # increasing and ending at its length - 1: the same numbers
            return self
        return GramTable(self.k, renumber_keys(self.keys, self.k, renumber), self.counts, self.deltas)

    def plus(self, other: "GramTable", new_only_deltas: bool = False) -> "GramTable":
        """Both tables' entries, an n-gram in both once with the counts added; its delta: this table's if
        ``new_only_deltas`` (``other`` is a batch counted exactly: its deltas apply to new n-grams only), else
        the sum (:func:`merge_counts` passes deltas already completed)."""
        if not len(self):
            return other
        if not len(other):
            return self
        keys = np.concatenate([self.keys, other.keys])
        order = np.argsort(keys, kind="stable")  # two sorted runs: this table's first among equal keys
        keys = take_keys(keys, order)
        first = np.ones(len(keys), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        starts = np.flatnonzero(first)
        counts = np.add.reduceat(np.concatenate([self.counts, other.counts])[order], starts)
        deltas = np.concatenate([self.deltas, other.deltas])[order]
        deltas = deltas[starts] if new_only_deltas else np.add.reduceat(deltas, starts)
        return GramTable(self.k, take_keys(keys, starts), counts, deltas)

    def count_of(self, keys: np.ndarray) -> np.ndarray:
        if not len(self):
            return np.zeros(len(keys), dtype=np.int64)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self) - 1)
        return np.where(self.keys[at] == keys, self.counts[at], 0)


def pack_grams(grams: np.ndarray) -> np.ndarray:
    """A sortable key per row of ``grams`` (``(m, k)`` word numbers < 2**32): two numbers per 64 bits, one
    ``uint64`` for k <= 2, else the big-endian bytes of the ``ceil(k / 2)`` words as one ``void`` value
    (compared byte by byte: the numbers' order). Equal keys are equal n-grams: no hashing."""
    grams = np.asarray(grams, dtype=np.uint64)
    m, k = grams.shape
    if len(grams) and int(grams.max()) >> 32:
        raise ValueError("more than 2**32 distinct words: n-gram keys hold 32 bits a word")
    columns = np.zeros((m, (k + 1) // 2), dtype=np.uint64)
    columns |= grams[:, 0::2] << np.uint64(32)
    columns[:, :k // 2] |= grams[:, 1::2]
    return keys_of_columns(columns)


def keys_of_columns(columns: np.ndarray) -> np.ndarray:
    """:func:`pack_grams`' keys of their ``(m, c)`` 64-bit columns."""
    if columns.shape[1] == 1:
        return columns[:, 0].copy()
    return columns.astype(">u8").view(f"V{8 * columns.shape[1]}").ravel()


def columns_of_keys(keys: np.ndarray) -> np.ndarray:
    """The ``(m, c)`` 64-bit columns of :func:`pack_grams`' keys."""
    if keys.dtype == np.uint64:
        return keys.reshape(-1, 1)
    return np.ascontiguousarray(keys).view(">u8").reshape(len(keys), keys.dtype.itemsize // 8).astype(np.uint64)


def take_keys(keys: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``keys[index]``, copied as rows of 64-bit words (numpy copies ``void`` values one at a time)."""
    if keys.dtype == np.uint64:
        return keys[index]
    return np.ascontiguousarray(keys).view(np.uint64).reshape(len(keys), -1)[index].view(keys.dtype).ravel()


def unpack_grams(keys: np.ndarray, k: int) -> np.ndarray:
    """The ``(m, k)`` word numbers of :func:`pack_grams`' keys."""
    columns = columns_of_keys(keys)
    grams = np.empty((len(keys), 2 * columns.shape[1]), dtype=np.uint64)
    grams[:, 0::2], grams[:, 1::2] = columns >> np.uint64(32), columns & np.uint64(0xFFFFFFFF)
    return grams[:, :k]


def renumber_keys(keys: np.ndarray, k: int, renumber: np.ndarray) -> np.ndarray:
    """:func:`pack_grams` keys with every word number ``w`` as ``renumber[w]`` (the padding of an odd ``k``
    stays 0)."""
    columns = columns_of_keys(keys)
    high, low = renumber[columns >> np.uint64(32)], renumber[columns & np.uint64(0xFFFFFFFF)]
    if k % 2:
        low[:, -1] = 0
    return keys_of_columns((high << np.uint64(32)) | low)


def merge_counts(parts: Sequence[NGramCounts]) -> NGramCounts:
    """The counts of the lines of all ``parts`` (one per corpus shard), as in Agarwal et al.'s mergeable
    summaries (PODS 2012): counts and totals add; an n-gram a part does not hold may have occurred up to
    that part's threshold times there, which goes into its ``delta``; thresholds add; then the same cap on
    the entries. Where no part dropped an n-gram (every threshold 0) and the sum fits ``max_entries``, these
    are the exact counts, those of one process counting every line."""
    if not parts:
        raise ValueError("no counts to merge")
    shapes = {(part.max_n, part.max_entries) for part in parts}
    if len(shapes) > 1:
        raise ValueError(f"counts of different shapes (max_n, max_entries) cannot be merged: {sorted(shapes)}")
    merged = NGramCounts(*shapes.pop())
    words = sorted(set().union(*(part.arrivals for part in parts)))
    merged.arrivals = {word: i for i, word in enumerate(words)}
    merged._ranks = np.arange(len(words), dtype=np.uint64)
    merged.totals = [sum(column) for column in zip(*(part.totals for part in parts))]
    merged._threshold = sum(part.threshold for part in parts)
    for part in parts:
        renumber = np.array([merged.arrivals[word] for word in part.words()], dtype=np.uint64)  # increasing
        for k, table in part.tables.items():
            # delta = sum over parts of (its delta where it holds the n-gram, else its threshold)
            #       = merged threshold - sum over the parts holding it of (threshold - delta)
            held = GramTable(k, table.keys, table.counts, part.threshold - table.deltas).renumbered(renumber)
            merged.tables[k] = merged.tables[k].plus(held)
    for table in merged.tables.values():
        table.deltas = merged._threshold - table.deltas
    merged._cap()
    return merged


def pmi_n(gram: Words, counts: NGramCounts, score: str = "paper") -> Optional[float]:
    """Eq. 3 of the paper (``authors``: plus ``log p(gram)``); None when a part was never counted."""
    n = len(gram)
    return pmi_of_spans({(i, j): counts.log_p(gram[i:j]) for i in range(n) for j in range(i + 1, n + 1)}, n, score)


def pmi_of_spans(log_p: Dict[Tuple[int, int], Optional[float]], n: int, score: str) -> Optional[float]:
    """:func:`pmi_n` of an n-gram from ``log_p[i, j]``, the log probability of its words ``i:j``."""
    if any(v is None for v in log_p.values()):
        return None
    # best[i]: the largest sum of log p over segmentations of gram[i:] into >= 1 parts
    best = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        best[i] = max(log_p[i, j] + (best[j] if j < n else 0.0) for j in range(i + 1, n + 1))
    proper = max(log_p[0, k] + best[k] for k in range(1, n))  # >= 2 parts: cut after the first
    value = log_p[0, n] - proper
    return value + log_p[0, n] if score == "authors" else value


def build_lexicon(counts: NGramCounts, size: int, min_count: int = 10, score: str = "paper") -> Dict[Words, float]:
    """The ``size`` n-grams of the lexicon with their scores (module docstring, item 4). The counts of every
    candidate's parts are looked up a table at a time; each score is :func:`pmi_n`'s, the same arithmetic."""
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    counts._count_pending()
    words = counts.words()
    lexicon = {}
    for n, share in LENGTH_SHARES.items():
        if n > counts.max_n:
            continue
        table = counts.tables[n]
        grams = unpack_grams(table.keys[table.counts > min_count], n)  # the candidates, as word numbers
        spans = [(i, j) for i in range(n) for j in range(i + 1, n + 1)]
        log_p = {}
        for i, j in spans:  # log p of every candidate's words i:j, None where not counted
            total = counts.totals[j - i]
            log_p[i, j] = [math.log(c / total) if c else None for c in counts.count_of(grams[:, i:j]).tolist()]
        scored = []
        for row, number in enumerate(grams.tolist()):
            value = pmi_of_spans({span: log_p[span][row] for span in spans}, n, score)
            if value is not None:
                scored.append((value, tuple(words[w] for w in number)))
        scored.sort(key=lambda item: (-item[0], item[1]))
        for value, gram in scored[:int(round(size * share))]:
            lexicon[gram] = value
    return lexicon


def read_lexicon(lines: Iterable[str], source: str) -> Dict[Words, float]:
    """A published list (the authors' format): one n-gram per line, words separated by spaces; anything
    after a tab is ignored. Lines of one word are refused (naming the line)."""
    lexicon = {}
    for number, line in enumerate(lines, 1):
        gram = tuple(line.split("\t", 1)[0].lower().split())
        if not gram:
            continue
        if not 2 <= len(gram) <= 5:
            raise ValueError(f"{source}:{number}: {line.strip()!r} has {len(gram)} word(s); the lexicon holds "
                             "n-grams of 2 to 5 words")
        lexicon[gram] = float(len(lexicon))
    return lexicon


def segment(words: Sequence[str], lexicon, max_n: int, rng: np.random.Generator) -> List[int]:
    """Start index of every unit of ``words`` (module docstring, item 5)."""
    n = len(words)
    matches = [(i, i + k) for i in range(n) for k in range(2, max_n + 1)
               if i + k <= n and tuple(words[i:i + k]) in lexicon]
    maximal = [m for m in matches if not any(o != m and o[0] <= m[0] and m[1] <= o[1] for o in matches)]
    chosen, covered = [], np.zeros(n, dtype=bool)
    for k in rng.permutation(len(maximal)):
        a, b = maximal[k]
        if not covered[a:b].any():
            chosen.append((a, b))
            covered[a:b] = True
    inside = {i for a, b in chosen for i in range(a + 1, b)}
    return [i for i in range(n) if i not in inside]


def unit_start_track(length: int, word_firsts: np.ndarray, unit_starts: Sequence[int]) -> np.ndarray:
    """A line's track: 1 on the first token of each unit, 0 elsewhere (``</s>`` included)."""
    track = np.zeros(length, dtype=np.int64)
    track[np.asarray(word_firsts, dtype=np.int64)[np.asarray(unit_starts, dtype=np.int64)]] = 1
    return track
