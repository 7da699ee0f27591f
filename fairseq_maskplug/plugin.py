"""Registers fairseq-maskplug with fairseq: importing this module is what loading the plugin means.

It installs :mod:`.compat` (checkpoint loading under torch >= 2.6, data parallelism on
CPUs, ``torchrun``/``srun`` launches) and registers the built-in mask policies, tasks,
criteria and model heads. ``fairseq-train --user-dir "$(fairseq-maskplug-dir)"`` and
``fairseq-maskplug-train`` import it; so should a user's own ``--user-dir`` module or
script (``import fairseq_maskplug.plugin``).
"""

from .integration import compat

compat.install()

from . import masking  # noqa: E402,F401  (built-in policies)
from . import criterions, models, tasks  # noqa: E402,F401  (fairseq registrations)
