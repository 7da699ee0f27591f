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
from typing import Iterable, Optional, Tuple

import numpy as np
from fairseq.data import Dictionary

STATE_KEY = "dictionary_sha256"


#: the symbols fairseq's ``Dictionary`` holds before it reads a file (``<s> <pad> </s> <unk>``)
SPECIAL_SYMBOLS = ("<s>", "<pad>", "</s>", "<unk>")


def dictionary_damage(path: str) -> Optional[str]:
    """What is wrong with the ``dict.txt`` at ``path``, or None when every line reads as fairseq's
    ``Dictionary.add_from_file`` reads it (``<token> <count> [#fairseq:overwrite]``).

    fairseq-preprocess ends every line with a newline, so an unreadable last line without one is
    a copy cut short; an empty file is a copy that never happened (fairseq would load it as the
    four special symbols and fail later, or not at all). A file cut at a line's end cannot be told
    from a smaller dictionary: :func:`check_token_ids` then refuses the data's larger ids."""
    with open(path, "rb") as f:
        raw = f.read()
    if not raw:
        return "it is empty (0 bytes)"
    complete = raw.endswith(b"\n")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        if not complete and error.start >= len(raw) - 3:
            return f"it is cut short ({len(raw)} bytes, inside a character of its last line)"
        return f"it is not UTF-8 text (byte {error.start})"
    lines = text.splitlines()
    seen = dict.fromkeys(SPECIAL_SYMBOLS, 0)  # entry -> its line (0: a symbol fairseq adds before the file's)
    for number, line in enumerate(lines, 1):
        if number == 1 and line.startswith("#fairseq:"):  # metadata fairseq's _load_meta reads (none today)
            continue
        fields = line.rstrip().rsplit(" ", 1)
        overwrite = len(fields) == 2 and fields[1] == "#fairseq:overwrite"
        if overwrite:
            fields = fields[0].rsplit(" ", 1)
        if len(fields) != 2 or not fields[1].lstrip("-").isdigit():
            if number == len(lines) and not complete:
                return f"it is cut short ({len(raw)} bytes; its last line {line!r} is incomplete)"
            return f"line {number} ({line[:60]!r}) is not '<token> <count> [flags]'"
        if fields[0] in seen and not overwrite:  # fairseq: "Duplicate word found", naming no file
            first = seen[fields[0]]
            where = f"line {first}" if first else "the special symbols fairseq adds itself"
            return (f"line {number}: {fields[0][:60]!r} is already an entry ({where}); each entry once, or mark a "
                    "deliberate one '#fairseq:overwrite'")
        seen.setdefault(fields[0], number)
    return None


def check_dictionary(path: str) -> None:
    """Raise :class:`~.indexed_files.DamagedDataError` for a damaged ``dict.txt`` (a missing one is
    left to the caller), naming it and what to do."""
    from .indexed_files import DamagedDataError

    if not os.path.isfile(path):
        return
    damage = dictionary_damage(path)
    if damage is not None:
        raise DamagedDataError(f"dictionary {path} is damaged: {damage}; copy it again, or rerun the "
                               "fairseq-preprocess that wrote it")


def read_dictionary(path: str) -> Dictionary:
    """``Dictionary.load(path)`` once :func:`check_dictionary` passes (the plugin checks every load
    through fairseq; this is for the commands that read a dictionary without loading the plugin)."""
    check_dictionary(path)
    return Dictionary.load(path)


def load_dictionary(directory: str, what: str = "--data") -> Dictionary:
    """``DIRECTORY/dict.txt``, or a one-line error naming the file and the option it came from."""
    path = os.path.join(directory, "dict.txt")
    if not os.path.exists(path):
        raise FileNotFoundError(f"dictionary not found: {path} ({what} must be a fairseq-preprocess output directory)")
    return read_dictionary(path)


def dictionary_sha256(dictionary: Dictionary) -> str:
    """Fingerprint of the symbols in order (what token ids mean)."""
    return hashlib.sha256("\n".join(dictionary.symbols).encode("utf-8")).hexdigest()


def data_dictionary_path(data: str) -> str:
    """``dict.txt`` of a masked-LM directory or of a sentence_prediction root (``input0/``)."""
    for path in (os.path.join(data, "dict.txt"), os.path.join(data, "input0", "dict.txt")):
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"no dict.txt in {data} or {data}/input0")


def trained_dictionary(state: dict, also: Iterable[str] = ()) -> Optional[Tuple[str, str]]:
    """``(fingerprint, where it comes from)`` of the dictionary a checkpoint (loaded ``state``) was
    trained with: the fingerprint it records, else the ``dict.txt`` of the training data it names,
    else the first of the ``also`` files that exists; None when none is found from here."""
    recorded = (state.get("task_state") or {}).get(STATE_KEY)
    if recorded is not None:
        return recorded, "the fingerprint it records"
    trained_on = str(state["cfg"]["task"]["data"]).split(os.pathsep)[0]
    try:
        own = data_dictionary_path(trained_on)
        return dictionary_sha256(Dictionary.load(own)), f"its training data's {own}"
    except FileNotFoundError:
        pass
    for path in also:
        if os.path.isfile(path):
            return dictionary_sha256(Dictionary.load(path)), str(path)
    return None


def check_dictionary_file(state: dict, checkpoint: str, target: str, trust: bool = False,
                          also: Iterable[str] = ()) -> None:
    """Refuse the dictionary file ``target`` when it is not the one the checkpoint (loaded
    ``state``) was trained with (:func:`trained_dictionary`); when that cannot be found from here,
    refuse unless ``trust``."""
    reference = trained_dictionary(state, also)
    if reference is None:
        if trust:
            return
        trained_on = str(state["cfg"]["task"]["data"]).split(os.pathsep)[0]
        raise ValueError(f"cannot check that {target} is the dictionary {checkpoint} was trained with: the "
                         f"checkpoint records none and its training data {trained_on!r} is not found from here; "
                         "pass --trust-dictionary to skip the check")
    recorded, source = reference
    if recorded != dictionary_sha256(Dictionary.load(target)):
        raise ValueError(f"{target} is not the dictionary {checkpoint} was trained with (compared with {source}): "
                         f"write the data from its text with fairseq-maskplug-prepare-text --like {checkpoint} "
                         "(the model's tokenizer and dict.txt), or binarize it with the checkpoint's dict.txt "
                         "(fairseq-preprocess --srcdict)")


def check_checkpoint_dictionary(state: dict, checkpoint: str, data: str, trust: bool = False) -> None:
    """Refuse ``data`` when its dictionary is not the one the checkpoint (loaded ``state``) was trained with."""
    check_dictionary_file(state, checkpoint, data_dictionary_path(data), trust)


def check_token_ids(tokens, prefix: str, dictionary, allowed: Iterable[str] = (), chunk: int = 1 << 24) -> None:
    """Refuse, at load, a binarized split whose ids the dictionary cannot mean, naming file, line and token:

    - an id beyond the dictionary (data binarized with another, larger ``dict.txt``: the model's
      embedding lookup would fail at the first batch);
    - ``<s>``, ``<pad>`` or ``<mask>``: the text held the literal symbol, which fairseq-preprocess
      turns into the special id, so the model would read a mask (or a sentence start) the text never
      had (``allowed`` names symbols a split may hold, e.g. the ``<mask>`` of cloze questions);
    - ``</s>`` anywhere but at the end of a line (a literal ``</s>`` in the text).

    One pass over the memory-mapped ids, ``chunk`` ids at a time."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    if not isinstance(tokens, MMapIndexedDataset):  # other layouts: item by item
        arrays = (np.asarray(tokens[i]) for i in range(len(tokens)))
        ids, sizes = (np.concatenate(list(arrays)) if len(tokens) else np.zeros(0, np.int64)), np.asarray(tokens.sizes)
    else:
        ids, sizes = np.frombuffer(tokens._bin_buffer, dtype=tokens._index.dtype), np.asarray(tokens.sizes)
    reserved = [dictionary.bos(), dictionary.pad()] + [dictionary.indices[s] for s in ("<mask>",)
                                                        if s in dictionary.indices and s not in allowed]
    ends = np.cumsum(sizes) - 1
    for start in range(0, len(ids), chunk):
        part = np.asarray(ids[start:start + chunk]).astype(np.int64)
        line_end = np.zeros(len(part), dtype=bool)
        inside = ends[(ends >= start) & (ends < start + len(part))] - start
        line_end[inside] = True
        bad = ((part >= len(dictionary)) | (part < 0) | np.isin(part, reserved)
               | ((part == dictionary.eos()) & ~line_end))
        if bad.any():
            at = start + int(np.flatnonzero(bad)[0])
            line = int(np.searchsorted(ends, at)) + 1
            position = at - (int(ends[line - 2]) + 1 if line > 1 else 0) + 1
            value = int(ids[at])
            if value >= len(dictionary) or value < 0:
                beside = os.path.join(os.path.dirname(prefix), "dict.txt")
                cut = f", or {beside} is cut short (copy it again)" if os.path.isfile(beside) else ""
                why = (f"id {value} is beyond the {len(dictionary)} symbols of the dictionary: binarize it with the "
                       f"dict.txt of this data (fairseq-preprocess --srcdict){cut}")
            elif value == 0 and not np.any(np.asarray(ids[at:]) != 0):
                why = (f"from here to its end ({len(ids) - at} ids) the file holds only zero bytes: a copy cut short "
                       "into a file of the full size (a pre-allocated or interrupted copy); copy it again, or rerun "
                       "the fairseq-preprocess that wrote it")
            else:
                why = (f"the special symbol {dictionary[value]} (id {value}), which the text held literally; remove "
                       "or escape it before fairseq-preprocess")
            raise ValueError(f"{prefix}.bin, line {line}, token {position}: {why}")
