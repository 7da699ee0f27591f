"""Command-line entry points (``python -m preprocess.NAME --help`` from the repository root)."""

import argparse


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """The module docstring as written, and every option's default in ``--help``."""
