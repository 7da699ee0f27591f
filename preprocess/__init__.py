"""Command-line entry points: ``fairseq-maskplug-NAME`` once installed (``python -m preprocess.NAME``
from the repository root)."""

from fairseq_maskplug.cli import HelpFormatter  # noqa: F401
