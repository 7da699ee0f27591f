"""Whether the text a sentencepiece model's data was written from had been lower-cased.

A sentencepiece model pieces whatever it is given: ``"This"`` and ``"this"`` are different pieces, and
a model trained on lower-cased text (the demo's corpora, ``prepare-text --lowercase``) reads every
capital letter of raw text as ``<unk>``. The commands that write data record, beside the model, how the
text was cased (``spm.model`` -> ``spm.text.json``: ``{"lowercase": true}``), so that what reads raw
text later (the Hugging Face tokenizer the export writes, the export's own check) lower-cases it too.
A model without the record (an older output, a user's own model) is taken as cased: raw text is
pieced as it is.
"""

import json
from pathlib import Path

from .atomic import write_text

SUFFIX = ".text.json"


def record_path(spm_model) -> Path:
    """The record beside a sentencepiece model: ``DIR/spm.model`` -> ``DIR/spm.text.json``."""
    model = Path(spm_model)
    return model.with_name(model.stem + SUFFIX)


def write_case_record(spm_model, lowercase: bool) -> Path:
    """Record (atomically) whether the data written with ``spm_model`` was lower-cased; returns the record."""
    if not isinstance(lowercase, bool):
        raise TypeError(f"lowercase must be a bool, not {lowercase!r}")
    path = record_path(spm_model)
    write_text(str(path), json.dumps({"lowercase": lowercase}) + "\n")
    return path


def is_lowercased(spm_model) -> bool:
    """Whether the data written with ``spm_model`` was lower-cased (False where nothing was recorded); a
    record that is not this module's is refused in one line naming it."""
    path = record_path(spm_model)
    if not path.is_file():
        return False
    try:
        value = json.loads(path.read_text(encoding="utf-8"))["lowercase"]
    except (ValueError, KeyError, TypeError):
        value = None
    if not isinstance(value, bool):
        raise ValueError(f"{path}: not a record of the text's case (expected {{\"lowercase\": true|false}})")
    return value
