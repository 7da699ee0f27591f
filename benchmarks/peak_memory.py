"""A command's wall time and its own peak resident memory, measured through a small launcher process.

Linux records, when a process calls ``exec``, the high-water resident memory of the address space it leaves
(``exec_mmap``): a command that ``subprocess`` starts from a large Python process (by ``vfork``, in the
parent's address space) reports the parent's peak as its own ``ru_maxrss`` when that is larger. The
benchmarks once printed the same peak for ours and Lucene's builds that way (the benchmark's own). Each
measured command is therefore started by a fresh interpreter of a few MiB, which waits for it and reports its
``ru_maxrss``: the command's own peak (or the launcher's few MiB, if larger).
"""

import subprocess
import sys
import tempfile
import time

#: argv: the file to write the peak (KiB) to, then the command
LAUNCHER = ("import os, subprocess, sys; child = subprocess.Popen(sys.argv[2:]); _, status, usage = "
            "os.wait4(child.pid, 0); open(sys.argv[1], 'w').write(str(usage.ru_maxrss)); "
            "sys.exit(os.waitstatus_to_exitcode(status))")


def run_measured(command: list, **popen) -> tuple:
    """Run ``command`` (``popen``: ``subprocess.run``'s keyword arguments, e.g. ``stdout``, ``cwd``) through the
    launcher; returns ``(seconds, peak resident MiB of the command)``. A failed command raises
    ``subprocess.CalledProcessError``."""
    with tempfile.NamedTemporaryFile("r", suffix=".peak") as peak:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", LAUNCHER, peak.name, *command], check=True, **popen)
        return time.perf_counter() - started, int(peak.read()) / 1024

