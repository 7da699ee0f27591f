"""Progress of long loops (scoring, tagging, spans, encoding, retrieval) that shows without a terminal.

On a terminal, :func:`progress_bar` is tqdm's bar, as before. Without one (a recipe's log
file, a batch job, a pipe) tqdm stays silent, so a 14-minute scoring run printed nothing:
there it returns a :class:`LineProgress`, which writes one line to stderr at most every
``MASKPLUG_PROGRESS_SECONDS`` (25) seconds and one when a loop that lasted that long ends::

    PLT: 1,200/3,200 copy (38%), 2.1 min, about 3.5 min left
"""

import os
import sys
import time
from typing import Callable, Iterable, Optional

from tqdm import tqdm


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


class LineProgress:
    """tqdm's ``update``/``close``/iteration, reported as whole lines every ``interval`` seconds."""

    def __init__(self, iterable: Optional[Iterable] = None, total: Optional[int] = None, desc: str = "",
                 unit: str = "it", interval: float = 30.0, clock: Callable[[], float] = time.monotonic,
                 write: Callable[[str], None] = None):
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.iterable, self.total, self.desc, self.unit = iterable, total, desc, unit
        self.interval, self.clock = interval, clock
        self.write = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self.n, self.started = 0, clock()
        self.last = self.started
        self.closed = False

    def line(self) -> str:
        """``desc: n/total unit (p%), elapsed, about T left`` (without a total: ``n unit, elapsed``)."""
        elapsed = self.clock() - self.started
        if not self.total:
            return f"{self.desc}: {self.n:,} {self.unit}, {_minutes(elapsed)}"
        share = 100 * self.n / self.total
        text = f"{self.desc}: {self.n:,}/{self.total:,} {self.unit} ({share:.0f}%), {_minutes(elapsed)}"
        if 0 < self.n < self.total:
            text += f", about {_minutes(elapsed * (self.total - self.n) / self.n)} left"
        return text

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= self.interval:
            self.last = now
            self.write(self.line())

    def close(self) -> None:
        """The last line, for a loop that lasted at least one interval (a short one stays silent)."""
        if not self.closed:
            self.closed = True
            if self.clock() - self.started >= self.interval:
                self.write(self.line() + ": done")

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update()
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def progress_bar(iterable: Optional[Iterable] = None, *, total: Optional[int] = None, desc: str = "",
                 unit: str = "it", disable: Optional[bool] = None, **tqdm_kwargs):
    """tqdm's bar on a terminal, :class:`LineProgress` otherwise; ``disable=True``: silent."""
    if disable:
        return tqdm(iterable, total=total, disable=True)
    if sys.stderr.isatty():
        return tqdm(iterable, total=total, desc=desc, unit=unit, **tqdm_kwargs)
    interval = float(os.environ.get("MASKPLUG_PROGRESS_SECONDS", "25"))
    return LineProgress(iterable, total, desc, unit, interval)
