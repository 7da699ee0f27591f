"""``fairseq-maskplug-dir``: print the directory to pass to ``fairseq-train --user-dir``.

Kept free of fairseq and torch so that it answers at once and prints nothing else.
"""

import os


def package_dir() -> str:
    """The installed package directory, the value for ``fairseq-train --user-dir``."""
    return os.path.dirname(os.path.abspath(__file__))


def print_user_dir() -> None:
    print(package_dir())
