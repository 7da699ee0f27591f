"""Byte lengths and SHA-256 sums recorded beside the files a command writes, checked when they are read.

A writer records, in its JSON manifest, ``{"bytes": n, "sha256": hex}`` for each file it wrote
(:func:`file_record`). A reader compares the lengths always (free: one ``stat`` per file) and the
sums where asked (one pass over the bytes), and names the first file that differs
(:func:`recorded_damage`). This is Lucene's habit (``CodecUtil.checkFooter``: every index file
carries its length and checksum) for the package's own outputs: side-information tracks and the
retrieval index. A manifest that is itself cut short is named by :func:`read_manifest`.
"""

import hashlib
import json
import os
from typing import Dict, Optional


class DamagedFileError(ValueError):
    """A file the package wrote that is cut short, longer, or not what its manifest records (one line)."""


def file_sha256(path: str) -> str:
    """The SHA-256 of the file at ``path``, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def check_same_content(path: str, recorded_sha256: str, option: str, when: str) -> None:
    """Refuse, in one line naming ``path``, a file whose content is no longer the one ``when`` read (its SHA-256
    differs from ``recorded_sha256``): what a merge writes from it would mix the edit into results computed from
    the old text. Missing, it is named too."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{option} {path}: no such file; {when} read it")
    if file_sha256(path) != recorded_sha256:
        raise ValueError(f"{option} {path} changed after {when} read it (its content differs from the one recorded "
                         "in the parts): rerun the shards on the file as it is now (nothing was merged)")


def file_record(path: str) -> Dict[str, object]:
    """What a manifest records of ``path``: its length in bytes and its SHA-256."""
    return {"bytes": os.path.getsize(path), "sha256": file_sha256(path)}


def recorded_damage(path: str, record: Dict[str, object], checksum: bool) -> Optional[str]:
    """How ``path`` differs from ``record`` (:func:`file_record`), or None: a missing file, another
    length (always compared), another SHA-256 (compared when ``checksum``)."""
    if not os.path.isfile(path):
        return f"{path} is missing"
    size, recorded = os.path.getsize(path), int(record["bytes"])
    if size < recorded:
        return f"{path} is cut short ({size} of {recorded} bytes)"
    if size > recorded:
        return f"{path} is longer than written ({size} bytes, {recorded} recorded): another file was copied over it"
    if checksum and "sha256" in record and file_sha256(path) != record["sha256"]:
        return f"{path} has the length written but other content (its SHA-256 differs from the one recorded)"
    return None


def read_manifest(path: str, advice: str) -> dict:
    """The JSON object in ``path``, or a :class:`DamagedFileError` naming it (empty, cut short, not an
    object) with ``advice`` (what to do)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        manifest = json.loads(text)
    except ValueError as error:
        what = "empty" if not text.strip() else f"not whole JSON ({len(text.encode())} bytes; {error.msg})"
        raise DamagedFileError(f"{path} is damaged: it is {what}; {advice}") from None
    if not isinstance(manifest, dict):
        raise DamagedFileError(f"{path} is damaged: it holds no JSON object; {advice}")
    return manifest
