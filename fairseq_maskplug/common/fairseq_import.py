"""Import fairseq from a library caller (the Hugging Face side) without the logging it leaves behind.

Importing fairseq imports every task, and ``fairseq.tasks.text_to_speech`` runs ``logging.basicConfig(level=
logging.DEBUG)`` at import: the root logger of a user's script then prints every library's DEBUG lines (hydra's,
``datasets``'), and that module's INFO hint to install tensorboardX. The package's commands set their own
logging after the import (``commands/train_cli.py``); a script that only imports :mod:`fairseq_maskplug.hf` gets
its root logger back as it was.
"""

import logging
import sys


def import_fairseq_keeping_logging() -> None:
    """Import fairseq (its tasks), then give the root logger back the level and handlers it had before; the
    tensorboardX hint's logger is set to WARNING. Where fairseq is already imported, nothing is restored (what
    the root logger was before is not known)."""
    if "fairseq.tasks" in sys.modules:
        return
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    import fairseq.tasks  # noqa: F401

    root.setLevel(level)
    root.handlers[:] = handlers
    logging.getLogger("fairseq.tasks.text_to_speech").setLevel(logging.WARNING)
