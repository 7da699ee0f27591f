"""Readable previews of per-token annotations (like Gu et al. 2020, Table 2)."""

from typing import Sequence

import numpy as np


def render_marked(symbols: Sequence[str], marks: np.ndarray) -> str:
    """Join the subword ``symbols`` of one sentence, wrapping marked ones in ``[...]``.

    Sentencepiece pieces (``▁`` starts a word) are detokenised, so a marked piece inside
    a word reads ``exhilar[ating]``; other vocabularies are joined with spaces.
    """
    if not any(s.startswith("\u2581") for s in symbols):
        return " ".join(f"[{s}]" if m else s for s, m in zip(symbols, marks))
    out = []
    for symbol, marked in zip(symbols, marks):
        lead = symbol.startswith("\u2581")
        core = symbol[1:] if lead else symbol
        out.append((" " if lead else "") + (f"[{core}]" if marked else core))
    return "".join(out).strip()
