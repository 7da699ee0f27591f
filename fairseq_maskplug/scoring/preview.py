"""Readable previews of per-token annotations (like Gu et al. 2020, Table 2)."""

from typing import List, Optional, Sequence

import numpy as np


def preview_symbols(dictionary, gpt2_bpe_dir: Optional[str] = None) -> List[str]:
    """The dictionary's symbols as :func:`render_marked` reads them. GPT-2 BPE labels (``gpt2_bpe_dir``
    holds ``encoder.json``) become the text they spell, a leading space written ``▁`` as sentencepiece
    does; symbols that spell no text keep their name."""
    if gpt2_bpe_dir is None:
        return list(dictionary.symbols)
    import os

    from .alignment import TokenSurfaces
    surfaces = TokenSurfaces.from_dictionary(dictionary, "gpt2", os.path.join(gpt2_bpe_dir, "encoder.json"))
    out = []
    for symbol, surface in zip(dictionary.symbols, surfaces.surface):
        if surface is None:
            out.append(symbol)
        else:
            text = surface.decode("utf-8", errors="replace")
            out.append("\u2581" + text[1:] if text.startswith(" ") else text)
    return out


def render_marked(symbols: Sequence[str], marks: np.ndarray) -> str:
    """Join the subword ``symbols`` of one sentence, wrapping marked ones in ``[...]``.

    Sentencepiece pieces (``▁`` starts a word) are detokenised, so a marked piece inside
    a word reads ``exhilar[ating]``; a marked piece that is the word mark alone (sentencepiece
    writes ``▁`` + ``"`` for a quote after a space) reads ``[▁]``, not an empty ``[]``; other
    vocabularies are joined with spaces.
    """
    if not any(s.startswith("\u2581") for s in symbols):
        return " ".join(f"[{s}]" if m else s for s, m in zip(symbols, marks))
    out = []
    for symbol, marked in zip(symbols, marks):
        lead = symbol.startswith("\u2581")
        core = symbol[1:] if lead else symbol
        out.append((" " if lead else "") + (f"[{core or symbol}]" if marked else core))
    return "".join(out).strip()


def write_preview(path: str, lines) -> None:
    """Write the preview ``lines`` (strings, without line ends) to ``path`` atomically
    (:func:`~fairseq_maskplug.common.atomic.write_text`)."""
    from ..common.atomic import write_text

    write_text(path, "".join(line + "\n" for line in lines))


def throughput(verb: str, lines: int, tokens: int, seconds: float) -> str:
    """The start of a scoring command's summary line: ``"<verb> N lines (T tokens) in S s (R tokens/s)"``."""
    return f"{verb} {lines} lines ({tokens} tokens) in {seconds:.1f} s ({tokens / max(seconds, 1e-9):.0f} tokens/s)"
