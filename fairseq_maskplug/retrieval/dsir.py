"""DSIR: data selection with importance resampling over hashed n-gram features (Xie et al., NeurIPS 2023).

The cheap alternative to TLM's BM25 retrieval: no index and no queries. Both the target texts (the
task's) and the raw corpus are reduced to bags of hashed n-grams (Sec. 4: unigrams and bigrams of
the lower-cased, word-punct-tokenised text, hashed into 10,000 buckets); each is fitted as a
categorical distribution over the buckets, and a raw document x gets the importance weight

    log w(x) = sum over the n-grams z of x of  log p_target(bucket z) - log p_raw(bucket z)     (Eq. 2)

Documents are then resampled without replacement with probabilities proportional to w (the Gumbel
top-k trick: add a standard Gumbel to each log w and keep the k largest; Sec. 3 "resample k examples
without replacement"), or, with ``sample=False``, the k largest weights are kept.

What follows the authors' code (``data-selection`` 1.0.3): the tokenisation (NLTK's
``WordPunctTokenizer`` pattern ``\\w+|[^\\w\\s]+``), lower-casing, 10,000 buckets, unigrams + bigrams,
``log(p + 1e-8)``. Ours: the hash (CRC-32 of the UTF-8 n-gram instead of SHA-256: any fixed hash
serves the estimator, and CRC-32 is several times faster in Python) and no minimum document length by
default (the authors' package drops documents of fewer than 100 words).
"""

import re
import zlib
from typing import Iterable

import numpy as np

WORD_PUNCT = re.compile(r"\w+|[^\w\s]+")
BUCKETS = 10_000
NGRAMS = 2
EPSILON = 1e-8


def hashed_ngrams(text: str, buckets: int = BUCKETS, n: int = NGRAMS) -> np.ndarray:
    """The bucket of every 1..n-gram of ``text`` (lower-cased, word-punct tokens), one entry per
    occurrence (an int64 array; empty for a text without tokens)."""
    if buckets < 1 or n < 1:
        raise ValueError(f"buckets and n must be >= 1, got {buckets} and {n}")
    words = WORD_PUNCT.findall(text.lower())
    grams = [" ".join(words[i:i + k]) for k in range(1, n + 1) for i in range(len(words) - k + 1)]
    return np.fromiter((zlib.crc32(g.encode("utf-8")) % buckets for g in grams), dtype=np.int64, count=len(grams))


def bucket_counts(texts: Iterable[str], buckets: int = BUCKETS, n: int = NGRAMS) -> np.ndarray:
    """How often each bucket's n-grams occur in ``texts`` (float64 holding integers: sums of counts, e.g.
    of corpus shards, are exact up to 2**53 occurrences)."""
    counts = np.zeros(buckets, dtype=np.float64)
    for text in texts:
        counts += np.bincount(hashed_ngrams(text, buckets, n), minlength=buckets)
    return counts


def normalised(counts: np.ndarray) -> np.ndarray:
    """The distribution over buckets of :func:`bucket_counts`."""
    total = counts.sum()
    if total == 0:
        raise ValueError("no n-gram in the texts: nothing to fit a distribution on")
    return counts / total


def fit_distribution(texts: Iterable[str], buckets: int = BUCKETS, n: int = NGRAMS) -> np.ndarray:
    """The bag-of-hashed-n-grams distribution of ``texts``: bucket counts over all texts, normalised."""
    return normalised(bucket_counts(texts, buckets, n))


def log_ratio(target: np.ndarray, raw: np.ndarray, epsilon: float = EPSILON) -> np.ndarray:
    """``log(p_target + eps) - log(p_raw + eps)`` per bucket (the authors' smoothing)."""
    if target.shape != raw.shape:
        raise ValueError(f"target and raw distributions differ in size: {target.shape} and {raw.shape}")
    return np.log(target + epsilon) - np.log(raw + epsilon)


def log_importance_weight(text: str, ratio: np.ndarray, n: int = NGRAMS) -> float:
    """``log w(x)`` of one raw document (Eq. 2): the sum of the log ratios of its n-grams' buckets."""
    return float(ratio[hashed_ngrams(text, len(ratio), n)].sum())


def resample(log_weights: np.ndarray, k: int, rng: np.random.Generator = None, sample: bool = True) -> np.ndarray:
    """Indices of ``k`` documents chosen without replacement with probabilities proportional to
    ``exp(log_weights)`` (Gumbel top-k: the first index is drawn with probability w_i / sum w, the
    next from the rest likewise), in the order drawn; ``sample=False``: the k largest weights
    (ties: the lower index first). ``-inf`` weights are never chosen."""
    log_weights = np.asarray(log_weights, dtype=np.float64)
    eligible = int(np.isfinite(log_weights).sum())
    if not 1 <= k <= eligible:
        raise ValueError(f"cannot choose {k} of {eligible} documents with a finite weight")
    keys = log_weights.copy()
    if sample:
        if rng is None:
            raise ValueError("sampling needs a numpy Generator (rng)")
        keys[np.isfinite(keys)] += rng.gumbel(size=eligible)
    order = np.lexsort((np.arange(len(keys)), -keys))  # largest key first, ties by index
    return order[:k]
