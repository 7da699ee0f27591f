"""The rule behind the ``e2e`` marker: a test that runs ``fairseq-train`` (or
``fairseq-maskplug-train``, ``fairseq-hydra-train``), ``torchrun`` or a recipe, in a child
process or through ``fairseq_helpers.run`` in this one, carries ``@pytest.mark.e2e``, so that
``-m "not e2e"`` selects the tests that train nothing.

Every process the test process starts goes through ``subprocess.Popen._execute_child``;
:func:`install` wraps it once per pytest process, the in-process runner calls
:func:`check_current_test`, and :func:`training_command` names the training program in a
command line (also inside ``bash -c`` scripts). A test (or a fixture it triggers) that runs one
without the marker fails with a line saying what to add.
"""

import os
import re
import subprocess
from typing import Callable, List, Optional, Sequence, Union

TRAINING_PROGRAMS = re.compile(r"(?<![\w.-])(fairseq-train|fairseq-maskplug-train|fairseq-hydra-train|torchrun)"
                               r"(?![\w.-])|(?<![\w.-])(recipes/[\w.-]+\.sh)\b")


def training_command(args: Union[str, bytes, os.PathLike, Sequence]) -> Optional[str]:
    """The training program or recipe that the command line ``args`` starts, or None."""
    parts = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    for part in parts:
        text = os.fsdecode(part) if isinstance(part, (bytes, os.PathLike)) else str(part)
        match = TRAINING_PROGRAMS.search(text)
        if match:
            return match.group(1) or match.group(2)
    return None


_running_test: List[Callable[[], Optional[object]]] = []  # set by install()


def check_current_test(args) -> None:
    """Raise if the running test lacks the ``e2e`` marker and the command line ``args`` trains."""
    item = _running_test[0]() if _running_test else None
    program = training_command(args)
    if item is not None and program is not None and item.get_closest_marker("e2e") is None:
        raise RuntimeError(f"{item.nodeid} runs {program} but is not marked e2e: add @pytest.mark.e2e "
                           "(or pytestmark = pytest.mark.e2e) so that -m 'not e2e' stays free of training")


def install(current_test: Callable[[], Optional[object]]) -> None:
    """Refuse training subprocesses of tests without the ``e2e`` marker.

    ``current_test()`` returns the running pytest item (None between tests)."""
    _running_test[:] = [current_test]
    original = subprocess.Popen._execute_child
    if getattr(original, "maskplug_guard", False):
        return

    def execute_child(self, args, *rest, **kwargs):
        check_current_test(args)
        return original(self, args, *rest, **kwargs)

    execute_child.maskplug_guard = True
    subprocess.Popen._execute_child = execute_child
