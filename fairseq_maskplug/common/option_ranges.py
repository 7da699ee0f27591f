"""Ranges of numeric options, declared once beside each option and checked before any work.

A dataclass option declares its range in its field's metadata, in interval notation, written with
:func:`option`::

    mask_prob: float = option(0.15, "share of the maskable tokens masked", range="(0, 1]")

and a command-line option in its argparse type::

    parser.add_argument("--top-k", type=number("[1, inf)", int), ...)

``inf`` bounds are always open: a number must be finite. Tasks check their whole
configuration when they are built (:func:`check_ranges`, from ``tasks.task_base.PackageTask``), a
task's criterion when the task builds it, a policy its own options in
``MaskPolicy.__init__``; a float option that declares no range must still be finite. A refusal is one line naming the flag, the range
and the value given: ``--mask-prob must lie in (0, 1], got 0.0``.
"""

import argparse
import dataclasses
import math
import re
from typing import Callable, Optional

SOURCES = ("paper", "authors' code", "ours", "fairseq", "BERT", "SpanBERT", "BART", "T5", "REALM", "DARTS")


def option(default, help: str, range: Optional[str] = None, source: Optional[str] = None,
           choices: Optional[tuple] = None, **metadata):
    """A dataclass option: ``field(default=default, metadata={"help": help, "range": range, ...})``.
    ``range`` (interval notation) and ``choices`` (the values a word option takes) are checked before any work
    (:func:`check_ranges`). ``source`` says where the default
    comes from: it starts with one of :data:`SOURCES` (the method's paper, its authors' code, ours:
    designed here, or the convention of fairseq, BERT, SpanBERT, BART, T5, REALM, DARTS), optionally
    followed by a note; the options reference and the method pages show it. Further metadata
    (fairseq's ``argparse_alias``) passes through."""
    metadata = {"help": help, **metadata}
    if range is not None:
        Interval.parse(range)  # a malformed range fails where it is declared
        metadata["range"] = range
    if source is not None:
        if not any(source == s or source.startswith(s + " ") for s in SOURCES):
            raise ValueError(f"source {source!r} must start with one of {', '.join(SOURCES)}")
        metadata["source"] = source
    if choices is not None:
        if default not in choices:
            raise ValueError(f"default {default!r} is not one of its choices {tuple(choices)}")
        metadata["choices"] = tuple(choices)
    return dataclasses.field(default=default, metadata=metadata)


_INTERVAL = re.compile(r"^\s*([\[(])\s*(-?inf|-?[0-9.e+-]+)\s*,\s*(-?inf|-?[0-9.e+-]+)\s*([\])])\s*$")


@dataclasses.dataclass(frozen=True)
class Interval:
    """A real interval such as ``(0, 1]`` or ``[1, inf)``; infinite ends are open."""

    low: float
    high: float
    low_closed: bool
    high_closed: bool

    @classmethod
    def parse(cls, text: str) -> "Interval":
        match = _INTERVAL.match(text)
        if not match:
            raise ValueError(f"{text!r} is not an interval such as '(0, 1]' or '[1, inf)'")
        left, low, high, right = match.groups()
        low, high = float(low), float(high)
        if not low <= high:
            raise ValueError(f"interval {text!r} is empty")
        return cls(low, high, left == "[" and math.isfinite(low), right == "]" and math.isfinite(high))

    def __contains__(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value >= self.low if self.low_closed else value > self.low
        below = value <= self.high if self.high_closed else value < self.high
        return above and below

    def __str__(self) -> str:
        def end(x):
            return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:g}"
        return f"{'[' if self.low_closed else '('}{end(self.low)}, {end(self.high)}{']' if self.high_closed else ')'}"


def flag(name: str) -> str:
    """The command-line flag of a dataclass option: ``mask_prob`` -> ``--mask-prob``."""
    return "--" + name.replace("_", "-")


def out_of_range(name: str, value, interval: Optional[Interval]) -> Optional[str]:
    """Why ``value`` is not an acceptable value of option ``name``, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if interval is None:
        return None if math.isfinite(value) else f"{flag(name)} must be a finite number, got {value}"
    if value in interval:
        return None
    return f"{flag(name)} must lie in {interval}, got {value}"


def declared_range(f: dataclasses.Field) -> Optional[Interval]:
    """The interval in a dataclass field's ``metadata["range"]``, or None."""
    text = f.metadata.get("range")
    return None if text is None else Interval.parse(text)


def not_a_choice(name: str, value, choices: Optional[tuple]) -> Optional[str]:
    """Why ``value`` is not one of option ``name``'s ``choices``, or None."""
    if choices is None or value in choices:
        return None
    return f"{flag(name)} must be one of {choices}, got {value!r}"


def check_ranges(cfg, dataclass: type) -> None:
    """Refuse, with one line, the first option of ``dataclass`` whose value in ``cfg`` (a dataclass
    instance, omegaconf node or namespace) is not one of its declared choices, or, numeric, lies
    outside its declared range or is not finite. Fields ``cfg`` does not have are skipped."""
    for f in dataclasses.fields(dataclass):
        if not hasattr(cfg, f.name):
            continue
        why = not_a_choice(f.name, getattr(cfg, f.name), f.metadata.get("choices"))
        if why:
            raise ValueError(why)
        if f.type not in (int, float):
            continue
        why = out_of_range(f.name, getattr(cfg, f.name), declared_range(f))
        if why:
            raise ValueError(why)


def number(interval: str, kind: Callable = float) -> Callable[[str], float]:
    """An argparse ``type`` reading an ``int`` or ``float`` that lies in ``interval``:
    argparse then refuses other values with its one-line usage error."""
    parsed = Interval.parse(interval)

    def read(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}")
        if value not in parsed:
            raise argparse.ArgumentTypeError(f"must lie in {parsed}, got {text}")
        return value

    read.__name__ = kind.__name__  # argparse names the type in its messages
    read.interval = parsed
    return read
