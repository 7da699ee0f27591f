"""Temporary names for atomic writes, and the clean-up of those an interrupted run left behind.

Every writer of the package writes ``FINAL.tmp-PID`` and renames it to ``FINAL`` at the end.
A run killed in between (SIGKILL, power loss) leaves its temporary behind; the next writer
of ``FINAL`` removes every ``FINAL.tmp-PID`` (file or directory) whose process is gone.
"""

import glob
import os
import re
import shutil


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
