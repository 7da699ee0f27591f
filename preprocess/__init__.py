"""Command-line entry points: ``fairseq-maskplug-NAME`` once installed (``python -m preprocess.NAME``
from the repository root)."""

from fairseq_maskplug.cli import (HelpFormatter, add_user_dir, configure_tool_output, import_user_dir,  # noqa: F401
                                  quiet_fairseq_import, track_name)

quiet_fairseq_import()  # before any command module imports fairseq: no tensorboardX hint
