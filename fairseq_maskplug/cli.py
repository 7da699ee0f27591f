"""Small command-line helpers installed with the package."""

import logging
import os
import sys


def package_dir() -> str:
    """The installed package directory, the value for ``fairseq-train --user-dir``."""
    return os.path.dirname(os.path.abspath(__file__))


def print_user_dir() -> None:
    """``fairseq-maskplug-dir``: print the directory to pass to ``--user-dir``."""
    print(package_dir())


def _with_user_dir(argv):
    """Add ``--user-dir <package>`` unless the user gave one (their module then imports us)."""
    if any(a == "--user-dir" or a.startswith("--user-dir=") for a in argv):
        return list(argv)
    return ["--user-dir", package_dir(), *argv]


def train() -> None:
    """``fairseq-maskplug-train``: ``fairseq-train`` with this plugin loaded.

    The flag (not an in-process import) is what fairseq passes on to the worker
    processes it spawns for multi-GPU training, so those register the tasks too.
    """
    from fairseq_cli.train import cli_main

    # Importing fairseq (as this package does) runs a logging.basicConfig in
    # fairseq.tasks.text_to_speech first; restore fairseq-train's own log format.
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        datefmt="%Y-%m-%d %H:%M:%S", level=os.environ.get("LOGLEVEL", "INFO").upper(),
                        stream=sys.stdout, force=True)
    sys.argv = [sys.argv[0], *_with_user_dir(sys.argv[1:])]
    cli_main()
