"""``fairseq-maskplug-dir`` (print the directory to pass to ``fairseq-train --user-dir``) and
what the package's command-line tools share. Kept free of fairseq and torch, so that
``fairseq-maskplug-dir`` answers at once and prints nothing else.
"""

import argparse
import os


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """The package's command-line tools: the module docstring as written, every option's default in ``--help``."""


def package_dir() -> str:
    """The installed package directory, the value for ``fairseq-train --user-dir``."""
    return os.path.dirname(os.path.abspath(__file__))


def print_user_dir() -> None:
    print(package_dir())
