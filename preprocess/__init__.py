"""Command-line entry points: ``fairseq-maskplug-NAME`` once installed (``python -m preprocess.NAME``
from the repository root)."""

from fairseq_maskplug.tools.cli import (  # noqa: F401
    HelpFormatter, add_user_dir, add_version, command_main, configure_tool_output, import_user_dir,
    one_line_on_write_failure, quiet_fairseq_import, split_name, track_name)

quiet_fairseq_import()  # before any command module imports fairseq: no tensorboardX hint
