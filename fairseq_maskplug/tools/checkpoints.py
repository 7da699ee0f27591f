"""Opening a checkpoint for a tool, with every check made before any work starts."""

import os
from typing import Iterable, Optional

from ..common.atomic import check_writable  # noqa: F401  (re-exported: the tools import it from here)
from ..data.dictionaries import check_dictionary_file, data_dictionary_path

CLASSIFIER_TASKS = ("sentence_prediction", "joint_mlm_classification", "tlm")


def load_checked_state(checkpoint: str, data: str, trust_dictionary: bool = False,
                       tasks: Optional[Iterable[str]] = None, refuse: Iterable[str] = (), wanted: str = "") -> dict:
    """The checkpoint's state with ``data`` as its data directory, after checking that the file
    exists, that it was trained by one of ``tasks`` (and by none of ``refuse``), and that
    ``data`` uses its dictionary (:func:`~fairseq_maskplug.data.dictionaries.check_dictionary_file`).

    ``wanted`` names the kind of checkpoint expected, for the error message.
    """
    import fairseq_maskplug.plugin  # noqa: F401  (safe globals, registrations)
    from fairseq import checkpoint_utils
    from fairseq.dataclass.utils import overwrite_args_by_name

    if not os.path.isfile(checkpoint):
        raise FileNotFoundError(f"checkpoint not found: {checkpoint}")
    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)
    name = state["cfg"]["task"]["_name"]
    if (tasks is not None and name not in tasks) or name in refuse:
        raise ValueError(f"{checkpoint} is a {name} checkpoint; {wanted or 'another kind'} is needed")
    # before the data is overridden: without a recorded fingerprint, the check reads the dict.txt
    # of the data the checkpoint names (overridden first, it compared --data with itself), else the
    # dict.txt beside the checkpoint (a release: model.pt + dict.txt)
    check_dictionary_file(state, checkpoint, data_dictionary_path(data), trust_dictionary,
                          also=[os.path.join(os.path.dirname(os.path.abspath(checkpoint)), "dict.txt")])
    # overridden here: fairseq ignores arg_overrides when it is later given this state, and it
    # reads an old-style checkpoint's args before its cfg
    overwrite_args_by_name(state["cfg"], {"data": data})
    if state.get("args") is not None:
        state["args"].data = data
    return state


def load_checked_model(checkpoint: str, data: str, trust_dictionary: bool = False,
                       tasks: Optional[Iterable[str]] = None, refuse: Iterable[str] = (), wanted: str = ""):
    """``(model, task, state)`` of a checkpoint checked by :func:`load_checked_state`, the model on
    the GPU when there is one (what every scoring command loads)."""
    state = load_checked_state(checkpoint, data, trust_dictionary, tasks, refuse, wanted)
    return (*model_from_state(checkpoint, state), state)


def model_from_state(checkpoint: str, state: dict):
    """``(model, task)`` built from a checked ``state`` of ``checkpoint``, the model on the GPU when
    there is one."""
    import torch
    from fairseq import checkpoint_utils

    models, _, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], state=state)
    return (models[0].cuda() if torch.cuda.is_available() else models[0]), task
