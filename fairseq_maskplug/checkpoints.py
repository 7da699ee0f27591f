"""Opening a checkpoint for a tool, with every check made before any work starts."""

import os
from typing import Iterable, Optional

from .atomic import check_writable  # noqa: F401  (re-exported: the tools import it from here)
from .data.dictionaries import check_checkpoint_dictionary

CLASSIFIER_TASKS = ("sentence_prediction", "joint_mlm_classification", "tlm")


def load_checked_state(checkpoint: str, data: str, trust_dictionary: bool = False,
                       tasks: Optional[Iterable[str]] = None, refuse: Iterable[str] = (), wanted: str = "") -> dict:
    """The checkpoint's state with ``data`` as its data directory, after checking that the file
    exists, that it was trained by one of ``tasks`` (and by none of ``refuse``), and that
    ``data`` uses its dictionary (:func:`~fairseq_maskplug.data.dictionaries.check_checkpoint_dictionary`).

    ``wanted`` names the kind of checkpoint expected, for the error message.
    """
    import fairseq_maskplug.plugin  # noqa: F401  (safe globals, registrations)
    from fairseq import checkpoint_utils

    if not os.path.isfile(checkpoint):
        raise FileNotFoundError(f"checkpoint not found: {checkpoint}")
    # overrides here: fairseq ignores arg_overrides when it is later given this state
    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint, arg_overrides={"data": data})
    name = state["cfg"]["task"]["_name"]
    if (tasks is not None and name not in tasks) or name in refuse:
        raise ValueError(f"{checkpoint} is a {name} checkpoint; {wanted or 'another kind'} is needed")
    check_checkpoint_dictionary(state, checkpoint, data, trust_dictionary)
    return state


