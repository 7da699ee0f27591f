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
    """A ``sys.meta_path`` finder that lets fairseq import as usual and then imports :mod:`.plugin`."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "fairseq":
            return None
        from importlib.machinery import PathFinder

        sys.meta_path[:] = [finder for finder in sys.meta_path if finder is not self]  # once
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _ThenPlugin(spec.loader)
        return spec


class _ThenPlugin:
    """fairseq's loader, followed by the plugin's import once fairseq's ``__init__`` has run."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        from . import plugin  # noqa: F401

    def __getattr__(self, name):  # get_resource_reader, is_package, ... as fairseq's own loader answers them
        return getattr(self.loader, name)


def _after_fairseq() -> None:
    """Load the plugin now if fairseq is imported, else when it is (the module docstring)."""
    if "fairseq" in sys.modules:
        from . import plugin  # noqa: F401
    elif not any(isinstance(finder, _LoadPluginAfterFairseq) for finder in sys.meta_path):
        sys.meta_path.insert(0, _LoadPluginAfterFairseq())


_after_fairseq()
