"""Command-line entry points (run from the repository root: ``python -m preprocess.NAME --help``)."""
