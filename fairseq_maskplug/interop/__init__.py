"""Hugging Face interoperability: RoBERTa and BART checkpoints and their tokenizers in both directions.

``preprocess/convert.py`` is the command's parser; this package holds its work:

- :mod:`.convert`: both directions, each written and then checked by the other library;
- :mod:`.gpt2_vocab`: a Hugging Face ``vocab.json`` <-> fairseq's ``encoder.json`` + ``dict.txt``;
- :mod:`.tokenizer`: the ``tokenizer.json`` that gives fairseq's ids for raw text (sentencepiece data:
  a Unigram model over ``dict.txt``'s rows behind sentencepiece's normalizer);
- :mod:`.roberta`: parameter names and configuration of ``RobertaForMaskedLM`` /
  ``RobertaForSequenceClassification`` <-> fairseq's ``roberta`` model;
- :mod:`.bart`: the same for ``BartForConditionalGeneration`` <-> fairseq's ``bart``.

``transformers`` and ``safetensors`` are the optional ``[hf]`` extra; :func:`import_transformers`
imports them with a clear error when they are absent.
"""

import importlib
import importlib.util
import sys

from ..common.extras import MissingExtra, require_extra  # noqa: F401  (MissingExtra: re-exported)


def hide_broken_torchaudio() -> None:
    """Make an installed torchaudio that cannot be imported look absent.

    fairseq-fixed pulls a torchaudio built for another torch (its import fails with an ABI
    error); ``transformers`` imports torchaudio whenever it is installed. Marking it absent in
    ``sys.modules`` lets ``transformers`` load its text models, which never use it.
    """
    if "torchaudio" in sys.modules or importlib.util.find_spec("torchaudio") is None:
        return
    try:
        importlib.import_module("torchaudio")
    except (ImportError, OSError):
        for name in [n for n in sys.modules if n == "torchaudio" or n.startswith("torchaudio.")]:
            del sys.modules[name]
        sys.modules["torchaudio"] = None  # find_spec() now answers None and `import` raises ImportError


def import_transformers():
    """``transformers``, or :class:`MissingExtra` saying how to install it."""
    require_extra("hf", "the Hugging Face import and export")
    hide_broken_torchaudio()
    transformers = importlib.import_module("transformers")
    transformers.utils.logging.disable_progress_bar()  # one bar per weight load/save, meaningless here
    return transformers
