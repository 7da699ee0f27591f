"""Side-information tracks of raw text in a Hugging Face tokenizer's ids: the package's producers run on a
``datasets.Dataset`` (or a list of lines), for the collators of :mod:`fairseq_maskplug.hf`.

    from fairseq_maskplug.hf_tracks import with_track
    rows = with_track(rows, tokenizer, "pmi-units", ["--min-count", "5"])   # adds the column "pmi_units"
    collator = PolicyCollator(tokenizer, "pmi")

How: the lines are tokenized by ``tokenizer`` (or read from the dataset's ``input_ids``), written as a
binarized split whose ``dict.txt`` is the tokenizer's vocabulary in id order (sentencepiece pieces as they are;
GPT-2 byte-level tokens as fairseq's RoBERTa data holds them, one label per id and an ``encoder.json`` that maps
each token to it), the producer's own command runs on that split in a temporary folder, and its track is read
back by :func:`~fairseq_maskplug.hf.track_column` (``score-pll`` scores with the Hugging Face model ``model=``
names, converted to a fairseq release whose dictionary the split then uses): one value per id of each line, ``<s>`` included (a 0 there, as
fairseq's blocking gives it). So the values are the fairseq producer's on the same ids: the same code on the
same data (tested byte for byte against the command run on ``prepare-text``'s binarization of the same text).

The tokenizer must number its specials as fairseq's dictionaries do (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2,
``<unk>`` 3) and hold ``<mask>`` as its last id, as RoBERTa's and BART's tokenizers and this project's exports
do, and every line must be ``<s> ... </s>``; anything else is refused in one line before the producer runs.
A producer's counts need every line at once, so a streaming dataset (``IterableDataset``) is refused; the
producer runs in one process (its ``--num-shards`` is for binarized splits, ``docs/scale.md``).
"""

import contextlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import List, NamedTuple, Optional, Sequence

import numpy as np

from .common.fairseq_import import import_fairseq_keeping_logging

import_fairseq_keeping_logging()  # before the modules below import fairseq

from .tools.cli import console_command  # noqa: E402

#: the producers: the track each writes, whether it reads the raw text (``--text``, with ``--bpe``) and whether it
#: reads a masked-LM model (``--checkpoint``: the Hugging Face model ``model=`` names, converted to fairseq by
#: ``fairseq-maskplug-convert --from-hf``). (``difference`` reads a general corpus too, ``annotate-importance`` and
#: ``score-spans`` models of this project's own tasks, ``span-labels`` answer offsets: run them on a binarized split
#: and read the track with :func:`~fairseq_maskplug.hf.track_column`.)
PRODUCERS = {
    "pmi-units": {"track": "pmi_units", "text": False, "model": False},
    "informask": {"track": "informask_rate", "text": False, "model": False},
    "salient-spans": {"track": "salient_spans", "text": True, "model": False},
    "pos-tags": {"track": "pos", "text": True, "model": False},
    "score-pll": {"track": "plt", "text": False, "model": True},
}

class TrackValues(NamedTuple):
    values: List[np.ndarray]  #: per line, one value per id of the tokenizer's ``input_ids``
    summary: dict  #: the producer's JSON summary


def vocabulary_kind(tokenizer) -> str:
    """``sentencepiece`` or ``gpt2``: which word mark (``▁`` or ``Ġ``) more of the tokenizer's tokens begin with
    (:func:`~fairseq_maskplug.hf.word_mark`, as :func:`~fairseq_maskplug.hf.word_start_ids` reads it)."""
    from .data.word_boundaries import SPM_SPACE
    from .hf import word_mark

    mark = word_mark(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))))
    return "sentencepiece" if mark == SPM_SPACE else "gpt2"


def check_tokenizer(tokenizer) -> None:
    """Refuse, in one line, a tokenizer whose ids a fairseq dictionary cannot hold (module docstring)."""
    wanted = {"bos": 0, "pad": 1, "eos": 2, "unk": 3}
    for name, expected in wanted.items():
        got = getattr(tokenizer, f"{name}_token_id")
        if got != expected:
            raise ValueError(f"the tokenizer's {name} id is {got}, fairseq's dictionaries have {expected} there "
                             "(<s> 0, <pad> 1, </s> 2, <unk> 3: RoBERTa's and BART's tokenizers): its ids cannot be "
                             "a fairseq split's")
    from .interop.gpt2_vocab import mask_last_problem

    if mask_last_problem(tokenizer.mask_token_id, len(tokenizer)):
        raise ValueError(mask_last_problem(tokenizer.mask_token_id, len(tokenizer)))


def dictionary_rows(tokenizer, kind: str) -> List[str]:
    """``dict.txt``'s symbols for ids 4 .. ``<mask>`` - 1: the pieces (sentencepiece) or each id as a label
    (GPT-2 byte-level, as fairseq's RoBERTa data); a piece fairseq's dictionary file cannot hold is refused."""
    ids = list(range(4, len(tokenizer) - 1))
    if kind == "gpt2":
        return [str(i) for i in ids]
    symbols = tokenizer.convert_ids_to_tokens(ids)
    for i, symbol in zip(ids, symbols):
        if not symbol or any(c.isspace() for c in symbol):
            raise ValueError(f"the tokenizer's id {i} is {symbol!r}: a fairseq dict.txt row cannot hold it")
    return symbols


def line_ids(lines: Sequence[str], tokenizer, input_ids: Optional[Sequence[Sequence[int]]] = None) -> List[np.ndarray]:
    """Each line's ids (``input_ids`` where given, else ``tokenizer(line)``), refused unless ``<s> ... </s>``
    with no newline in the text (the producers read one line per binarized line)."""
    out = []
    for i, line in enumerate(lines):
        if line is not None and ("\n" in line or "\r" in line):
            raise ValueError(f"line {i} holds a line break: the producers read one line of text per row")
        # verbose=False: a line longer than the model's positions is not fed to the model here (the producers
        # score text, the rows are cut where they are trained), so transformers' length warning would mislead
        ids = np.asarray(input_ids[i] if input_ids is not None else tokenizer(line, verbose=False)["input_ids"],
                         dtype=np.int64)
        if len(ids) < 2 or ids[0] != tokenizer.bos_token_id or ids[-1] != tokenizer.eos_token_id:
            raise ValueError(f"row {i}'s ids are not <s> ... </s> (the tokenizer's special tokens on): "
                             f"{ids[:5].tolist()}...")
        out.append(ids)
    return out


def write_split(folder: Path, split: str, rows: Sequence[np.ndarray], symbols: Sequence[str], size: int) -> None:
    """``folder/dict.txt`` (once) and ``folder/SPLIT.bin/.idx``: each row without its ``<s>`` (fairseq-preprocess
    binarizes a line as its tokens and ``</s>``)."""
    import torch
    from fairseq.data import indexed_dataset

    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "dict.txt").exists():
        (folder / "dict.txt").write_text("".join(f"{symbol} 1\n" for symbol in symbols), encoding="utf-8")
    builder = indexed_dataset.make_builder(str(folder / f"{split}.bin"), impl="mmap", vocab_size=size)
    for row in rows:
        builder.add_item(torch.IntTensor(row[1:]))
    builder.finalize(str(folder / f"{split}.idx"))


def run_command(argv: List[str]) -> str:
    """A command of the package; its standard output, or a ValueError holding its one-line error."""
    result = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, TQDM_DISABLE="1"))
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        raise ValueError(lines[-1] if lines else f"{Path(argv[0]).name} exited with status {result.returncode}")
    return result.stdout


def fairseq_release(model: str, tokenizer, out: Path) -> Path:
    """``model`` (a Hugging Face masked-LM directory) as a fairseq release in ``out`` (``model.pt``, ``dict.txt``
    and the tokenizer's files), through ``fairseq-maskplug-convert --from-hf`` (which checks the ids and logits of
    both libraries); refused unless its dictionary has the tokenizer's ids."""
    run_command([console_command("fairseq-maskplug-convert"), "--from-hf", str(model), "--to", "fairseq", str(out)])
    rows = len((out / "dict.txt").read_text(encoding="utf-8").splitlines())
    if rows + 5 != len(tokenizer):  # the four specials before dict.txt's rows, <mask> after them
        raise ValueError(f"model {model}: its fairseq dictionary has {rows + 5} ids with <mask>, the tokenizer "
                         f"{len(tokenizer)}: give the model's own tokenizer")
    return out


def track_values(lines: Sequence[str], tokenizer, producer: str, options: Sequence[str] = (),
                 input_ids: Optional[Sequence[Sequence[int]]] = None, work: Optional[str] = None,
                 model: Optional[str] = None) -> TrackValues:
    """The track ``producer`` (a key of :data:`PRODUCERS`) writes for ``lines``, in ``tokenizer``'s ids, with the
    producer's ``options`` (its command-line flags, e.g. ``["--min-count", "5"]``); ``input_ids``: the lines' ids
    as the examples hold them; ``work``: a folder to keep the binarized split and the track in (default: a
    temporary one, removed); ``model``: the Hugging Face masked-LM directory a model producer scores with (its
    tokenizer is ``tokenizer``)."""
    from .hf import track_column

    if producer not in PRODUCERS:
        raise ValueError(f"producer must be one of {', '.join(PRODUCERS)}, got {producer!r}")
    spec = PRODUCERS[producer]
    if spec["model"] != (model is not None):
        raise ValueError(f"{producer} scores with a model: give model=" if spec["model"] else
                         f"{producer} reads no model: leave model= out")
    check_tokenizer(tokenizer)
    kind = vocabulary_kind(tokenizer)
    symbols = dictionary_rows(tokenizer, kind)
    rows = line_ids(lines, tokenizer, input_ids)
    with (contextlib.nullcontext(work) if work else tempfile.TemporaryDirectory(prefix="maskplug-track-")) as root:
        root = Path(root)
        data = root / "data"
        argv = [console_command(f"fairseq-maskplug-{producer}"), "--data", str(data), "--splits", "train"]
        if spec["model"]:  # the release's dictionary (its rows, e.g. GPT-2 labels, are what its checkpoint records)
            release = fairseq_release(model, tokenizer, root / "fairseq")
            data.mkdir(parents=True)
            (data / "dict.txt").write_bytes((release / "dict.txt").read_bytes())
            argv += ["--checkpoint", str(release / "model.pt"), "--word-starts", kind]
            argv += ["--gpt2-encoder-json", str(release / "encoder.json"), "--gpt2-vocab-bpe",
                     str(release / "vocab.bpe")] if kind == "gpt2" else []
        write_split(data, "train", rows, symbols, len(tokenizer))
        encoder = root / "encoder.json"
        if kind == "gpt2":
            encoder.write_text(json.dumps({token: i for i, token in enumerate(
                tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))))}), encoding="utf-8")
        if spec["text"]:
            (root / "train.txt").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
            argv += ["--text", str(root / "train.txt"), "--bpe", kind]
            argv += ["--gpt2-encoder-json", str(encoder)] if kind == "gpt2" else []
        elif producer == "pmi-units" and kind == "gpt2":
            argv += ["--word-boundaries", "gpt2", "--gpt2-encoder-json", str(encoder)]
        summary = json.loads(run_command(argv + [str(option) for option in options]).strip().splitlines()[-1])
        values = track_column(str(data / "train"), spec["track"], tokenizer=tokenizer)
    return TrackValues(values, summary)


def with_track(dataset, tokenizer, producer: str, options: Sequence[str] = (), text_column: str = "text",
               column: Optional[str] = None, model: Optional[str] = None):
    """``dataset`` (a ``datasets.Dataset``) with the track of ``producer`` as a column (default: the policy's track
    name, e.g. ``pmi_units``), aligned to its ``input_ids`` where it has them (else to ``tokenizer`` of
    ``text_column``); ``model``: a model producer's Hugging Face model (:func:`track_values`)."""
    if not hasattr(dataset, "add_column") or not hasattr(dataset, "__len__"):
        raise ValueError("with_track needs a datasets.Dataset held whole (a streaming IterableDataset cannot be "
                         "counted over): load it without streaming=True, or pass lines to track_values")
    if text_column not in dataset.column_names:
        raise ValueError(f"the dataset has no column {text_column!r} (it has {', '.join(dataset.column_names)})")
    name = column or PRODUCERS.get(producer, {}).get("track", producer)
    if name in dataset.column_names:
        raise ValueError(f"the dataset already has a column {name!r}: name another with column=")
    ids = dataset["input_ids"] if "input_ids" in dataset.column_names else None
    result = track_values(dataset[text_column], tokenizer, producer, options, ids, model=model)
    return dataset.add_column(name, [row.tolist() for row in result.values])
