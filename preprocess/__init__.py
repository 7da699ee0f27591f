"""Command-line entry points: ``fairseq-maskplug-NAME`` once installed (``python -m preprocess.NAME``
from the repository root)."""

from fairseq_maskplug.cli import HelpFormatter, configure_tool_output, track_name  # noqa: F401
