"""InforMask's per-token masking rates (Sadeq, Xu, McAuley, EMNLP 2022, §3), pure NumPy.

1. **Co-occurrence PMI.** Over the lines of a corpus (a line: a sentence), ``P(a)`` is the share of lines
   holding token ``a`` and ``P(a, b)`` the share holding both; ``PMI(a, b) = log P(a, b) / (P(a) P(b))``
   (:class:`CooccurrencePMI`). Two tokens of one line always co-occur, so no pair looked up is unseen.
2. **Sample and score.** For each line, ``candidates`` random masks of ``floor(p n + U)`` tokens are drawn; a mask's
   informative score is the PMI between what it masks and what it leaves: ``sum_{i masked} sum_{j not
   masked} PMI(w_i, w_j)``; the best-scoring mask is kept (:func:`best_of_candidates`).
3. **Token-specific masking rates.** Running that over the corpus once, each vocabulary entry's rate is the
   share of its occurrences that the kept masks covered (:func:`token_rates`); training then masks every
   token independently at its rate, as the authors' ``pretrain/dataset.py`` does with the table it ships
   (``vocab/id_mask_prob.json``; the code that made the table is not published).

Both steps cost the square of a line's length (every pair of its tokens): a line longer than ``window`` tokens
is taken as consecutive pieces of at most ``window`` tokens, each a line of its own for the counts and for the
masks (:func:`line_windows`; ours: the paper's lines are sentences, well under the default 512, BERT's longest
input, so the cap changes nothing there and bounds memory at ``window**2`` numbers per line).
"""

from typing import Iterable, Sequence

import numpy as np

from ..masking.random_masks import probabilistic_count


#: the longest piece of a line taken whole (module docstring; ours: BERT's longest input)
WINDOW = 512


def line_windows(line: np.ndarray, window: int = WINDOW):
    """``line`` as consecutive pieces of at most ``window`` tokens (the line itself when it is no longer)."""
    if window < 2:
        raise ValueError(f"line_windows: window {window} < 2 (a piece needs a pair of tokens)")
    line = np.asarray(line)
    return [line] if len(line) <= window else [line[i:i + window] for i in range(0, len(line), window)]


class CooccurrencePMI:
    """Line-level co-occurrence counts of a corpus and the PMI of token pairs (module docstring, step 1).

    Args:
        lines: token-id arrays, one per line (special tokens already removed).
        vocab_size: the dictionary's size (ids lie in ``[0, vocab_size)``).
        window: a longer line counts as its pieces of at most this many tokens (:func:`line_windows`).
    """

    def __init__(self, lines: Iterable[np.ndarray], vocab_size: int, chunk_lines: int = 5000, window: int = WINDOW,
                 chunk_pairs: int = 1 << 18):
        self.vocab_size = int(vocab_size)
        self.token_lines = np.zeros(self.vocab_size, dtype=np.int64)
        self.keys, self.pair_lines = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        self.lines = 0
        chunk, pending = [], 0  # pair keys not yet merged (at most about chunk_pairs, or chunk_lines pieces)
        for piece in (piece for line in lines for piece in line_windows(line, window)):
            unique = np.unique(np.asarray(piece, dtype=np.int64))
            self.token_lines[unique] += 1
            self.lines += 1
            a, b = np.triu_indices(len(unique), k=1)
            chunk.append(unique[a] * self.vocab_size + unique[b])
            pending += len(a)
            if len(chunk) >= chunk_lines or pending >= chunk_pairs:
                self._add(chunk)
                chunk, pending = [], 0
        self._add(chunk)

    def _add(self, chunk) -> None:
        if not chunk:
            return
        keys, counts = np.unique(np.concatenate(chunk), return_counts=True)
        merged = np.concatenate([self.keys, keys])
        order = np.argsort(merged, kind="stable")
        merged, weights = merged[order], np.concatenate([self.pair_lines, counts])[order]
        self.keys, starts = np.unique(merged, return_index=True)
        self.pair_lines = np.add.reduceat(weights, starts) if len(merged) else weights

    def to_arrays(self) -> dict:
        """The counts as numpy arrays (a shard's part of a sharded count: ``preprocess/informask.py``)."""
        return {"vocab_size": np.int64(self.vocab_size), "lines": np.int64(self.lines), "token_lines": self.token_lines,
                "keys": self.keys, "pair_lines": self.pair_lines}

    @classmethod
    def merged(cls, parts) -> "CooccurrencePMI":
        """The counts of the lines of every part together (each a :class:`CooccurrencePMI` or its
        :meth:`to_arrays`): integer sums, so the counts of a corpus cut into parts are its one-pass counts
        exactly, whatever the cut."""
        parts = [part.to_arrays() if isinstance(part, CooccurrencePMI) else part for part in parts]
        sizes = {int(part["vocab_size"]) for part in parts}
        if len(sizes) != 1:
            raise ValueError(f"CooccurrencePMI.merged: parts of vocabularies of {sorted(sizes)} entries")
        counts = cls([], sizes.pop())
        counts.lines = int(sum(int(part["lines"]) for part in parts))
        counts.token_lines = np.sum([part["token_lines"] for part in parts], axis=0, dtype=np.int64)
        keys = np.concatenate([part["keys"] for part in parts])
        weights = np.concatenate([part["pair_lines"] for part in parts])
        order = np.argsort(keys, kind="stable")
        keys, weights = keys[order], weights[order]
        counts.keys, starts = np.unique(keys, return_index=True)
        counts.pair_lines = np.add.reduceat(weights, starts) if len(keys) else weights
        return counts

    def pmi(self, line: np.ndarray) -> np.ndarray:
        """``len x len`` PMI between the tokens of one line (0 on the diagonal); every token must occur in the
        counted corpus and every pair must co-occur there (true of a counted line)."""
        line = np.asarray(line, dtype=np.int64)
        a, b = np.minimum.outer(line, line), np.maximum.outer(line, line)
        together = np.ones(a.shape, dtype=np.float64)
        distinct = a != b
        where = np.searchsorted(self.keys, a[distinct] * self.vocab_size + b[distinct])
        found = (where < len(self.keys)) & (self.keys[np.minimum(where, len(self.keys) - 1)] ==
                                            a[distinct] * self.vocab_size + b[distinct])
        if not found.all() or (self.token_lines[line] == 0).any():
            raise ValueError("CooccurrencePMI.pmi: a token or pair that the counted corpus does not hold")
        together[distinct] = self.pair_lines[where]
        together[~distinct] = self.token_lines[a[~distinct]]  # a token with itself: P(a, a) = P(a)
        single = self.token_lines[line] / self.lines
        pmi = np.log(together / self.lines) - np.log(np.multiply.outer(single, single))
        np.fill_diagonal(pmi, 0.0)
        return pmi


def informative_scores(pmi: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Each mask's informative score: ``sum_{i masked} sum_{j not masked} PMI_ij`` (``masks``: ``N x len``)."""
    masks = np.atleast_2d(masks).astype(np.float64)
    return np.einsum("ni,ij,nj->n", masks, pmi, 1.0 - masks)


def best_of_candidates(pmi: np.ndarray, rate: float, candidates: int, rng: np.random.Generator) -> np.ndarray:
    """The best-scoring of ``candidates`` uniform random masks of one line, all of the same ``floor(rate n + U)``
    tokens (one count per line: with a count per candidate, the score, a sum over masked tokens, would favour
    the larger masks and raise the realised rate), the first mask winning a tie."""
    if not 0 < rate <= 1 or candidates < 1:
        raise ValueError(f"best_of_candidates: rate {rate} outside (0, 1] or {candidates} candidates")
    n = len(pmi)
    count = probabilistic_count(rate, n, rng)
    masks = np.zeros((candidates, n), dtype=bool)
    for row in masks:
        row[rng.permutation(n)[:count]] = True
    return masks[int(np.argmax(informative_scores(pmi, masks)))]


def covered_occurrences(lines: Sequence[np.ndarray], counts: CooccurrencePMI, rate: float, candidates: int,
                        seed: int, window: int = WINDOW, first_line: int = 0):
    """``(masked, seen)``: per vocabulary entry, its occurrences in ``lines`` that the kept masks cover, and all
    its occurrences (float64 counts), ``lines`` being the corpus's lines from number ``first_line`` on: line
    ``k`` is drawn from ``default_rng((seed, k))``, its piece ``w > 0`` of a line longer than ``window`` from
    ``default_rng((seed, k, w))``, so a line's mask does not depend on where the corpus was cut into shards."""
    masked = np.zeros(counts.vocab_size, dtype=np.float64)
    seen = np.zeros(counts.vocab_size, dtype=np.float64)
    for k, line in enumerate(lines, start=first_line):
        for w, piece in enumerate(line_windows(np.asarray(line, dtype=np.int64), window)):
            if len(piece) == 0:
                continue
            rng = np.random.default_rng((seed, k) if w == 0 else (seed, k, w))
            mask = best_of_candidates(counts.pmi(piece), rate, candidates, rng)
            np.add.at(seen, piece, 1.0)
            np.add.at(masked, piece[mask], 1.0)
    return masked, seen


def rates_of(masked: np.ndarray, seen: np.ndarray, default: float) -> np.ndarray:
    """Each entry's share of covered occurrences (:func:`covered_occurrences`, summed over the corpus's parts);
    ``default`` for an entry that never occurs."""
    rates = np.full(len(seen), float(default))
    rates[seen > 0] = masked[seen > 0] / seen[seen > 0]
    return rates


def token_rates(lines: Sequence[np.ndarray], counts: CooccurrencePMI, rate: float, candidates: int, seed: int,
                default: float, window: int = WINDOW) -> np.ndarray:
    """Every vocabulary entry's masking rate: the share of its occurrences in ``lines`` that the kept masks
    cover (:func:`covered_occurrences`); ``default`` for an entry that never occurs."""
    return rates_of(*covered_occurrences(lines, counts, rate, candidates, seed, window), default)
