"""The package's version, defined here only: pyproject.toml reads it (``[tool.setuptools.dynamic]``), every
command's ``--version`` prints it, and checkpoints, tracks and results record it."""

__version__ = "1.0.0"

#: the key under which checkpoints, track records (``.json``) and results record the version that wrote them
RECORD_KEY = "fairseq_maskplug_version"


def newer_than_this(recorded) -> bool:
    """Whether ``recorded`` (a version string, or None for artefacts written before versions were recorded) is of
    a later major version than this package's: its format may differ (semantic versioning)."""
    if not isinstance(recorded, str) or not recorded.split(".")[0].isdigit():
        return False
    return int(recorded.split(".")[0]) > int(__version__.split(".")[0])


def newer_version_line(what: str, recorded) -> str:
    """One line saying that ``what`` was written by a newer major version (its format may differ); "" if not."""
    if not newer_than_this(recorded):
        return ""
    return (f"{what} was written by fairseq-maskplug {recorded}, a newer major version than this {__version__}: "
            "its format may differ; upgrade fairseq-maskplug to read it safely")
