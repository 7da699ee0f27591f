"""fairseq-maskplug: task-guided masking for fairseq masked-language-model training.

The package itself imports nothing heavy: ``fairseq_maskplug.masking`` (the policies,
pure NumPy) imports without torch or fairseq. Loading the plugin into fairseq is
:mod:`fairseq_maskplug.plugin`: ``fairseq-train --user-dir "$(fairseq-maskplug-dir)"``
and ``fairseq-maskplug-train`` do it. When fairseq is already imported (fairseq loading
``--user-dir``, or a user's plugin module), importing the package loads the plugin too,
so ``import fairseq_maskplug`` in a ``--user-dir`` module keeps working.
"""

import sys

__version__ = "0.1.0"

if "fairseq" in sys.modules:
    from . import plugin  # noqa: F401
