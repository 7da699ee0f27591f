"""Per-token side information stored parallel to the binarized token data.

A side-information track named ``NAME`` for the split ``data-bin/train`` lives in
``data-bin/train.NAME.bin`` / ``.idx`` (fairseq's mmap indexed format): one row per
line of the token data and one value per token, ``</s>`` included (its value is 0).
At load time :func:`load_side_info` checks the line count and every line's length
against the token data and stops at the first mismatch. Writers that know the token
data (every producer in this package) also record its fingerprint in
``data-bin/train.NAME.json``; then a track computed for another corpus or another
dictionary is refused even when every line happens to have the right length, and the byte length
and SHA-256 of the track's own ``.bin``/``.idx``: lengths are compared at every load, sums where
asked (``--verify-data``), so a track cut short or copied over is named with its file.
"""

import hashlib
import json
import logging
import os
from typing import Iterable, Optional

import numpy as np
import torch
from fairseq.data.indexed_dataset import MMapIndexedDataset, MMapIndexedDatasetBuilder

from .._version import RECORD_KEY, __version__, newer_version_line
from ..common.atomic import temporary_name, write_failed
from ..common.file_records import DamagedFileError, file_record, read_manifest, recorded_damage
from ..masking.values import FINITE, ValueRule, check_track_name

logger = logging.getLogger(__name__)

SIDE_INFO_DTYPES = {"float64": np.float64, "int64": np.int64, "int32": np.int32, "uint8": np.uint8}


class SideInfoMismatchError(ValueError):
    """Side information does not line up with the token data it annotates."""


def side_info_prefix(split_prefix: str, name: str) -> str:
    """``data-bin/train`` + ``importance`` -> ``data-bin/train.importance``; a track name is a
    file-name part (letters, digits, ``_``, ``-``, ``.``), never a path."""
    return f"{split_prefix}.{check_track_name(name)}"


class SideInfoDataset(MMapIndexedDataset):
    """fairseq's mmap reader, keeping the stored values.

    ``MMapIndexedDataset.__getitem__`` casts every dtype to int64, which would
    truncate scores; here floating data comes back as float64, integers as int64.
    """

    def __getitem__(self, i):
        ptr, size = self._index[i]
        stored = np.frombuffer(self._bin_buffer, dtype=self._index.dtype, count=size, offset=ptr)
        wanted = np.float64 if np.issubdtype(self._index.dtype, np.floating) else np.int64
        return torch.from_numpy(stored.astype(wanted))


def token_fingerprint(split_prefix: str, chunks: int = 256, chunk_bytes: int = 4096) -> str:
    """A cheap fingerprint of the binarized tokens ``split_prefix.bin/.idx``.

    SHA-256 of the whole index (line lengths) and of the token file: all of it up to
    ``chunks * chunk_bytes`` bytes, otherwise ``chunks`` evenly spaced pieces. Token ids
    change everywhere when the dictionary changes, so another dictionary or corpus gives
    another fingerprint while a large corpus is still read only in part.
    """
    digest = hashlib.sha256()
    with open(split_prefix + ".idx", "rb") as f:
        digest.update(f.read())
    sampled_digest(split_prefix + ".bin", digest, chunks, chunk_bytes)
    return digest.hexdigest()


def sampled_digest(path: str, digest, chunks: int = 256, chunk_bytes: int = 4096):
    """``digest`` updated with the file's bytes: all of them up to ``chunks * chunk_bytes``, otherwise ``chunks``
    evenly spaced pieces (a large file read in part); the digest."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if size <= chunks * chunk_bytes:
            digest.update(f.read())
        else:
            for k in range(chunks):
                f.seek((size - chunk_bytes) * k // (chunks - 1))
                digest.update(f.read(chunk_bytes))
    return digest


def write_side_info(prefix: str, rows: Iterable, dtype: str = "float64",
                    tokens_prefix: Optional[str] = None, extra: Optional[dict] = None) -> int:
    """Write ``rows`` (one 1-D array per token line, ``</s>`` included) atomically.

    With ``tokens_prefix`` (the binarized split the rows annotate) the token data's
    :func:`token_fingerprint` is recorded in ``prefix.json`` and checked at load time.
    All files are written under temporary names first; the old index is removed
    before the new files are renamed into place, the index last, so an interrupted
    write never leaves a set of files that looks complete. Every value must fit ``dtype``
    (finite; whole numbers in range for integer types), or nothing is written. ``dtype`` is
    a name or a NumPy type (``"uint8"`` or ``np.uint8``). ``extra`` (with ``tokens_prefix``) adds
    its items to ``prefix.json`` (a shard's line range and options). Returns the row count.
    """
    try:
        dtype = np.dtype(dtype).name
    except TypeError:
        pass
    if dtype not in SIDE_INFO_DTYPES:
        raise ValueError(f"dtype must be one of {sorted(SIDE_INFO_DTYPES)}, got {dtype!r}")
    tmp = temporary_name(prefix)
    builder = MMapIndexedDatasetBuilder(tmp + ".bin", dtype=SIDE_INFO_DTYPES[dtype])
    count = 0
    stored = SIDE_INFO_DTYPES[dtype]
    rule = FINITE
    if np.issubdtype(stored, np.integer):
        info = np.iinfo(stored)
        rule = ValueRule(f"a whole number in [{info.min}, {info.max}] ({dtype})", info.min, info.max, integral=True)
    replacing = False  # once the old files are being replaced, a failure is not a failed write
    try:
        for row in rows:
            row = np.asarray(row)
            bad = np.flatnonzero(rule.invalid(row))
            if bad.size:
                raise ValueError(f"line {count + 1}, value {int(bad[0]) + 1}: {row[bad[0]].item()!r} is not "
                                 f"{rule.description}; nothing was written")
            builder.add_item(torch.as_tensor(row.astype(stored)))
            count += 1
        builder.finalize(tmp + ".idx")
        if tokens_prefix is not None:
            with open(tmp + ".json", "w") as f:
                json.dump({"tokens": os.path.basename(tokens_prefix), "lines": count, RECORD_KEY: __version__,
                           "token_fingerprint": token_fingerprint(tokens_prefix),
                           "files": {suffix: file_record(tmp + suffix) for suffix in (".bin", ".idx")},
                           **(extra or {})}, f, indent=1)
        replacing = True
        for suffix in (".idx", ".json"):
            if os.path.exists(prefix + suffix):
                os.remove(prefix + suffix)
        os.replace(tmp + ".bin", prefix + ".bin")
        if tokens_prefix is not None:
            os.replace(tmp + ".json", prefix + ".json")
        os.replace(tmp + ".idx", prefix + ".idx")
    except OSError as error:  # a full disk, a file-size limit: one line; the finally removes the temporaries
        if replacing:
            raise
        written = sum(os.path.getsize(tmp + s) for s in (".bin", ".idx", ".json") if os.path.exists(tmp + s))
        raise write_failed(prefix + ".bin/.idx", error, written) from None
    finally:
        for leftover in (tmp + ".bin", tmp + ".idx", tmp + ".json"):
            if os.path.exists(leftover):
                os.remove(leftover)
    return count


def check_aligned(token_sizes, side_sizes, *, split: str, name: str, path: str) -> None:
    """Raise :class:`SideInfoMismatchError` naming the first line whose side information
    and tokens differ in length (lines are counted from 1, as in the text files)."""
    token_sizes, side_sizes = np.asarray(token_sizes), np.asarray(side_sizes)
    if len(side_sizes) != len(token_sizes):
        raise SideInfoMismatchError(
            f"side information {name!r} of split {split!r} ({path}) has {len(side_sizes)} lines, "
            f"but the token data has {len(token_sizes)}"
        )
    differ = np.flatnonzero(side_sizes != token_sizes)
    if differ.size:
        i = int(differ[0])
        raise SideInfoMismatchError(
            f"side information {name!r} of split {split!r} ({path}) does not match the token "
            f"data at line {i + 1}: {side_sizes[i]} values for {token_sizes[i]} tokens "
            f"(</s> included); {differ.size} lines differ in all"
        )


def producer_command(producer: str, data: str, split: str) -> str:
    """One command that writes a track for every split a training run reads (train, valid, and ``split`` if it is
    another): the producer's ``--splits`` given them all, or a loop over them for a producer of one split at a time
    (its ``RAW_TEXT_OF_{split}`` then names ``$split``); "" for a policy without a producer."""
    if not producer:
        return ""
    splits = list(dict.fromkeys(["train", "valid", split]))
    if "--splits {split}" in producer:
        return producer.format(data=data, split=",".join(splits))
    return f"for split in {' '.join(splits)}; do {producer.format(data=data, split='$split')}; done"


def load_side_info(split_prefix: str, name: str, tokens, split: str, rule: ValueRule = FINITE,
                   without_fingerprint: bool = False, checksum: bool = False) -> SideInfoDataset:
    """Load track ``name`` of ``split_prefix`` and verify it against ``tokens``: its files' lengths (and,
    with ``checksum``, SHA-256) against its manifest, line count and lengths, the recorded token
    fingerprint, and every value against ``rule``."""
    prefix = side_info_prefix(split_prefix, name)
    if not SideInfoDataset.exists(prefix):
        written_by = producer_command(rule.producer, os.path.dirname(split_prefix) or ".", split)
        raise FileNotFoundError(
            f"side information {name!r} for split {split!r} not found: expected "
            f"{prefix}.bin and {prefix}.idx" + (f"; write it for train, valid and this split with: {written_by}"
                                                if written_by else "")
        )
    from .indexed_files import check_indexed_pair

    rerun = f"rerun the command that wrote track {name!r} for split {split!r} (or copy it again)"
    check_recorded_files(prefix, rerun, checksum)
    check_indexed_pair(prefix, rerun)
    side = SideInfoDataset(prefix)
    check_aligned(tokens.sizes, side.sizes, split=split, name=name, path=prefix)
    check_fingerprint(prefix, split_prefix, name=name, split=split, without_fingerprint=without_fingerprint)
    check_values(side, rule, prefix)
    summary = TrackSummary(side)  # what the policy draws from, in training's log
    logger.info("side information %r of split %r: %s", name, split, summary)
    warning = degenerate_message(prefix, summary)
    if warning:
        if degenerate_expected():
            logger.info("side information %s (expected: %s is set)", warning, EXPECT_DEGENERATE)
        else:
            logger.warning("side information %s (expected at toy size? set %s=1)", warning, EXPECT_DEGENERATE)
    return side


def check_recorded_files(prefix: str, advice: str, checksum: bool = False) -> None:
    """Compare ``prefix.bin``/``.idx`` with the lengths (and, with ``checksum``, the SHA-256) that
    ``prefix.json`` records (tracks written before it recorded them are not compared)."""
    if not os.path.exists(prefix + ".json"):
        return
    manifest = read_manifest(prefix + ".json", advice)
    newer = newer_version_line(prefix + ".json", manifest.get(RECORD_KEY))
    if newer:
        logger.warning(newer)
    files = manifest.get("files", {})
    for suffix, record in files.items():
        damage = recorded_damage(prefix + suffix, record, checksum)
        if damage is not None:
            raise DamagedFileError(f"side information {damage}: {advice}")


def check_values(side: SideInfoDataset, rule: ValueRule, prefix: str, chunk: int = 1 << 24) -> None:
    """Every value of the track against ``rule``, in chunks of the memory map; the first bad
    value is named with its line (from 1) and position in the line. A rule with
    ``nonzero_somewhere`` also refuses a track that is 0 everywhere."""
    stored = np.frombuffer(side._bin_buffer, dtype=side._index.dtype)
    nonzero = False
    for start in range(0, len(stored), chunk):
        nonzero = nonzero or bool(np.any(stored[start:start + chunk]))
        bad = np.flatnonzero(rule.invalid(stored[start:start + chunk]))
        if bad.size:
            at = start + int(bad[0])
            ends = np.cumsum(side.sizes)
            line = int(np.searchsorted(ends, at, side="right"))
            column = at - (int(ends[line - 1]) if line else 0)
            raise ValueError(f"side information {prefix}.bin, line {line + 1}, value {column + 1}: "
                             f"{stored[at].item()!r} is not {rule.description}")
    if rule.nonzero_somewhere and not nonzero:
        raise ValueError(f"side information {prefix}.bin is 0 everywhere: {rule.nonzero_somewhere}")


class TrackSummary:
    """What a track holds at its tokens (each line's ``</s>`` aside, which every producer writes as 0): how many
    values, their least, mean and largest, and how many equal the least and the largest."""

    def __init__(self, side: SideInfoDataset, chunk: int = 1 << 24):
        stored = np.frombuffer(side._bin_buffer, dtype=side._index.dtype)
        ends = np.cumsum(np.asarray(side.sizes, dtype=np.int64)) - 1  # each line's </s>
        self.count, total = 0, 0.0
        self.low, self.high, self.at_low, self.at_high = np.inf, -np.inf, 0, 0
        for start in range(0, len(stored), chunk):
            values = stored[start:start + chunk].astype(np.float64)
            keep = np.ones(len(values), dtype=bool)
            eos = ends[np.searchsorted(ends, start):np.searchsorted(ends, start + len(values))] - start
            keep[eos] = False
            values = values[keep]
            if not values.size:
                continue
            self.count, total = self.count + values.size, total + float(values.sum())
            low, high = float(values.min()), float(values.max())
            if low < self.low:
                self.low, self.at_low = low, 0
            if high > self.high:
                self.high, self.at_high = high, 0
            self.at_low += int((values == self.low).sum())
            self.at_high += int((values == self.high).sum())
        self.mean = total / self.count if self.count else float("nan")

    def __str__(self):
        if not self.count:
            return "no values (every line is empty)"
        return f"{self.count:,} values, least {self.low:.4g}, mean {self.mean:.4g}, largest {self.high:.4g}"

    def degenerate(self, share: float = 0.99) -> str:
        """Why a policy reading the track could not tell tokens apart: every value the same, or one of the least
        and largest at ``share`` of the tokens or more; "" otherwise."""
        if not self.count:
            return ""
        if self.low == self.high:
            return f"every token has the value {self.low:.4g} (a constant track)"
        for value, n in ((self.low, self.at_low), (self.high, self.at_high)):
            if n >= share * self.count:
                return f"{n / self.count:.1%} of the tokens have the value {value:.4g} (nearly constant)"
        return ""


#: set to 1 to say that degenerate tracks are expected (toy-size runs: QUICK=1 sets it, and so do deliberately sparse
#: tracks): the producers and training then log them as information, not as warnings
EXPECT_DEGENERATE = "MASKPLUG_EXPECT_DEGENERATE"


def degenerate_expected() -> bool:
    """Whether the user said degenerate tracks are expected (:data:`EXPECT_DEGENERATE` set to 1)."""
    return os.environ.get(EXPECT_DEGENERATE, "") not in ("", "0")


def degenerate_message(prefix: str, summary: TrackSummary) -> str:
    """One line when the track ``prefix`` (summarised by ``summary``) cannot tell tokens apart
    (:meth:`TrackSummary.degenerate`), naming it and what to check; "" otherwise."""
    why = summary.degenerate()
    return f"{prefix}.bin: {why}: a policy reading it masks as if it had no information; check the " \
           "producer's input and options" if why else ""


def degenerate_track(prefix: str) -> str:
    """:func:`degenerate_message` of the track written at ``prefix``."""
    return degenerate_message(prefix, TrackSummary(SideInfoDataset(prefix)))


def check_fingerprint(prefix: str, split_prefix: str, *, name: str, split: str,
                      without_fingerprint: bool = False) -> None:
    """Refuse a track whose recorded token fingerprint (``prefix.json``) is not that of
    ``split_prefix``, and a track without one unless ``without_fingerprint`` (then it is
    checked by line lengths only)."""
    if not os.path.exists(prefix + ".json"):
        if without_fingerprint:
            return
        raise SideInfoMismatchError(
            f"side information {name!r} of split {split!r} ({prefix}) has no {prefix}.json fingerprint, so it "
            "cannot be checked against the token data (copied without it?); write it with "
            "preprocess.binarize_side_info, or pass --side-info-without-fingerprint to check line lengths only")
    recorded = read_manifest(prefix + ".json", "rerun the command that wrote the track").get("token_fingerprint")
    if recorded is not None and recorded != token_fingerprint(split_prefix):
        raise SideInfoMismatchError(
            f"side information {name!r} of split {split!r} ({prefix}) was computed for other token "
            f"data than {split_prefix}.bin (another corpus or another dictionary): recompute it for "
            "this data")
