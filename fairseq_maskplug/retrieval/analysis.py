"""The analyser and Lucene's BM25, as the TLM authors' Elasticsearch index computed them.

Their index (yaoxingcheng/TLM, ``src/data_selection.py``) used Elasticsearch 7's ``standard``
analyser: lower-cased Unicode word tokens, no stop words, no stemming (a stop-word analyser
is defined but never applied). Ours: lower-case, then the regular expression ``\\w+``
(Python's Unicode ``\\w``), which splits ``don't`` and ``3.5`` where Unicode word
segmentation (UAX #29) keeps them whole. Scoring is Lucene 8's BM25 (``BM25Similarity``)::

    idf(t)    = ln(1 + (N - n_t + 0.5) / (n_t + 0.5))
    score(d)  = sum over query tokens t of idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl))

with k1 = 1.2, b = 0.75, N the number of documents with at least one token, n_t those
containing t and avgdl their mean length. Lucene 8 dropped the constant ``(k1 + 1)``
numerator factor (ranking is unchanged). Not reproduced: Lucene stores ``|d|`` in one
byte (lossy above 40 tokens), so its scores of long documents differ slightly from these.
A query token that appears twice counts twice, as in a Lucene boolean query.
"""

import re
from dataclasses import asdict, dataclass, field
from typing import FrozenSet, List

import numpy as np

K1 = 1.2  # Lucene / Elasticsearch default
B = 0.75  # Lucene / Elasticsearch default
TOKEN_PATTERN = r"\w+"


@dataclass(frozen=True)
class Analyser:
    """Text -> index tokens: optional lower-casing, ``pattern`` matches, minus ``stopwords``."""

    pattern: str = TOKEN_PATTERN
    lowercase: bool = True
    stopwords: FrozenSet[str] = field(default_factory=frozenset)

    def __post_init__(self):
        try:
            compiled = re.compile(self.pattern)
        except re.error as error:
            raise ValueError(f"--token-pattern {self.pattern!r} is not a regular expression: {error}") from None
        if compiled.groups:
            raise ValueError(f"--token-pattern {self.pattern!r} has a capturing group; use (?:...)")
        # '\w*' or '\b': every text would hold the empty token, and every query match every document
        if compiled.fullmatch("") or any(m.group(0) == "" for m in compiled.finditer("a b-1 . é")):
            raise ValueError(f"--token-pattern {self.pattern!r} matches the empty string (every document would share "
                             "that token with every query); make it match at least one character, e.g. \\w+")
        object.__setattr__(self, "stopwords", frozenset(self.stopwords))
        object.__setattr__(self, "_findall", compiled.findall)

    def tokens(self, text: str) -> List[str]:
        if self.lowercase:
            text = text.lower()
        found = self._findall(text)
        return [t for t in found if t not in self.stopwords] if self.stopwords else found

    def settings(self) -> dict:
        """JSON-able description, stored with an index (stop words sorted)."""
        out = asdict(self)
        out["stopwords"] = sorted(self.stopwords)
        return out

    @classmethod
    def from_settings(cls, settings: dict) -> "Analyser":
        return cls(settings["pattern"], settings["lowercase"], frozenset(settings["stopwords"]))


def lucene_idf(n_docs, doc_freq):
    """``ln(1 + (N - n + 0.5) / (n + 0.5))`` (Lucene ``BM25Similarity.idf``); always > 0 for n <= N."""
    doc_freq = np.asarray(doc_freq, dtype=np.float64)
    if np.any(doc_freq < 0) or np.any(doc_freq > n_docs):
        raise ValueError(f"document frequencies must lie in [0, N={n_docs}]")
    return np.log1p((n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def lucene_term_score(idf, tf, doc_len, avgdl: float, k1: float = K1, b: float = B):
    """One term's contribution ``idf * tf / (tf + k1 * (1 - b + b * |d| / avgdl))`` (Lucene 8)."""
    check_bm25_parameters(k1, b)
    if avgdl <= 0:
        raise ValueError(f"avgdl must be positive, got {avgdl}")
    tf = np.asarray(tf, dtype=np.float64)
    return idf * tf / (tf + document_norms(doc_len, avgdl, k1, b))


def document_norms(doc_len, avgdl: float, k1: float = K1, b: float = B) -> np.ndarray:
    """Each document's ``k1 * (1 - b + b * |d| / avgdl)`` in float64 (the denominator of
    :func:`lucene_term_score` less ``tf``; the pruning kernel adds ``tf`` to it in the same order)."""
    return k1 * (1.0 - b + b * np.asarray(doc_len, dtype=np.float64) / avgdl)


def check_bm25_parameters(k1: float, b: float) -> None:
    if not k1 >= 0:
        raise ValueError(f"--k1 must be >= 0, got {k1}")
    if not 0 <= b <= 1:
        raise ValueError(f"--b must lie in [0, 1], got {b}")
