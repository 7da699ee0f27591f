"""fairseq-maskplug: task-guided masking for fairseq masked-language-model training.

The package itself imports nothing heavy: ``fairseq_maskplug.masking`` (the policies,
pure NumPy) imports without torch or fairseq. Loading the plugin into fairseq is
:mod:`fairseq_maskplug.plugin`: ``fairseq-train --user-dir "$(fairseq-maskplug-dir)"``
and ``fairseq-maskplug-train`` do it. ``import fairseq_maskplug`` loads it too, whatever was
imported before: at once when fairseq is already imported (fairseq loading ``--user-dir``, a
user's plugin module), else as soon as fairseq's own import finishes (:func:`_after_fairseq`), so
that a script loads this package's checkpoints whichever of the two it imports first.
"""

import sys

from ._version import __version__  # noqa: F401


class _LoadPluginAfterFairseq:
    """A ``sys.meta_path`` finder that lets fairseq and this package's modules import as usual and then, once
    fairseq is imported and no module of this package is half-way through its own import (one of them may be
    what imports fairseq), imports :mod:`.plugin` (:func:`_load_plugin_when_ready`)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "fairseq" and not fullname.startswith(__name__ + "."):
            return None
        for finder in sys.meta_path:
            spec = None if finder is self or not hasattr(finder, "find_spec") else \
                finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenPlugin(spec.loader)
                return spec
        return None


class _ThenPlugin:
    """A module's own loader, then :func:`_load_plugin_when_ready`."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        _load_plugin_when_ready(module.__name__)

    def __getattr__(self, name):  # get_resource_reader, is_package, ... as the module's own loader answers them
        return getattr(self.loader, name)


def _initializing(module) -> bool:
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _load_plugin_when_ready(just_loaded: str) -> None:
    """Import :mod:`.plugin` (and stop watching imports) if fairseq is imported and no module of this package but
    ``just_loaded`` is still executing: the plugin imports them all, and a half-initialised one would break it."""
    fairseq = sys.modules.get("fairseq")
    if fairseq is None or (_initializing(fairseq) and just_loaded != "fairseq"):
        return
    if any(name != just_loaded and _initializing(module) for name, module in list(sys.modules.items())
           if name == __name__ or name.startswith(__name__ + ".")):
        return
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _LoadPluginAfterFairseq)]
    from . import plugin  # noqa: F401


def _after_fairseq() -> None:
    """Load the plugin now if fairseq is imported, else when it is (the module docstring)."""
    if "fairseq" in sys.modules:
        from . import plugin  # noqa: F401
    elif not any(isinstance(finder, _LoadPluginAfterFairseq) for finder in sys.meta_path):
        sys.meta_path.insert(0, _LoadPluginAfterFairseq())


_after_fairseq()
