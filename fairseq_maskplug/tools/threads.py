"""How many threads torch's (and OpenMP's) pool uses in the package's commands when the user sets none.

torch's default pool takes every core of the machine for every process. On a small machine shared with
other work (another training, a test run) those threads fight the other processes for the cores, and
OpenMP threads spin at each barrier: a 20-update run of the QUICK recipe took 8 s of training with the
default pool and 1 s with one thread on 2 shared cores (the first-hour report). The tests already run one
share of the cores per worker (``tests/run.sh``); the commands now do the same:

    threads = max(1, min(cores // processes, (cores - busy) // processes))

with ``cores`` the cores this process may run on, ``processes`` the processes of this run on this machine
(``LOCAL_WORLD_SIZE`` under torchrun, ``SLURM_NTASKS_PER_NODE`` under srun, else 1) and ``busy`` the cores
other work keeps busy (the one-minute load average, rounded; it lags by about a minute and counts a run that
has just ended, so the recipes choose once, before their first stage: ``python -m
fairseq_maskplug.tools.threads --processes N`` prints the choice). ``OMP_NUM_THREADS``, when set, wins and
nothing is changed. The choice is logged once.

Measured on 2 cores (2026-11-26, one run each, 40 updates of a roberta of the QUICK shape, 2 x 64, and of
the quickstart's, 4 x 128): on idle cores 2 threads took 11.8 s and 33.6 s against 13.6 s and 39.4 s with 1;
with one core busy with other work 2 threads took 19.5 s and 63.7 s against 13.2 s and 39.5 s with 1.
"""

import logging
import os
import re
import sys
from typing import Mapping, Optional

logger = logging.getLogger("fairseq_maskplug.threads")


def local_processes(environ: Mapping[str, str]) -> int:
    """The processes of this run on this machine: torchrun's ``LOCAL_WORLD_SIZE``, srun's
    ``SLURM_NTASKS_PER_NODE`` (its first number: ``2(x3)`` is 2), else 1."""
    for key in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"):
        match = re.match(r"\s*(\d+)", environ.get(key, ""))
        if match and int(match.group(1)) > 0:
            return int(match.group(1))
    return 1


def default_threads(cores: int, processes: int, busy: int = 0) -> int:
    """Threads per process: an equal share of the cores among this run's processes on the machine, and of the
    cores other work leaves idle (module docstring); at least 1."""
    if cores < 1 or processes < 1 or busy < 0:
        raise ValueError(f"default_threads: cores {cores}, processes {processes}, busy {busy}")
    return max(1, min(cores // processes, (cores - min(busy, cores)) // processes))


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def load_average() -> float:
    """The one-minute load average: runnable processes, averaged (0 where unknown)."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return 0.0


def busy_cores(cores: int, load: float) -> int:
    """The cores other work keeps busy: the load average, rounded, and at most every core (a load of 4 on 2
    cores is 2 busy cores and processes waiting)."""
    return min(cores, int(round(load)))


def choice_line(threads: int, cores: int, processes: int, load: float) -> str:
    """The line that says what was chosen, from what, and how to choose otherwise."""
    return (f"torch threads per process: {threads} ({cores} cores, {processes} process(es) of this run here; "
            f"load average {load:.1f} over the last minute, so about {busy_cores(cores, load)} of the {cores} "
            "cores busy with other work; set OMP_NUM_THREADS to choose)")


def choose_threads(environ=os.environ) -> Optional[str]:
    """Set the thread count of this process's pools when ``OMP_NUM_THREADS`` is not set: in the environment
    before torch is imported (children inherit it), else with ``torch.set_num_threads``. Returns the line it
    logged, or None when the user's ``OMP_NUM_THREADS`` stands."""
    if environ.get("OMP_NUM_THREADS", "").strip():
        return None
    cores, processes, load = available_cores(), local_processes(environ), load_average()
    threads = default_threads(cores, processes, busy_cores(cores, load))
    environ["OMP_NUM_THREADS"] = str(threads)
    for key in ("MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        environ.setdefault(key, str(threads))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    line = choice_line(threads, cores, processes, load)
    logger.info(line)
    return line


def main(argv=None) -> int:
    """``python -m fairseq_maskplug.tools.threads [--processes N]``: print the thread count a run of ``N``
    processes on this machine should give each (what the recipes export once as ``OMP_NUM_THREADS``); the
    reason goes to stderr."""
    import argparse

    from ..common.option_ranges import number

    parser = argparse.ArgumentParser(prog="python -m fairseq_maskplug.tools.threads", description=main.__doc__)
    parser.add_argument("--processes", type=number("[1, inf)", int), default=None,
                        help="processes of the run on this machine (default: from torchrun/srun, else 1)")
    args = parser.parse_args(argv)
    cores, load = available_cores(), load_average()
    processes = args.processes or local_processes(os.environ)
    threads = default_threads(cores, processes, busy_cores(cores, load))
    print(threads)
    print(choice_line(threads, cores, processes, load), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
