"""fairseq-maskplug: task-guided masking for fairseq masked-language-model training.

Importing the package allow-lists fairseq's checkpoint classes for torch's safe
loader and registers the built-in mask policies and fairseq tasks. Load it into
``fairseq-train`` with ``--user-dir "$(fairseq-maskplug-dir)"`` or use
``fairseq-maskplug-train``, which adds that flag.
"""

__version__ = "0.1.0"

from . import compat

compat.allow_fairseq_checkpoint_globals()

from . import masking  # noqa: E402,F401  (built-in policies)
from . import criterions, models, tasks  # noqa: E402,F401  (fairseq registrations)
