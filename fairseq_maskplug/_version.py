"""The package's version, defined here only: pyproject.toml reads it (``[tool.setuptools.dynamic]``), every
command's ``--version`` prints it, and checkpoints, tracks and results record it."""

__version__ = "1.0.0"
