"""Difference-Masking's scores (Wilf et al., Findings of EMNLP 2023, §3), pure NumPy.

What makes the target domain different from the general one, as a score per vocabulary entry:

1. **Anchors.** Each entry's TF-ICF: its frequency in the target-domain corpus times its inverse corpus
   frequency in the general corpus, ``log((N + 1) / (n_w + 1))`` over the general corpus's ``N`` lines, ``n_w``
   of them holding it (TF-IDF with the document frequencies taken from the general corpus, Reed et al. 2006's
   TF-ICF). The ``K`` highest are the anchors (:func:`tf_icf`, :func:`anchors`).
2. **Similarity.** An entry's score is its largest cosine similarity to an anchor, from token embeddings (the
   input embeddings of the model continued, or any given matrix), clipped below at 0 (:func:`anchor_similarity`);
   an anchor scores 1.

Training then masks a block's tokens with probabilities in proportion to their scores
(:mod:`fairseq_maskplug.masking.difference`).
"""

import numpy as np


def tf_icf(domain_counts: np.ndarray, general_line_counts: np.ndarray, general_lines: int) -> np.ndarray:
    """Each entry's TF-ICF: ``tf(w) * log((N + 1) / (n_w + 1))`` with ``tf`` the entry's share of the target
    domain's tokens, ``N`` the general corpus's lines and ``n_w`` the lines holding ``w``."""
    domain_counts = np.asarray(domain_counts, dtype=np.float64)
    general_line_counts = np.asarray(general_line_counts, dtype=np.float64)
    if domain_counts.shape != general_line_counts.shape:
        raise ValueError("tf_icf: the two count vectors must have one entry per vocabulary entry")
    total = domain_counts.sum()
    tf = domain_counts / total if total > 0 else domain_counts
    return tf * np.log((general_lines + 1.0) / (general_line_counts + 1.0))


def anchors(scores: np.ndarray, k: int, candidates: np.ndarray) -> np.ndarray:
    """The ``k`` candidate entries of highest score, best first (ties: the lower id), among those whose score is
    positive (an entry of TF-ICF 0 sets nothing apart: it is in every general line); fewer when fewer are
    positive, and a ValueError when none is."""
    scores = np.asarray(scores, dtype=np.float64)
    if k < 1:
        raise ValueError(f"anchors: {k} anchors asked")
    candidates = np.flatnonzero(np.asarray(candidates, dtype=bool) & (scores > 0))
    if candidates.size == 0:
        raise ValueError("no entry of the target domain has a positive TF-ICF: each one occurs in every line of the "
                         "general corpus (is the general corpus the target itself, or one repeated line?), so "
                         "nothing sets the domain apart; give a general corpus that differs from the target")
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order[:k]]


def anchor_similarity(embeddings: np.ndarray, anchor_ids: np.ndarray) -> np.ndarray:
    """Each entry's largest cosine similarity to an anchor's embedding, clipped below at 0."""
    embeddings = np.asarray(embeddings, dtype=np.float64)
    norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
    unit = embeddings / np.where(norms > 0, norms, 1.0)
    similarity = unit @ unit[np.asarray(anchor_ids)].T
    return np.clip(similarity.max(axis=1), 0.0, 1.0)
