"""What values a side-information track may hold (pure NumPy): policies declare a rule per
track, and the loader checks the whole split against it before training starts."""

import math
import re
from dataclasses import dataclass

import numpy as np

#: a track name is part of file names (SPLIT.NAME.bin), never a path
TRACK_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def check_track_name(name: str) -> str:
    """``name`` if it can name a track (letters, digits, ``_``, ``-``, ``.``), else a ValueError."""
    if not isinstance(name, str) or not TRACK_NAME.match(name):
        raise ValueError(f"track name {name!r}: use letters, digits, '_', '-' and '.' (it names the files "
                         "SPLIT.NAME.bin/.idx beside the split)")
    return name


def check_split_name(name: str) -> str:
    """``name`` if it can name a binarized split (the same characters as a track), else a ValueError:
    a split name is part of file names (``DATA/SPLIT.bin``), so ``../x`` or ``a/b`` would read or write
    outside the data directory."""
    if not isinstance(name, str) or not TRACK_NAME.match(name):
        raise ValueError(f"split name {name!r}: use letters, digits, '_', '-' and '.' (it names the files "
                         "SPLIT.bin/.idx in the data directory), not a path")
    return name


@dataclass(frozen=True)
class ValueRule:
    """Values must be finite, lie in ``[low, high]`` and, if ``integral``, be whole numbers; with
    ``nonzero_somewhere`` (the reason, for the message) a split whose values are all 0 is refused. ``producer``
    is the command that writes such a track, with ``{data}`` and ``{split}`` to fill in: a missing track's
    message names it (:meth:`~.registry.MaskPolicy.producer_command`)."""

    description: str
    low: float = -math.inf
    high: float = math.inf
    integral: bool = False
    nonzero_somewhere: str = ""
    producer: str = ""

    def invalid(self, values: np.ndarray) -> np.ndarray:
        """Boolean array: True where a value breaks the rule."""
        values = np.asarray(values, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(values) | (values < self.low) | (values > self.high)
            if self.integral:
                bad |= values != np.round(values)
        return bad


FINITE = ValueRule("a finite number")
PROBABILITY = ValueRule("a probability in [0, 1]", 0.0, 1.0)
BINARY_LABEL = ValueRule("a label 0 or 1", 0.0, 1.0, integral=True)
