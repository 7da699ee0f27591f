"""Is a checkpoint file whole? Checked from its size and structure before torch reads it.

torch saves a zip archive whose directory is written last: a save or copy cut short (a killed job,
a full disk, a partial ``rsync``) leaves a file without it, which torch reports as ``[Errno 22]
Invalid argument`` or a ``RuntimeError`` about ``_use_new_zipfile_serialization``, naming no file.
:func:`checkpoint_damage` reads only the archive's directory (no data), so it is cheap at any size;
:func:`damaged_checkpoint_message` names the file, what is wrong and the intact checkpoints beside it.
:mod:`..integration.compat` runs it before every fairseq checkpoint load (training's resume,
``--finetune-from-model``, ``--restore-file``, and the plugin's tools, which load through fairseq),
and through :class:`CheckedCheckpointFiles` before a save or copy replaces a checkpoint.
"""

import os
import re
import shutil
import zipfile
from typing import List, Optional

#: the first bytes of torch's legacy (non-zip) format: a pickle (protocol 2 or later); old releases use it
PICKLE_START = b"\x80"
#: the first bytes of a zip archive (torch's format since 1.6)
ZIP_START = b"PK\x03\x04"


class DamagedCheckpointError(ValueError):
    """A checkpoint file that is empty, cut short or not a torch file (one line, naming it)."""


def checkpoint_damage(path: str) -> Optional[str]:
    """What is wrong with the checkpoint file ``path``, or None when its structure is whole.

    A zip checkpoint (torch >= 1.6) is whole when its directory is present, lists the pickle
    ``data.pkl`` and every entry lies inside the file; a legacy pickle file cannot be checked
    this way and passes. Entries' contents are not read (no checksum pass).
    """
    size = os.path.getsize(path)
    if size == 0:
        return "it is empty (0 bytes)"
    with open(path, "rb") as f:
        start = f.read(4)
    if start.startswith(PICKLE_START):
        return None
    if len(start) < 4 and ZIP_START.startswith(start):
        return f"it is cut short ({size} bytes)"
    if not start.startswith(b"PK"):
        return f"it is not a torch checkpoint ({size} bytes beginning {start!r})"
    try:
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError):
        return f"it is cut short ({size} bytes, without the directory a whole save ends with)"
    if not any(entry.filename.endswith("data.pkl") for entry in entries):
        return f"it is a zip archive ({size} bytes) but not a torch checkpoint (no data.pkl)"
    end = max(entry.header_offset + entry.compress_size for entry in entries)
    if end > size:
        return f"it is cut short ({size} of at least {end} bytes)"
    return None


def intact_siblings(path: str) -> List[str]:
    """The other ``checkpoint*.pt`` files beside ``path`` that :func:`checkpoint_damage` passes,
    ``checkpoint_best.pt`` first, then the newest first."""
    directory = os.path.dirname(os.path.abspath(path))
    names = [n for n in os.listdir(directory)
             if n.startswith("checkpoint") and n.endswith(".pt") and n != os.path.basename(path)]
    paths = [os.path.join(directory, n) for n in names]
    paths.sort(key=lambda p: (os.path.basename(p) != "checkpoint_best.pt", -os.path.getmtime(p)))
    return [p for p in paths if checkpoint_damage(p) is None]


def damaged_checkpoint_message(path: str, damage: str) -> str:
    """One line: the file, what is wrong, and what to do (the intact checkpoints beside it, if any)."""
    others = intact_siblings(path)
    if os.path.basename(path) == "checkpoint_last.pt" and others:
        advice = (f"intact beside it: {', '.join(os.path.basename(p) for p in others[:3])}; to resume from one, "
                  f"copy it over {os.path.basename(path)} (cp {others[0]} {path}), or remove {path} to start over")
    elif others:
        advice = f"intact beside it: {', '.join(os.path.basename(p) for p in others[:3])}"
    else:
        advice = "copy it again, or rerun the training that wrote it"
    return f"checkpoint {path} is damaged: {damage}; {advice}"


def check_checkpoint_file(path: str) -> None:
    """Raise :class:`DamagedCheckpointError` for a damaged checkpoint file (a missing one is left to the caller)."""
    if not os.path.isfile(path):
        return
    damage = checkpoint_damage(path)
    if damage is not None:
        raise DamagedCheckpointError(damaged_checkpoint_message(path, damage))


class UnsafeCheckpointError(ValueError):
    """A checkpoint that torch's safe loader refuses: it holds objects that are not tensors and plain options, and
    unpickling it in full could run code. Never loaded otherwise (one line, naming the file)."""


def refused_message(path: str, error) -> str:
    """One line for a file the safe loader refused: the file, the object it would have created, and that nothing
    of it ran (torch's own message names no file and suggests turning the safe loader off)."""
    found = re.search(r"[Uu]nsupported(?: global:)? GLOBAL ([\w.]+)|[Uu]nsupported [^\n]*?(?=\.\s|\n|$)",
                      str(error))
    what = f" (it asks for {found.group(1)})" if found and found.group(1) else f" ({found.group(0)})" if found else ""
    return (f"checkpoint {path} holds objects that are not plain tensors and options{what}; refused without running "
            "them: load only files you trust, and check where this one came from")


def load_state(path: str) -> dict:
    """The checkpoint ``path`` read by torch's safe loader (``weights_only``: tensors and plain options, with the
    fairseq classes the plugin allows), memory-mapped when it is a zip archive (torch's format since 1.6; a file of
    the legacy format, as fairseq's 2019 releases, is read whole). A damaged file
    (:func:`check_checkpoint_file`) and one the safe loader refuses (:class:`UnsafeCheckpointError`) are named in
    one line; the full unpickler is never tried."""
    import pickle

    import torch

    check_checkpoint_file(path)
    try:
        return torch.load(path, map_location="cpu", mmap=zipfile.is_zipfile(path), weights_only=True)
    except pickle.UnpicklingError as error:
        raise UnsafeCheckpointError(refused_message(path, error)) from None


class CheckedCheckpointFiles:
    """fairseq's ``PathManager`` as ``fairseq.checkpoint_utils`` sees it, whose ``copy`` and ``rename``
    of local files replace their target only with a file flushed to disk and checked whole."""

    def __init__(self, path_manager):
        self._inner = path_manager

    def __getattr__(self, name):
        return getattr(self._inner, name)

    @staticmethod
    def _local(*paths) -> bool:
        return all("://" not in str(p) for p in paths)

    @staticmethod
    def _flushed_and_whole(path: str) -> None:
        with open(path, "rb+") as f:
            os.fsync(f.fileno())
        damage = checkpoint_damage(path)
        if damage is not None:
            os.remove(path)
            raise DamagedCheckpointError(damaged_checkpoint_message(path, damage) + " (not saved: the earlier "
                                         "checkpoint stays)")

    def rename(self, src, dst):
        if self._local(src, dst) and str(dst).endswith(".pt"):
            self._flushed_and_whole(str(src))
        return self._inner.rename(src, dst)

    def copy(self, src, dst, overwrite=False):
        if not (self._local(src, dst) and str(dst).endswith(".pt")):
            return self._inner.copy(src, dst, overwrite=overwrite)
        from .atomic import is_write_failure, temporary_name, write_failed

        if os.path.exists(dst) and not overwrite:
            return False
        tmp = temporary_name(str(dst))
        try:
            shutil.copyfile(src, tmp)
            self._flushed_and_whole(tmp)
            os.replace(tmp, dst)
        except OSError as error:
            if not is_write_failure(error):
                raise
            raise write_failed(str(dst), error, os.path.getsize(tmp) if os.path.exists(tmp) else None) from None
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return True
