"""Are a binarized split's ``.bin`` and ``.idx`` whole? Checked from their sizes before they are read.

fairseq's memory-mapped format (``MMIDIDX``): the ``.idx`` holds a header, then one int32 size and
one int64 byte offset per line; line ``i`` occupies ``size * itemsize``
bytes of the ``.bin`` from its offset. A copy cut short gives fairseq's ``AttributeError: ...
no attribute '_bin_buffer_mmap'`` (``.idx``) or, for a ``.bin``, a read past the end reported as a
wrong token or side value (``train.bin, line 401, token 1: the special symbol <s>``). Here the
sizes alone say which file is short and by how much; nothing of the data is read.
"""

import os
import struct
from typing import Optional

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
HEADER = len(MAGIC) + 8 + 1 + 8  # magic, version, dtype code, lines
ITEMSIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 8, 7: 8, 8: 2, 9: 4, 10: 8}  # fairseq's _code_to_dtype


class DamagedDataError(ValueError):
    """A binarized ``.bin``/``.idx`` pair cut short (one line, naming the file and the bytes)."""


def indexed_damage(prefix: str) -> Optional[str]:
    """What is wrong with ``prefix.bin``/``prefix.idx`` (fairseq's mmap format), or None when their
    sizes agree (also for another format, or when either file is missing: the loader says so)."""
    idx, data = prefix + ".idx", prefix + ".bin"
    if not (os.path.isfile(idx) and os.path.isfile(data)):
        return None
    idx_size = os.path.getsize(idx)
    with open(idx, "rb") as f:
        header = f.read(HEADER)
    if len(header) < len(MAGIC):
        return f"{idx} is cut short ({idx_size} bytes)" if MAGIC.startswith(header) else None
    if header[:len(MAGIC)] != MAGIC:
        return None  # another indexed format (fairseq's cached or raw): not checked here
    if len(header) < HEADER:
        return f"{idx} is cut short ({idx_size} bytes, less than its header)"
    code = header[len(MAGIC) + 8]
    (lines,) = struct.unpack("<Q", header[len(MAGIC) + 9:])
    expected = HEADER + 12 * lines
    if idx_size < expected:
        return f"{idx} is cut short ({idx_size} of {expected} bytes)"
    if code not in ITEMSIZE:
        return f"{idx} is damaged (unknown value type {code})"
    if lines == 0:
        return None
    index = np.memmap(idx, mode="r", dtype=np.uint8)
    last_size = int(np.frombuffer(index, np.int32, 1, HEADER + 4 * (lines - 1))[0])
    last_offset = int(np.frombuffer(index, np.int64, 1, HEADER + 4 * lines + 8 * (lines - 1))[0])
    needed = last_offset + last_size * ITEMSIZE[code]
    data_size = os.path.getsize(data)
    if data_size < needed:
        return f"{data} is cut short ({data_size} of {needed} bytes that {os.path.basename(idx)} indexes)"
    return None


def check_indexed_pair(prefix: str, advice: str) -> None:
    """Raise :class:`DamagedDataError` naming the damaged file of ``prefix`` and ``advice`` (what to do)."""
    damage = indexed_damage(prefix)
    if damage is not None:
        raise DamagedDataError(f"{damage}: {advice}")


RECOPY = "copy the data again, or rerun fairseq-preprocess"


def open_checked(prefix: str, advice: str = RECOPY):
    """fairseq's ``MMapIndexedDataset`` of ``prefix`` once :func:`check_indexed_pair` passes (for the
    commands that read a split directly rather than through ``load_indexed_dataset``)."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    check_indexed_pair(prefix, advice)
    return MMapIndexedDataset(prefix)
