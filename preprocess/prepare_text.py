"""Your own text -> the binarized layouts every method of this package reads.

    fairseq-maskplug-prepare-text --out data \\
        --unlabelled reviews my/reviews.train.txt my/reviews.valid.txt \\
        --labelled sentiment my/sentiment.train.tsv my/sentiment.valid.tsv my/sentiment.test.tsv

- ``--unlabelled NAME TRAIN VALID``: one text per line -> ``OUT/NAME/`` in the masked-LM layout
  (``dict.txt``, ``train``/``valid``), what ``guided_mlm``, ``selective_mlm``, ``fe_mlm``,
  ``guided_denoising`` and the span producers read;
- ``--labelled NAME TRAIN VALID [TEST]``: ``label<TAB>text`` per line -> ``OUT/NAME/input0`` and
  ``OUT/NAME/label``, fairseq's sentence_prediction layout, what fine-tuning,
  ``joint_mlm_classification``, ``tlm``, the buffer scorer and ``evaluate`` read.

Both may be repeated. Every corpus shares one sentencepiece model (``OUT/spm.model``, a unigram
model trained on the training texts, ``--vocab-size``; or ``--spm-model`` to reuse one) and one
``OUT/dict.txt``. ``--like MODEL`` writes the data a model reads: its own tokenizer (the sentencepiece model its
data was written with, a release's GPT-2 BPE, or a converted BERT's WordPiece ``vocab.txt``) and its own ``dict.txt``, and its data's lower-casing, found as
``fairseq-maskplug-convert --from-fairseq`` finds them; that is what ``fairseq-maskplug-compare`` needs of one's
own text for a general model (a checkpoint, or a release folder such as ``--from-hf``'s). Lines are whitespace-normalised, and lower-cased with ``--lowercase`` (recorded in
``OUT/spm.text.json``, which the Hugging Face export reads); ``OUT/text/NAME.SPLIT.txt`` holds each split's
text exactly as its tokens spell it (what ``salient-spans --text``, ``span-labels --text`` and
``retrieve`` take) and ``NAME.SPLIT.tok`` its pieces. An empty line, a labelled line without a
tab or with an empty text is refused, naming file and line, before any work. The output is
written atomically (the rule of every directory a command writes: new, empty, or its own
earlier output); a rerun replaces only what this command wrote and keeps every other file there (the
producers' tracks, files of your own), and refuses, naming them, to leave a track whose split's tokens changed.

At scale: sentencepiece trains (on at most 2M sampled lines) and encodes on every core of the machine, and
``--workers`` binarizes in that many processes. One output directory holds one dictionary counted over all
the training text, so this command runs on one machine; several machines' worth of text goes into several
such directories (fairseq reads ``DATA1:DATA2``; give them one ``--spm-model``).
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Tuple

from fairseq_maskplug.common.option_ranges import number
from fairseq_maskplug.common.text_lines import utf8_lines

from . import HelpFormatter, add_version, command_main

COMMAND = "fairseq-maskplug-prepare-text"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    add_version(parser)
    parser.add_argument("--out", type=Path, required=True,
                        help="output directory: new, empty, or this command's earlier output (replaced atomically)")
    parser.add_argument("--unlabelled", nargs=3, action="append", default=[], metavar=("NAME", "TRAIN", "VALID"),
                        help="a corpus of one text per line -> OUT/NAME (masked-LM layout)")
    parser.add_argument("--labelled", nargs="+", action="append", default=[], metavar="NAME TRAIN VALID [TEST]",
                        help="label<TAB>text per line -> OUT/NAME/input0 and OUT/NAME/label (sentence_prediction)")
    parser.add_argument("--vocab-size", type=number("[1, inf)", int), default=8000,
                        help="sentencepiece vocabulary size (with no --spm-model)")
    parser.add_argument("--spm-model", type=Path, default=None,
                        help="an existing sentencepiece model to encode with instead of training one")
    parser.add_argument("--like", type=Path, default=None, metavar="MODEL",
                        help="encode as the data of MODEL (a checkpoint, or a release folder with model.pt): its "
                             "tokenizer, its dict.txt and its lower-casing, so that the model reads the output")
    parser.add_argument("--lowercase", action="store_true",
                        help="lower-case every text before anything else (off: the text's case is kept); recorded "
                             "beside spm.model (spm.text.json), so the Hugging Face tokenizer the export writes "
                             "lower-cases raw text as well")
    parser.add_argument("--workers", type=number("[1, inf)", int), default=2,
                        help="fairseq-preprocess worker processes (ours: 2; sentencepiece trains and encodes on "
                             "every core by itself); the output does not depend on it")
    args = parser.parse_args(argv)
    if args.like is not None and (args.spm_model is not None or args.lowercase):
        parser.error("--like takes the model's tokenizer and lower-casing: give no --spm-model or --lowercase")
    for entry in args.labelled:
        if len(entry) not in (3, 4):
            parser.error(f"--labelled {' '.join(entry)}: give NAME TRAIN VALID [TEST]")
    names = [entry[0] for entry in args.unlabelled + args.labelled]
    if not names:
        parser.error("give at least one --unlabelled or --labelled corpus")
    if len(set(names)) != len(names) or set(names) & {"text", "dict.txt", "vocab.txt", "spm.model", "spm.vocab", "spm.text.json"}:
        parser.error(f"corpus names must differ from each other and from text, dict.txt, vocab.txt, spm.*: {names}")
    return args


def read_unlabelled(path: Path, lowercase: bool = False) -> List[str]:
    """The lines of ``path``, whitespace-normalised (and lower-cased with ``lowercase``); an empty line is refused
    with ``path:line``."""
    lines = []
    for number_, line in enumerate(utf8_lines(path), start=1):
        text = " ".join(line.split())
        text = text.lower() if lowercase else text
        if not text:
            raise ValueError(f"{path}:{number_}: empty line (every line is one text)")
        lines.append(text)
    if not lines:
        raise ValueError(f"{path}: no lines")
    return lines


def read_labelled(path: Path, lowercase: bool = False) -> List[Tuple[str, str]]:
    """``(label, text)`` of each ``label<TAB>text`` line of ``path`` (the text lower-cased with ``lowercase``, the
    label never), refused with ``path:line``."""
    rows = []
    for number_, line in enumerate(utf8_lines(path), start=1):
        label, tab, text = line.rstrip("\n").partition("\t")
        text = " ".join(text.split())
        text = text.lower() if lowercase else text
        if not tab or not label.strip() or not text or " " in label.strip():
            raise ValueError(f"{path}:{number_}: expected label<TAB>text (a one-word label and a non-empty text)")
        rows.append((label.strip(), text))
    if not rows:
        raise ValueError(f"{path}: no lines")
    return rows


def read_corpora(args) -> Tuple[Dict[str, Dict[str, List[str]]], Dict[str, Dict[str, List[str]]]]:
    """``(texts, labels)``: per corpus and split, the texts and (labelled corpora) their labels,
    every file read and checked before any work."""
    texts, labels = {}, {}
    for name, train, valid in args.unlabelled:
        texts[name] = {"train": read_unlabelled(Path(train), args.lowercase),
                       "valid": read_unlabelled(Path(valid), args.lowercase)}
    for name, *files in args.labelled:
        texts[name], labels[name] = {}, {}
        for split, path in zip(("train", "valid", "test"), files):
            rows = read_labelled(Path(path), args.lowercase)
            labels[name][split] = [label for label, _ in rows]
            texts[name][split] = [text for _, text in rows]
        unknown = set(labels[name]["valid"] + labels[name].get("test", [])) - set(labels[name]["train"])
        if unknown:
            raise ValueError(f"--labelled {name}: labels {sorted(unknown)} are not in its training file")
    return texts, labels


def prepare(args) -> int:
    """The command's work: every file read and checked, then the output written atomically; returns 0."""
    from fairseq_maskplug.common.atomic import check_output_directory
    from fairseq_maskplug.tools.binarize import atomic_directory, binarize_corpora, encode_corpora, write_lines

    inputs = [(f"--unlabelled {e[0]}", p) for e in args.unlabelled for p in e[1:]]
    inputs += [(f"--labelled {e[0]}", p) for e in args.labelled for p in e[1:]]
    check_output_directory(args.out, "--out", COMMAND, [*inputs, ("--spm-model", args.spm_model),
                                                        ("--like", args.like)])
    if args.spm_model is not None and not args.spm_model.is_file():
        raise FileNotFoundError(f"--spm-model {args.spm_model}: no such file")
    like = model_encoding(args.like) if args.like is not None else None
    if like is not None and like.spm_model is not None:
        from fairseq_maskplug.common.text_case import is_lowercased
        args.lowercase, args.spm_model = is_lowercased(like.spm_model), like.spm_model
    if like is not None and like.wordpiece_dir is not None:  # BERT's basic tokenizer lower-cases an uncased model's
        from fairseq_maskplug.interop.tokenizer import wordpiece_lowercase
        args.lowercase = wordpiece_lowercase(like.wordpiece_dir)
    texts, labels = read_corpora(args)
    with atomic_directory(args.out, COMMAND, keep_others=True) as out:
        text_dir = out / "text"
        text_dir.mkdir()
        training = [line for splits in texts.values() for line in splits["train"]]
        encoded = encode_corpora(texts, out, spm_model=args.spm_model, spm_texts=training,
                                 vocab_size=args.vocab_size, lowercased=args.lowercase,
                                 gpt2_bpe=like.bpe_dir if like else None, srcdict=like.dict_path if like else None,
                                 pieces=wordpiece(like.wordpiece_dir, out) if like and like.wordpiece_dir else None)
        for name, splits in texts.items():
            for split, lines in splits.items():
                write_lines(text_dir / f"{name}.{split}.txt", lines)
        binarize_corpora(encoded, text_dir, lambda name: out / name / "input0" if name in labels else out / name,
                         srcdict=out / "dict.txt", workers=args.workers)
        binarize_corpora(labels, text_dir, lambda name: out / name / "label", suffix="label", workers=args.workers)
        manifest = {"corpora": {name: {split: len(lines) for split, lines in splits.items()}
                                for name, splits in texts.items()},
                    "labelled": sorted(labels), "spm_model": str(args.spm_model or ("none (WordPiece)" if like and like.wordpiece_dir else "trained")),
                    **({"like": str(args.like)} if like else {}),
                    "vocab_size": args.vocab_size, "lowercase": args.lowercase}
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"[data] wrote {args.out}: {json.dumps(manifest['corpora'])}", flush=True)
    return 0


def wordpiece(release: Path, out: Path):
    """A converted BERT's tokenizer (:func:`fairseq_maskplug.interop.tokenizer.wordpiece_pieces`), its ``vocab.txt``
    copied into ``out`` beside ``dict.txt``."""
    import shutil
    from functools import partial

    from fairseq_maskplug.interop.tokenizer import wordpiece_pieces

    shutil.copyfile(release / "vocab.txt", out / "vocab.txt")
    print("[data] WordPiece (the model's vocab.txt)", flush=True)
    return partial(wordpiece_pieces, release)


def model_encoding(model: Path):
    """How ``model``'s data spells text (:func:`fairseq_maskplug.interop.convert.model_text_ids`), each problem
    one line naming ``--like``."""
    from fairseq_maskplug.interop.convert import model_text_ids

    try:
        return model_text_ids(model)
    except (ValueError, OSError, KeyError) as error:
        raise ValueError(f"--like {model}: {error}") from None


main = command_main(parse_args, prepare, errors=(ValueError, OSError, RuntimeError))


if __name__ == "__main__":
    sys.exit(main())
