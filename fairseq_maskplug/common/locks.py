"""One writer per output: an exclusive lock that a command holds on what it writes for its whole run.

Two trainings started into one ``--save-dir`` both logged "No existing checkpoint found" and overwrote each
other's checkpoints (the last writer's ``checkpoint_best.pt`` won, whatever its score). Now the first run
holds ``SAVE_DIR/.maskplug.lock`` (a producer: ``TRACK_PREFIX.lock``, or one per shard part) and a second
writer stops before any work with one line naming the holder: its command, process id, host and start time.

The lock is ``fcntl.flock`` on the lock file, which the kernel releases when its process ends, however it
ends. A holder that ends normally removes the file while it still holds the lock (a writer that opened the
old file before then finds, once it has the lock, that the path names another file, and tries again); a file
that still names a holder when its lock is free was left by a killed process, and the next writer takes it
over, saying so. On file systems where ``flock`` is not shared between machines
(some NFS set-ups) two machines are not kept apart: run one writer per output there.
"""

import datetime
import json
import os
import socket
import sys
from typing import Optional

from .atomic import OutputWriteError

try:
    import fcntl
except ImportError:  # not on POSIX: no locks (every OutputLock is taken at once)
    fcntl = None

#: the lock file of a locked directory
DIRECTORY_LOCK = ".maskplug.lock"


class OutputLocked(OutputWriteError):
    """Another run holds the output's lock: a write refused, reported in one line by every command's error path
    (an :class:`~.atomic.OutputWriteError`, a ValueError)."""


def describe_holder(holder: dict) -> str:
    """``COMMAND (pid P on HOST, started T)`` from a lock file's record."""
    return (f"{holder.get('command', '?')} (pid {holder.get('pid', '?')} on {holder.get('host', '?')}, started "
            f"{holder.get('started', '?')})")


class OutputLock:
    """``with OutputLock(path, command) as lock:`` this process is the only writer of ``path`` (a directory,
    ``directory=True``, created if missing: its :data:`DIRECTORY_LOCK`; a file or a track prefix:
    ``path + ".lock"``) until the block ends. Entering raises :class:`OutputLocked` naming the holder when
    another live process holds it; :attr:`took_over` names the holder of a stale lock (a killed run) that was
    taken over, else None."""

    def __init__(self, path: str, command: str, directory: bool = False):
        path = os.fspath(path)
        if directory:
            os.makedirs(path, exist_ok=True)
        self.path = os.path.join(path, DIRECTORY_LOCK) if directory else path + ".lock"
        self.output, self.command = path, command
        self.handle = None
        self.took_over: Optional[str] = None

    def __enter__(self) -> "OutputLock":
        if fcntl is None:
            return self
        while True:
            handle = open(self.path, "a+", encoding="utf-8")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = self._read(handle)
                handle.close()
                raise OutputLocked(f"{self.output} is being written by {describe_holder(holder)}: wait for it to "
                                   f"end, or write elsewhere (its lock: {self.path})") from None
            if self._same_file(handle):
                break
            handle.close()  # the holder removed this file as it ended: lock the path's new file
        left = self._read(handle)
        if left:
            self.took_over = describe_holder(left)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"command": self.command, "pid": os.getpid(), "host": socket.gethostname(),
                                 "started": datetime.datetime.now().isoformat(timespec="seconds")}) + "\n")
        handle.flush()
        self.handle = handle
        return self

    def _same_file(self, handle) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            return False

    @staticmethod
    def _read(handle) -> dict:
        handle.seek(0)
        text = handle.read().strip()
        try:
            return json.loads(text) if text else {}
        except json.JSONDecodeError:
            return {"command": text[:80]}

    def __exit__(self, *exc) -> bool:
        self.release()
        return False

    def __del__(self):  # dropped while held (a command that failed after locking): a normal end, not a stale lock
        self.release()

    def release(self) -> None:
        """Remove the lock file (a normal end) and release the lock."""
        if self.handle is None:
            return
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
        finally:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None


def lock_output(path: str, command: str, directory: bool = False, log=None) -> OutputLock:
    """Take the lock on ``path`` until ``.release()`` (or this process's end); a stale lock taken over is said
    in one line through ``log`` (default: stderr)."""
    return say_took_over(OutputLock(path, command, directory).__enter__(), log)


def say_took_over(lock: OutputLock, log=None) -> OutputLock:
    """``lock``, after saying in one line through ``log`` (default: stderr) whose stale lock it took over."""
    if lock.took_over is not None:
        line = f"{lock.output}: took over the lock left by {lock.took_over}, which is no longer running"
        (log or (lambda text: print(text, file=sys.stderr)))(line)
    return lock
