"""Loading dictionaries, and checking that data and a checkpoint use the same one.

A reordered ``dict.txt`` of the same size gives every token another id; a model then
reads nonsense without any shape error. The package's tasks record a fingerprint of
their dictionary in every checkpoint (``task_state["dictionary_sha256"]``); for other
checkpoints (fairseq's ``sentence_prediction``) the ``dict.txt`` of the training data
the checkpoint names is compared, and where neither is available the tools refuse
unless told ``--trust-dictionary``.
"""

import hashlib
import os

from fairseq.data import Dictionary

STATE_KEY = "dictionary_sha256"


def load_dictionary(directory: str, what: str = "--data") -> Dictionary:
    """``DIRECTORY/dict.txt``, or a one-line error naming the file and the option it came from."""
    path = os.path.join(directory, "dict.txt")
    if not os.path.exists(path):
        raise FileNotFoundError(f"dictionary not found: {path} ({what} must be a fairseq-preprocess output directory)")
    return Dictionary.load(path)


def dictionary_sha256(dictionary: Dictionary) -> str:
    """Fingerprint of the symbols in order (what token ids mean)."""
    return hashlib.sha256("\n".join(dictionary.symbols).encode("utf-8")).hexdigest()


def data_dictionary_path(data: str) -> str:
    """``dict.txt`` of a masked-LM directory or of a sentence_prediction root (``input0/``)."""
    for path in (os.path.join(data, "dict.txt"), os.path.join(data, "input0", "dict.txt")):
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"no dict.txt in {data} or {data}/input0")


def check_checkpoint_dictionary(state: dict, checkpoint: str, data: str, trust: bool = False) -> None:
    """Refuse ``data`` when its dictionary is not the one the checkpoint (loaded ``state``) was trained with."""
    target = data_dictionary_path(data)
    wanted = dictionary_sha256(Dictionary.load(target))
    recorded = (state.get("task_state") or {}).get(STATE_KEY)
    source = "the fingerprint it records"
    if recorded is None:
        trained_on = str(state["cfg"]["task"]["data"]).split(os.pathsep)[0]
        try:
            own = data_dictionary_path(trained_on)
        except FileNotFoundError:
            if trust:
                return
            raise ValueError(f"cannot check that {target} is the dictionary {checkpoint} was trained with: the "
                             f"checkpoint records none and its training data {trained_on!r} is not found from here; "
                             "pass --trust-dictionary to skip the check") from None
        recorded, source = dictionary_sha256(Dictionary.load(own)), f"its training data's {own}"
    if recorded != wanted:
        raise ValueError(f"{target} is not the dictionary {checkpoint} was trained with (compared with {source}): "
                         "binarize the data with the checkpoint's dict.txt (fairseq-preprocess --srcdict)")
