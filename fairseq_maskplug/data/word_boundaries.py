"""Which dictionary symbols start a word (``--mask-unit word``), read from the symbols as fairseq's
``get_whole_word_mask`` reads them from a BPE: a sentencepiece piece starting with ``▁``, a GPT-2 BPE
token starting with ``Ġ`` (its space byte; fairseq stores GPT-2 tokens as the numbers of
``encoder.json``, so that file is needed), a BERT WordPiece *not* starting with ``##`` (a converted BERT's data,
:mod:`..interop.bert`), and every symbol of a whitespace-tokenised corpus.

``auto`` decides from ``dict.txt``: any symbol with ``▁`` is sentencepiece; symbols that are all
numbers are GPT-2 labels; a vocabulary of which at least :data:`WORDPIECE_SHARE` are ``##`` continuations is
WordPiece (BERT's uncased one: 19%); anything else is whitespace-tokenised text.
"""

import json
from typing import Optional, Sequence, Tuple

import numpy as np

SPM_SPACE = "\u2581"  # sentencepiece's word-start mark
GPT2_SPACE = "\u0120"  # GPT-2's printable stand-in for the space byte (bytes_to_unicode)

WORDPIECE_MARK = "##"  # BERT's continuation mark (Devlin et al. 2019, section 3: WordPiece)
WORDPIECE_SHARE = 0.05  # this project's choice: well below BERT's 19%, well above a corpus's stray "##x" tokens

BOUNDARIES = ("auto", "sentencepiece", "gpt2", "wordpiece", "whitespace")


def _markup(symbol: str) -> bool:
    """A symbol such as ``<mask>`` or ``<extra_id_0>``: no text of the corpus."""
    return symbol.startswith("<") and symbol.endswith(">")


def is_continuation(symbol: str) -> bool:
    """A WordPiece that continues a word: ``##`` and at least one character (``##`` alone is a word)."""
    return len(symbol) > len(WORDPIECE_MARK) and symbol.startswith(WORDPIECE_MARK)


def _text_symbols(symbols: Sequence[str], nspecial: int):
    return [s for s in symbols[nspecial:] if not _markup(s) and not s.startswith("madeupword")]


def detect_boundaries(symbols: Sequence[str], nspecial: int = 4) -> str:
    """``sentencepiece``, ``gpt2``, ``wordpiece`` or ``whitespace`` for a dictionary's symbols (module docstring)."""
    text = _text_symbols(symbols, nspecial)
    if any(SPM_SPACE in s for s in text):
        return "sentencepiece"
    if text and all(s.isdigit() for s in text):
        return "gpt2"
    if text and sum(map(is_continuation, text)) >= WORDPIECE_SHARE * len(text):
        return "wordpiece"
    return "whitespace"


def word_start_symbols(dictionary, boundaries: str = "auto",
                       gpt2_encoder_json: Optional[str] = None) -> Tuple[np.ndarray, str]:
    """``(starts, boundaries used)``: per dictionary id, True where the symbol starts a word. Specials,
    ``<unk>`` and symbols that spell no text count as starts."""
    if boundaries not in BOUNDARIES:
        raise ValueError(f"--word-boundaries must be one of {BOUNDARIES}, got {boundaries!r}")
    if boundaries == "auto":
        boundaries = detect_boundaries(dictionary.symbols, dictionary.nspecial)
    if gpt2_encoder_json and boundaries != "gpt2":
        raise ValueError(f"--gpt2-encoder-json is read only for GPT-2 BPE data, and these word boundaries are "
                         f"{boundaries}'s")
    starts = np.ones(len(dictionary), dtype=bool)
    if boundaries == "whitespace":
        return starts, boundaries
    if boundaries == "gpt2":
        if not gpt2_encoder_json:
            raise ValueError("--mask-unit word on GPT-2 BPE data (dict.txt holds encoder.json's numbers): give "
                             "--gpt2-encoder-json, the BPE's encoder.json, to read where words start (Ġ)")
        with open(gpt2_encoder_json, encoding="utf-8") as f:
            token_of_label = {str(label): token for token, label in json.load(f).items()}
        texts = [token_of_label.get(symbol) for symbol in dictionary.symbols]
        mark = GPT2_SPACE
    elif boundaries == "wordpiece":
        texts, mark = list(dictionary.symbols), None
    else:
        texts, mark = list(dictionary.symbols), SPM_SPACE
    for i, text in enumerate(texts):
        if i >= dictionary.nspecial and i != dictionary.unk() and text is not None and not _markup(text):
            starts[i] = text.startswith(mark) if mark else not is_continuation(text)
    return starts, boundaries
