"""Temporary names for atomic writes, the clean-up of those an interrupted run left behind, and
the rule for output directories.

Every writer of the package writes ``FINAL.tmp-PID`` and renames it to ``FINAL`` at the end.
A run killed in between (SIGKILL, power loss) leaves its temporary behind; the next writer
of ``FINAL`` removes every ``FINAL.tmp-PID`` (file or directory) whose process is gone.

A command replaces an output directory only if it is absent, empty, or was written by an
earlier run of the same command (its owner file, :data:`OWNER_FILE`), and never one that is,
holds, or lies inside another of its inputs or outputs (:func:`check_output_directory`).
"""

import errno
import glob
import json
import os
import re
import shutil
from typing import Iterable, Optional, Tuple


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale_temporaries(final: str) -> list:
    """Remove ``final.tmp-PID*`` left by processes that no longer run; returns what was removed."""
    removed = []
    pattern = re.compile(re.escape(os.path.basename(final)) + r"\.tmp-(\d+)")
    for path in glob.glob(glob.escape(final) + ".tmp-*"):
        match = pattern.match(os.path.basename(path))
        if match is None or int(match.group(1)) == os.getpid() or _alive(int(match.group(1))):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.remove(path)
        removed.append(path)
    return removed


def temporary_name(final: str) -> str:
    """``final.tmp-PID`` for this process, after removing the stale temporaries of ``final``."""
    remove_stale_temporaries(str(final))
    return f"{final}.tmp-{os.getpid()}"


class OutputWriteError(ValueError):
    """A write that failed (a full disk, a file-size limit, a vanished directory), in one line naming the
    output; a ValueError so that every command's one-line error path reports it."""


#: the errors of a write the disk refused (not of a missing input): a file-size limit, a full disk, a
#: read-only file system, a quota, an I/O error
WRITE_ERRNOS = frozenset({errno.EFBIG, errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EIO})


#: NumPy's ``tofile`` reports a short write without an errno
SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")


def is_write_failure(error: BaseException) -> bool:
    """Whether ``error`` is a write the disk refused (:data:`WRITE_ERRNOS`, or NumPy's short write)."""
    return isinstance(error, OSError) and (error.errno in WRITE_ERRNOS
                                           or (error.errno is None and bool(SHORT_WRITE.search(str(error)))))


#: libraries that report a refused write in their own words: safetensors (Rust's ``Os { code: 27, ... }``), Hugging
#: Face tokenizers (a plain ``Exception('File too large (os error 27)')``) and torch's zip writer
#: (``PytorchStreamWriter failed writing file``, no errno)
LIBRARY_WRITE_FAILURE = re.compile(r"Os \{ code: (?P<errno>\d+)|\(os error (?P<os_errno>\d+)\)|"
                                   r"PytorchStreamWriter failed writing|file write failed")


def library_write_failure(error: BaseException) -> Optional[OSError]:
    """The OSError behind a library's report of a refused write (:data:`LIBRARY_WRITE_FAILURE`), or None."""
    match = LIBRARY_WRITE_FAILURE.search(str(error))
    if match is None:
        return None
    if match["errno"] is not None or match["os_errno"] is not None:
        code = int(match["errno"] or match["os_errno"])
        failure = OSError(code, os.strerror(code))
        return failure if is_write_failure(failure) else None
    return OSError(None, "the write failed")  # torch says no more: write_failed names both likely causes


def write_failure_in(error: BaseException) -> Optional[OSError]:
    """The refused write behind ``error``: itself, an OSError it was raised from or while handling
    (torch's checkpoint writer reports a short write as ``RuntimeError: ... unexpected pos``, raised
    while the OSError of the write is handled), or a library's own report of one
    (:func:`library_write_failure`); None when there is none."""
    seen = set()
    while error is not None and id(error) not in seen:
        if is_write_failure(error):
            return error
        reported = library_write_failure(error)
        if reported is not None:
            return reported
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def tree_bytes(path: str) -> int:
    """Bytes in the file ``path``, or in every file under the directory ``path`` (0 when absent)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names
               if os.path.isfile(os.path.join(root, name)))


def write_failed(output: str, error: OSError, written: Optional[int] = None) -> OutputWriteError:
    """The one-line error for ``output``, whose write under a temporary name failed with ``error`` after
    ``written`` bytes (so an earlier ``output`` was not touched)."""
    reason = error.strerror or str(error)
    after = f" after {written} bytes" if written is not None else ""
    hint = {27: "a file-size limit (ulimit -f)", 28: "the disk is full", 30: "a read-only file system",
            122: "a disk quota", None: "a full disk or a file-size limit (ulimit -f)"}.get(error.errno, "")
    return OutputWriteError(f"writing {output} failed{after}: {reason}{': ' + hint if hint else ''}; nothing was "
                            f"written, and an earlier {output} is unchanged")


def write_text(path: str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: under :func:`temporary_name`, renamed at the end.
    A failed write raises :class:`OutputWriteError` and leaves no temporary."""
    tmp = temporary_name(path)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as error:
        written = os.path.getsize(tmp) if os.path.exists(tmp) else None
        if os.path.exists(tmp):
            os.remove(tmp)
        raise write_failed(path, error, written) from None


def check_writable(path: str) -> None:
    """Refuse now, before any work, an output file whose directory cannot be written."""
    directory = os.path.dirname(os.path.abspath(path))
    probe = os.path.join(directory, f".maskplug-write-test-{os.getpid()}")
    try:
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as error:
        raise PermissionError(f"cannot write {path}: {error.strerror or error}") from None


def check_distinct_files(files: Iterable[Tuple[str, Optional[str]]]) -> None:
    """Refuse now, before any work, two files of one command that are one file (an output written
    over an input or over another output). ``files``: ``(what, path)`` pairs; a None path skipped."""
    seen = {}
    for what, path in files:
        if path is None:
            continue
        real = os.path.realpath(os.fspath(path))
        if real in seen:
            raise ValueError(f"{what} {path} is also {seen[real]}: one would overwrite the other; give another path")
        seen[real] = what


# ---- output directories: replace only what this command wrote --------------------------------

OWNER_FILE = ".maskplug-output.json"


def write_owner(directory, command: str, written: Optional[Iterable[str]] = None) -> None:
    """Mark ``directory`` as written by ``command`` (read by :func:`replaceable`), with the files it wrote
    (relative paths) where given: what a rerun replaces, everything else being kept."""
    record = {"command": command}
    if written is not None:
        record["written"] = sorted(written)
    with open(os.path.join(directory, OWNER_FILE), "w", encoding="utf-8") as f:
        json.dump(record, f)
        f.write("\n")


def owner(directory) -> Optional[str]:
    """The command that wrote ``directory`` (its owner file), or None."""
    try:
        with open(os.path.join(directory, OWNER_FILE), encoding="utf-8") as f:
            return json.load(f).get("command")
    except (OSError, ValueError, AttributeError):
        return None


def replaceable(directory, command: str, legacy: Iterable[str] = ()) -> bool:
    """Whether ``command`` may replace ``directory``: it is absent or empty, its owner file names
    ``command``, or (outputs written before owner files existed) it holds every top-level name in
    ``legacy``, the names ``command`` writes (an empty ``legacy`` recognises nothing)."""
    if not os.path.lexists(directory):
        return True
    if not os.path.isdir(directory) or os.path.islink(directory):
        return False
    names = set(os.listdir(directory))
    legacy = set(legacy)
    return not names or owner(directory) == command or (bool(legacy) and legacy <= names)


def _contains(outer: str, inner: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def check_output_directory(out, option: str, command: str, others: Iterable[Tuple[str, Optional[str]]] = (),
                           legacy: Iterable[str] = ()) -> None:
    """Refuse now, before any work, an output directory that ``command`` may not replace.

    ``out`` (given as ``option``) must be absent, an empty directory, or a directory that an
    earlier run of ``command`` wrote (:func:`replaceable`); it must not be equal to, inside, or
    around any other input or output of the command (``others``: ``(option, path)`` pairs, a None
    path skipped), and its parent must be writable. Raises ValueError or PermissionError with one
    line naming the path and the option."""
    path = os.path.realpath(os.fspath(out))
    for other_option, other in others:
        if other is None:
            continue
        other_path = os.path.realpath(os.fspath(other))
        if _contains(path, other_path) or _contains(other_path, path):
            where = "is" if other_path == path else ("holds" if _contains(path, other_path) else "lies inside")
            raise ValueError(f"{option} {out} {where} {other_option} {other}: replacing it would delete "
                             f"{'that' if where != 'lies inside' else 'part of it'}; give {option} a directory "
                             "of its own")
    if not replaceable(path, command, legacy):
        what = "is not a directory" if not os.path.isdir(path) else "is a directory that it did not write"
        raise ValueError(f"{option} {out} {what}: {command} writes its output in a new or empty directory, or "
                         f"replaces its own earlier output (marked by {OWNER_FILE}); give another {option} "
                         "or remove it yourself")
    check_creatable(path)


def check_creatable(path) -> None:
    """Refuse now, before any work, an output path that cannot be made: the nearest existing
    directory above it must be writable (the command makes the missing parents when it writes)."""
    parent = os.path.dirname(os.path.realpath(os.fspath(path)))
    while not os.path.exists(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent)
    try:
        check_writable(os.path.join(parent, "probe"))
    except PermissionError:
        raise PermissionError(f"cannot write {path}: {parent} is not writable") from None
