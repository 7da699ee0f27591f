"""Map character spans of a text onto the exact binarized subword tokens of that text.

Every binarized token has a *surface*: the bytes of text it stands for. Sentencepiece
pieces write a space as ``▁`` (the first piece of a line carries the dummy-prefix space);
GPT-2 byte-level BPE tokens are stored by fairseq as the numbers of ``encoder.json`` and
spell bytes through GPT-2's byte-to-unicode table, so one multi-byte character may be
split over two tokens. The surfaces of a line, joined, must spell the line's text
(:func:`line_text`); a character span ``[start, end)`` then covers the tokens whose
bytes overlap its bytes (:func:`token_span`): the smallest run of tokens holding it.
"""

import json
import unicodedata
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

SPM_SPACE = "\u2581"


class TextMismatchError(ValueError):
    """A line's text does not reproduce its binarized tokens."""


class TokenSurfaces:
    """Surface bytes of every symbol of a fairseq dictionary.

    Args:
        symbols: the dictionary's symbols in id order.
        special: ids that stand for no text (``<s>``, ``</s>``, ``<pad>``).
        unknown: id of ``<unk>`` (a line holding it cannot be reproduced).
        bpe: ``sentencepiece`` or ``gpt2``.
        gpt2_encoder: ``encoder.json`` contents (GPT-2 BPE token -> number) for ``gpt2``.
    """

    def __init__(self, symbols: Sequence[str], special: Sequence[int], unknown: int, bpe: str,
                 gpt2_encoder: Optional[Dict[str, int]] = None):
        self.bpe = bpe
        self.unknown = unknown
        self.special = set(special)
        if bpe == "sentencepiece":
            self.surface = [s.replace(SPM_SPACE, " ").encode("utf-8") for s in symbols]
            self.prefix = b" "  # sentencepiece's dummy prefix
        elif bpe == "gpt2":
            if gpt2_encoder is None:
                raise ValueError("--bpe gpt2 needs GPT-2's encoder.json")
            byte_decoder = {c: b for b, c in gpt2_bytes_to_unicode().items()}
            number_to_token = {str(v): k for k, v in gpt2_encoder.items()}
            self.surface = []
            for symbol in symbols:
                token = number_to_token.get(symbol)
                if token is None or not all(c in byte_decoder for c in token):
                    self.surface.append(None)  # <mask>, <madeupword...>: not GPT-2 text
                else:
                    self.surface.append(bytes(byte_decoder[c] for c in token))
            self.prefix = b""
        else:
            raise ValueError(f"unknown bpe {bpe!r}: sentencepiece or gpt2")

    @classmethod
    def from_dictionary(cls, dictionary, bpe: str, gpt2_encoder_json: Optional[str] = None):
        encoder = None
        if gpt2_encoder_json is not None:
            with open(gpt2_encoder_json, encoding="utf-8") as f:
                encoder = json.load(f)
        return cls(dictionary.symbols, (dictionary.bos(), dictionary.eos(), dictionary.pad()), dictionary.unk(),
                   bpe, encoder)

    def token_bytes(self, ids: Sequence[int], unknown_ok: bool = False) -> List[Optional[bytes]]:
        """Surface of each id (special tokens: empty); ``<unk>`` (None with ``unknown_ok``) and
        non-text symbols raise."""
        out = []
        for i in ids:
            i = int(i)
            if i in self.special:
                out.append(b"")
            elif i == self.unknown and unknown_ok:
                out.append(None)
            elif i == self.unknown or i >= len(self.surface) or self.surface[i] is None:
                raise TextMismatchError(f"token {i} ({'<unk>' if i == self.unknown else 'not text'}) "
                                        "stands for no known text")
            else:
                out.append(self.surface[i])
        return out


def gpt2_bytes_to_unicode() -> Dict[int, str]:
    """GPT-2's reversible byte -> printable character table (as in fairseq's gpt2_bpe_utils)."""
    from fairseq.data.encoders.gpt2_bpe_utils import bytes_to_unicode
    return bytes_to_unicode()


def normalise(text: str, bpe: str) -> str:
    """What the tokens of ``text`` spell: sentencepiece (``nmt_nfkc``) applies NFKC and
    collapses whitespace; GPT-2 BPE is lossless."""
    if bpe == "sentencepiece":
        return " ".join(unicodedata.normalize("NFKC", text).split())
    return text


def fill_unknowns(pieces: Sequence[Optional[bytes]], target: bytes) -> List[bytes]:
    """``pieces`` with each ``<unk>`` (None) replaced by the bytes of ``target`` it stands for:
    the shortest non-empty run up to where the next known piece matches (or the rest of the
    line). Known pieces must match ``target`` in order; a TextMismatchError names the first
    that does not."""
    out, at = [], 0
    for k, piece in enumerate(pieces):
        if piece is not None:
            if target[at:at + len(piece)] != piece:
                raise TextMismatchError(f"token {k + 1} spells {piece!r} where the text has "
                                        f"{target[at:at + len(piece)]!r}")
            out.append(piece)
            at += len(piece)
            continue
        following = next((p for p in pieces[k + 1:] if p), None)  # the next known non-empty piece
        end = len(target) if following is None else target.find(following, at + 1)
        if end <= at:
            raise TextMismatchError(f"token {k + 1} (<unk>) stands for no text between its neighbours")
        out.append(target[at:end])
        at = end
    if at != len(target):
        raise TextMismatchError(f"the tokens end at byte {at} of a text of {len(target)} bytes")
    return out


def line_text(surfaces: TokenSurfaces, ids: Sequence[int], raw: str) -> Tuple[str, np.ndarray]:
    """``(text, byte offsets)``: the text the tokens spell, checked against the raw line, and
    each token's ``[start, end)`` in that text's UTF-8 bytes (shape ``len(ids) x 2``). A
    ``<unk>`` token (a character sentencepiece's vocabulary lacks) takes the text between its
    neighbours (:func:`fill_unknowns`)."""
    pieces = surfaces.token_bytes(ids, unknown_ok=True)
    if any(piece is None for piece in pieces):
        known = b"".join(p for p in pieces if p is not None)
        prefix = surfaces.prefix if known.startswith(surfaces.prefix) else b""
        target = prefix + normalise(raw.rstrip("\n"), surfaces.bpe).encode("utf-8")
        pieces = fill_unknowns(pieces, target)
    joined = b"".join(pieces)
    prefix = surfaces.prefix if joined.startswith(surfaces.prefix) else b""
    try:
        text = joined[len(prefix):].decode("utf-8")
    except UnicodeDecodeError as error:
        raise TextMismatchError(f"the tokens do not spell UTF-8 text ({error})") from None
    expected = normalise(raw.rstrip("\n"), surfaces.bpe)
    if text != expected:
        at = next((k for k, (a, b) in enumerate(zip(text, expected)) if a != b), min(len(text), len(expected)))
        raise TextMismatchError(f"the tokens spell {text[max(0, at - 20):at + 20]!r} where the text has "
                                f"{expected[max(0, at - 20):at + 20]!r} (character {at + 1})")
    ends = np.cumsum([len(p) for p in pieces]) - len(prefix)
    starts = ends - np.array([len(p) for p in pieces])
    return text, np.stack([starts, ends], axis=1) if len(pieces) else np.zeros((0, 2), dtype=np.int64)


def spell_lines(surfaces: TokenSurfaces, token_rows: Iterable[Sequence[int]], raw_lines: Sequence[str],
                text_name: str, tokens_name: str, desc: str = "check") -> Tuple[List[str], List[np.ndarray]]:
    """:func:`line_text` of every line, with a progress bar: ``(texts, byte ranges)``. The first
    line that does not reproduce its tokens raises :class:`TextMismatchError` naming
    ``text_name:LINE`` and the line of ``tokens_name``."""
    from ..common.progress import progress_bar

    texts, ranges = [], []
    rows = progress_bar(zip(token_rows, raw_lines), total=len(raw_lines), desc=desc, unit="line", disable=None)
    for line, (ids, raw) in enumerate(rows, start=1):
        try:
            text, byte_ranges = line_text(surfaces, ids, raw)
        except TextMismatchError as error:
            raise TextMismatchError(f"{text_name}:{line}: the text does not reproduce the binarized tokens of "
                                    f"{tokens_name} line {line}: {error}") from None
        texts.append(text)
        ranges.append(byte_ranges)
    return texts, ranges


def char_to_byte_offsets(text: str) -> np.ndarray:
    """``offsets[c]`` = byte offset of character ``c`` in ``text.encode()`` (length ``len(text) + 1``)."""
    return np.concatenate([[0], np.cumsum([len(ch.encode("utf-8")) for ch in text])]).astype(np.int64)


def token_span(byte_ranges: np.ndarray, byte_start: int, byte_end: int) -> Optional[Tuple[int, int]]:
    """``(first, last + 1)`` of the tokens whose bytes overlap ``[byte_start, byte_end)``; a
    token made only of spaces before the span does not overlap it. None when none does."""
    starts, ends = byte_ranges[:, 0], byte_ranges[:, 1]
    hit = np.flatnonzero((starts < byte_end) & (ends > byte_start) & (ends > starts))
    if hit.size == 0:
        return None
    return int(hit[0]), int(hit[-1]) + 1


def read_text_lines(path) -> List[str]:
    """The lines of a UTF-8 text file (without their line ends); a ValueError naming the file otherwise."""
    import os

    try:
        with open(path, encoding="utf-8") as f:
            return f.read().split("\n")[:-1] if os.path.getsize(path) else []
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text ({error})") from None


def spelled_split(data: str, split: str, track: str, text: str, bpe: str, gpt2_encoder_json: Optional[str],
                  also: Sequence[str] = ()):
    """What a command annotating a binarized split from its raw text starts with, every input and
    the output checked before any work: ``(split prefix, track prefix, texts, byte ranges, lines of
    each file of also)``. ``text`` holds the raw line of every binarized line (one per line, as do
    the files of ``also``); each line is spelled by its tokens (:func:`spell_lines`)."""
    import os

    from fairseq.data.indexed_dataset import MMapIndexedDataset

    from ..common.atomic import check_writable
    from ..data import side_info_prefix
    from ..data.dictionaries import read_dictionary
    from ..data.indexed_files import open_checked

    split_prefix = os.path.join(data, split)
    prefix = side_info_prefix(split_prefix, track)
    if not MMapIndexedDataset.exists(split_prefix):
        raise FileNotFoundError(f"binarized tokens not found: {split_prefix}.bin/.idx")
    if bpe == "gpt2" and not gpt2_encoder_json:
        raise ValueError("--bpe gpt2 needs --gpt2-encoder-json")
    check_writable(prefix + ".bin")
    surfaces = TokenSurfaces.from_dictionary(read_dictionary(os.path.join(data, "dict.txt")), bpe, gpt2_encoder_json)
    tokens = open_checked(split_prefix)
    files = [read_text_lines(path) for path in (text, *also)]
    for path, rows in zip((text, *also), files):
        if len(rows) != len(tokens):
            raise ValueError(f"{path} has {len(rows)} lines, the binarized split {split_prefix} has {len(tokens)}")
    texts, ranges = spell_lines(surfaces, (tokens[i].numpy() for i in range(len(tokens))), files[0], text,
                                split_prefix, desc=f"check {split}")
    return split_prefix, prefix, texts, ranges, files[1:]
