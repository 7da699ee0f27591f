"""Sentencepiece + fairseq-preprocess helpers shared by the data-preparation commands: encode corpora one
way with one ``dict.txt`` (:func:`encode_corpora`), write and binarize them (:func:`binarize_corpora`), keep an
output whose manifest records the same settings (:func:`up_to_date`)."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Sequence, Tuple

from ..common.atomic import (replaceable, temporary_name, tree_bytes, write_failed,
                             write_failure_in, write_owner)
from ..common.progress import progress_bar
from ..common.text_case import write_case_record


@contextmanager
def atomic_directory(final: Path, command: str, legacy: Iterable[str] = (), keep_others: bool = False):
    """Build a directory under a temporary name, marked as ``command``'s output; rename it to
    ``final`` only on success. With ``keep_others``, the owner file records the files the command wrote, and
    every other file of an earlier ``final`` (a producer's track, a file of the user's) is kept in the new one,
    or the swap is refused where a kept track would go stale (:func:`..tools.kept_files.carry_over`).

    An interrupted run leaves ``final`` as it was (absent or the previous complete
    version) and no half-written directory under the final name. ``final`` is replaced only if
    :func:`~fairseq_maskplug.common.atomic.replaceable` by ``command`` (checked again before the swap:
    the command checks it before any work with ``check_output_directory``). A write the disk refuses
    (a full disk, a file-size limit) becomes one :class:`~fairseq_maskplug.common.atomic.OutputWriteError`
    line naming ``final`` and the bytes written before it.
    """
    final = Path(final)
    if not replaceable(final, command, legacy):
        raise ValueError(f"{final} exists and was not written by {command}: give another output directory")
    tmp = Path(temporary_name(str(final)))
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        umask_modes(tmp)  # the command's own files only: a kept file is a link to the user's
        if keep_others:
            from .kept_files import carry_over, files_under
            written = files_under(tmp)
            kept = carry_over(final, tmp, command)
            write_owner(tmp, command, written)
            if kept:
                import logging
                logging.getLogger("fairseq_maskplug").info(
                    "kept %d file(s) of %s that %s did not write (%s%s)", len(kept), final, command,
                    ", ".join(kept[:3]), ", ..." if len(kept) > 3 else "")
        else:
            write_owner(tmp, command)
        if not replaceable(final, command, legacy):
            raise ValueError(f"{final} appeared while {command} ran and was not written by it: its output is "
                             "not kept")
    except BaseException as error:
        written = tree_bytes(str(tmp))
        shutil.rmtree(tmp, ignore_errors=True)
        failure = write_failure_in(error) if isinstance(error, Exception) else None
        if failure is not None:
            raise write_failed(str(final), failure, written) from None
        raise
    old = final.with_name(f"{final.name}.old-{os.getpid()}")
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def umask_modes(directory: Path) -> None:
    """Give every file under ``directory`` the mode a new file gets under the process's umask (0644 under 022):
    a library that writes through a temporary file (safetensors' ``model.safetensors``) leaves it 0600, unreadable
    to the other users the rest of the output is readable to."""
    umask = os.umask(0)
    os.umask(umask)
    for path in Path(directory).rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod((0o777 if path.stat().st_mode & 0o100 else 0o666) & ~umask)


def write_lines(path: Path, lines: Iterable[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


def train_sentencepiece(texts: Sequence[str], model_prefix: Path, vocab_size: int) -> Path:
    """Train a unigram sentencepiece model on ``texts``; writes ``model_prefix.model`` and ``.vocab``
    (``piece<TAB>score``) and returns the ``.model`` path.

    The texts go to the trainer from memory, not from a file, so the model's bytes do not record a
    path (sentencepiece keeps its input file's name in the model; a command writing under a
    temporary ``DIR.tmp-PID`` then wrote another model on every run)."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab_size,
            model_type="unigram", character_coverage=1.0, bos_id=-1, eos_id=-1, pad_id=-1, unk_id=0,
            input_sentence_size=2_000_000, shuffle_input_sentence=True, num_threads=os.cpu_count() or 1,
            minloglevel=2)
    except RuntimeError as error:  # e.g. "Vocabulary size too high (8000). Please set it to a value <= 131."
        raise ValueError(f"sentencepiece on {len(texts)} lines: {str(error).split('] ')[-1].strip()} "
                         f"(--vocab-size {vocab_size})") from None
    path = Path(f"{model_prefix}.model")
    path.write_bytes(model.getvalue())
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    write_lines(Path(f"{model_prefix}.vocab"), (f"{processor.id_to_piece(i)}\t{processor.get_score(i):g}"
                                                for i in range(processor.get_piece_size())))
    return path


def encode(model: Path, texts: Sequence[str], desc: str, chunk: int = 2000) -> List[str]:
    """Encode ``texts`` into space-separated sentencepiece pieces (fairseq's token format)."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model))
    out: List[str] = []
    for start in progress_bar(range(0, len(texts), chunk), desc=f"encode {desc}", unit="chunk", disable=None):
        out.extend(" ".join(pieces) for pieces in sp.encode(list(texts[start:start + chunk]), out_type=str))
    return out


def gpt2_bpe_files(directory: Path) -> Tuple[Path, Path]:
    """``encoder.json`` and ``vocab.bpe`` of a GPT-2 BPE directory (a fairseq release's files), checked now."""
    files = Path(directory) / "encoder.json", Path(directory) / "vocab.bpe"
    for f in files:
        if not f.is_file():
            raise FileNotFoundError(f"{f}: no such file (a GPT-2 BPE directory holds encoder.json and vocab.bpe)")
    return files


def encode_gpt2(directory: Path, texts: Sequence[str], desc: str) -> List[str]:
    """Encode ``texts`` with fairseq's own GPT-2 BPE encoder into space-separated GPT-2 labels
    (what fairseq's ``multiprocessing_bpe_encoder`` writes; a release's ``dict.txt`` maps them to rows)."""
    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

    encoder_json, vocab_bpe = gpt2_bpe_files(directory)
    bpe = get_encoder(str(encoder_json), str(vocab_bpe))
    return [" ".join(map(str, bpe.encode(text.strip())))
            for text in progress_bar(texts, desc=f"gpt2-bpe {desc}", unit="line", disable=None, mininterval=5)]


def write_fairseq_dict(model: Path, encoded_train: Iterable[str], path: Path) -> None:
    """``dict.txt`` with every sentencepiece piece (``<unk>`` excluded: fairseq has its own),
    counted over ``encoded_train`` (counts drive ``--freq-weighted-replacement``)."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model))
    counts = Counter(piece for line in encoded_train for piece in line.split())
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
              if not (sp.is_unknown(i) or sp.is_control(i))]
    write_lines(path, (f"{p} {counts.get(p, 0)}" for p in pieces))


Corpora = Dict[str, Dict[str, Sequence[str]]]  # {corpus name: {split: lines}}


def encode_corpora(corpora: Corpora, out: Path, *, gpt2_bpe: Path = None, srcdict: Path = None,
                   spm_model: Path = None, spm_texts: Sequence[str] = (), vocab_size: int,
                   lowercased: bool, counted: Sequence[str] = None,
                   pieces: Callable[[Sequence[str]], List[str]] = None) -> Corpora:
    """Every split of every corpus encoded one way, and ``OUT/dict.txt`` for them all.

    With ``pieces`` (texts -> their space-separated pieces: a BERT release's WordPiece): that, and ``srcdict`` copied.
    With ``gpt2_bpe`` (a released model's directory): fairseq's GPT-2 BPE, and the release's ``srcdict`` copied.
    Else sentencepiece: ``spm_model`` copied to ``OUT/spm.model``, or a model of ``vocab_size`` pieces trained on
    ``spm_texts`` (``OUT/spm.model`` and ``.vocab``; ``vocab_size``: the command's ``--vocab-size``, whose default
    and range are declared there), and ``srcdict`` copied (a model's own dictionary) or a ``dict.txt`` counted over
    the train splits of the corpora named in ``counted`` (every corpus by default). ``lowercased``: whether the corpora's text was
    lower-cased, recorded beside ``OUT/spm.model`` (:mod:`..common.text_case`) for the readers of raw text."""
    if pieces is not None:  # the caller's tokenizer (a BERT release's WordPiece) with the model's own srcdict
        shutil.copyfile(srcdict, out / "dict.txt")
        return {name: {split: pieces(lines) for split, lines in splits.items()} for name, splits in corpora.items()}
    if gpt2_bpe is not None:
        shutil.copyfile(srcdict, out / "dict.txt")
        return {name: {split: encode_gpt2(gpt2_bpe, lines, f"{name}.{split}") for split, lines in splits.items()}
                for name, splits in corpora.items()}
    if spm_model is None:
        print(f"[data] training a sentencepiece model ({vocab_size} pieces) on {len(spm_texts):,} lines", flush=True)
        model = train_sentencepiece(spm_texts, out / "spm", vocab_size)
    else:
        model = out / "spm.model"
        shutil.copyfile(spm_model, model)
    write_case_record(model, lowercased)
    encoded = {name: {split: encode(model, lines, f"{name}.{split}") for split, lines in splits.items()}
               for name, splits in corpora.items()}
    if srcdict is not None:
        shutil.copyfile(srcdict, out / "dict.txt")
    else:
        write_fairseq_dict(model, [line for name in (counted or encoded) for line in encoded[name]["train"]],
                           out / "dict.txt")
    return encoded


def binarize_corpora(corpora: Corpora, text: Path, destdir: Callable[[str], Path], srcdict: Path = None,
                     suffix: str = "tok", workers: int = 2) -> None:
    """Each corpus's splits written as ``TEXT/NAME.SPLIT.SUFFIX`` and binarized into ``destdir(NAME)`` by
    :func:`fairseq_preprocess` (with ``srcdict``, or a dictionary of its own: labels)."""
    for name, splits in corpora.items():
        files = {}
        for split, lines in splits.items():
            files[split] = text / f"{name}.{split}.{suffix}"
            write_lines(files[split], lines)
        print(f"[data] binarizing {name} ({', '.join(files)})", flush=True)
        fairseq_preprocess(destdir(name), files, srcdict=srcdict, workers=workers)


def up_to_date(out: Path, settings: dict) -> bool:
    """Whether ``OUT/manifest.json`` records these settings: the output is then kept as it is (said on stdout)."""
    manifest = out / "manifest.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("settings") == settings:
        print(f"[data] {out} is up to date", flush=True)
        return True
    return False


#: fairseq-preprocess, stopped with its worker processes when the command that started it dies: a
#: command killed with SIGKILL left them running, and they wrote into its temporary directory after
#: the next run had removed it (Linux: the parent-death signal; elsewhere fairseq-preprocess as it is)
PREPROCESS_UNTIL_PARENT_DIES = """\
import ctypes, multiprocessing, os, signal, sys
def stop(*_):
    for child in multiprocessing.active_children():
        child.kill()
    os._exit(1)
signal.signal(signal.SIGTERM, stop)
if sys.platform.startswith("linux"):
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    stop()
sys.argv = ["fairseq-preprocess", *sys.argv[2:]]
from fairseq_cli.preprocess import cli_main
cli_main()
"""


def fairseq_preprocess(destdir: Path, splits: dict, srcdict: Path = None, workers: int = 2,
                       pair: Tuple[str, str] = None) -> None:
    """Run ``fairseq-preprocess --only-source`` on ``{"train": file, "valid": file, ...}`` (or, with ``pair``,
    ``--source-lang SRC --target-lang TGT``, ``srcdict`` on both sides), in a child process that ends with its
    workers when this process dies (:data:`PREPROCESS_UNTIL_PARENT_DIES`)."""
    languages = ["--source-lang", pair[0], "--target-lang", pair[1], "--tgtdict", str(srcdict)] if pair else \
        ["--only-source"]
    args = [sys.executable, "-c", PREPROCESS_UNTIL_PARENT_DIES, str(os.getpid()), *languages,
            "--destdir", str(destdir), "--workers", str(workers)]
    for split, path in splits.items():
        args += [f"--{split}pref", str(path)]
    if srcdict is not None:
        args += ["--srcdict", str(srcdict)]
    result = subprocess.run(args, capture_output=True, text=True)
    # a write the disk refused, raised as such so that atomic_directory names the output in one line:
    # a file-size limit kills the child with SIGXFSZ (Python restores its default action in children)
    if result.returncode == -signal.SIGXFSZ:
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG), str(destdir))
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
        if result.returncode != 0 and os.strerror(code) in result.stderr:
            raise OSError(code, os.strerror(code), str(destdir))
    if result.returncode != 0:
        raise RuntimeError(f"fairseq-preprocess failed for {destdir}:\n{result.stderr[-3000:]}")


def read_items(prefix: Path, dictionary) -> list:
    """Every item of the binarized split ``prefix`` (``PREFIX.{bin,idx}``), as fairseq loads them; a missing split
    is refused naming it."""
    from fairseq.data import data_utils

    dataset = data_utils.load_indexed_dataset(str(prefix), dictionary)
    if dataset is None:
        raise ValueError(f"{prefix}: no binarized split ({prefix}.bin/.idx)")
    return [dataset[i] for i in range(len(dataset))]


def write_items(prefix: Path, items: Iterable, vocab_size: int) -> None:
    """Write ``items`` (1-d tensors or arrays of ids) as the binarized split ``prefix`` (fairseq's mmap format),
    replacing a file or link of that name (a mirror's link is removed, never written through)."""
    import torch
    from fairseq.data import indexed_dataset

    for suffix in (".bin", ".idx"):
        Path(f"{prefix}{suffix}").unlink(missing_ok=True)
    builder = indexed_dataset.make_builder(f"{prefix}.bin", impl="mmap", vocab_size=vocab_size)
    for item in items:
        builder.add_item(torch.as_tensor(item))
    builder.finalize(f"{prefix}.idx")
