"""A renamed lexicon (issue 100): the shape where in-domain continued pre-training must help. The word types that
carry a labelled task's labels most are replaced by fresh pseudo-words in the task's text and in the unlabelled
in-domain corpus, never in the general corpus (:mod:`fairseq_maskplug.data.renamed_lexicon`).

    fairseq-maskplug-rename-lexicon --task TASK --corpus INDOMAIN --general GENERAL --select-from FULL_TASK \\
        --words 300 --out LEXICON

The words are chosen by their z-scored log-odds between each class and the rest on ``--select-from``'s train split
(default: the task's own; Monroe et al. 2008), ``--words`` in all shared evenly among the classes. With a small
task copy (``fairseq-maskplug-subsample-task``) and ``--select-from`` the full task, the labelled train split holds
only part of the renamed lexicon: the test items whose pseudo-words it never holds are written as the split
``test_unseen``: those holding a pseudo-word that the train split never holds (what that word means can come only
from the unlabelled text). Every pseudo-word is the dictionary's own
short letter pieces in an order no corpus read holds as a word (``--general`` is read for that and never written).

OUT (a new or empty folder, or this command's earlier output, replaced atomically):

    task/             the task with every input0 split renamed, plus input0/ and label/ test_unseen
    corpus/           the in-domain corpus, every split renamed
    corpus-shuffled/  (--shuffled-corpus) the renamed corpus with its words permuted across all its lines
    lexicon.json      the sources and their dictionary's fingerprint, the options, every renamed word with its
                      pseudo-word, class and z, and how many tokens each split had renamed

Tracks of the replaced splits (a producer's side information) are not carried over: they would not align; make them
on the copy. The labels are carried over as links (the lines do not move)."""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from fairseq_maskplug.common.option_ranges import number

from . import HelpFormatter, add_version, command_main

COMMAND = "fairseq-maskplug-rename-lexicon"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__, formatter_class=HelpFormatter)
    add_version(parser)
    parser.add_argument("--task", type=Path, required=True,
                        help="the labelled task renamed: input0/ and label/ as fairseq-maskplug-prepare-text writes them")
    parser.add_argument("--corpus", type=Path, required=True,
                        help="the unlabelled in-domain corpus renamed (a masked-LM folder: dict.txt and its splits)")
    parser.add_argument("--general", type=Path, default=None,
                        help="the general corpus (read only): no pseudo-word is a word of it")
    parser.add_argument("--select-from", type=Path, default=None,
                        help="the labelled task whose train split chooses the words (default: --task)")
    parser.add_argument("--words", type=number("[2, inf)", int), default=300,
                        help="word types renamed, shared evenly among the classes (ours: issue 100's 'few hundred')")
    parser.add_argument("--pieces", type=number("[2, 8]", int), default=3,
                        help="pieces per pseudo-word: a word-start piece and continuation pieces (ours)")
    parser.add_argument("--prior", type=number("(0, inf)"), default=500.0,
                        help="total weight of the log-odds' Dirichlet prior, shared by the pooled word frequencies "
                             "(Monroe et al. 2008, equation 22; the value is ours)")
    parser.add_argument("--shuffled-corpus", action="store_true",
                        help="also write corpus-shuffled/: the renamed corpus with its words permuted across lines "
                             "(the harm control)")
    parser.add_argument("--seed", type=number("[0, inf)", int), default=0,
                        help="seed of the pseudo-words and of the shuffle")
    parser.add_argument("--out", type=Path, required=True,
                        help="a new or empty folder, or this command's earlier output (replaced)")
    return parser.parse_args(argv)


def token_splits(folder: Path) -> list:
    """The binarized token splits of a folder (``NAME.idx`` with no dot in NAME: not a producer's track)."""
    return sorted(p.stem for p in folder.glob("*.idx") if "." not in p.stem)


def check_inputs(args) -> dict:
    """Every folder's dictionary, refused in one line before any work where one is missing or differs from the
    task's (token ids would mean other words), and ``--out``; returns the dictionary, the token folders by option and
    the dictionary's fingerprint."""
    from fairseq_maskplug.common.atomic import check_output_directory
    from fairseq_maskplug.data.dictionaries import dictionary_sha256, load_dictionary

    args.select_from = args.select_from or args.task
    given = {"--task": args.task, "--select-from": args.select_from, "--corpus": args.corpus, "--general": args.general}
    given = {option: path for option, path in given.items() if path is not None}
    for option in ("--task", "--select-from"):
        if not (given[option] / "label" / "dict.txt").is_file():
            raise ValueError(f"{option} {given[option]}: not a labelled task (no label/dict.txt)")
    folders = {option: path / "input0" if option in ("--task", "--select-from") else path
               for option, path in given.items()}
    dictionaries = {option: load_dictionary(str(folder), option) for option, folder in folders.items()}
    fingerprint = dictionary_sha256(dictionaries["--task"])
    for option, dictionary in dictionaries.items():
        if dictionary_sha256(dictionary) != fingerprint:
            raise ValueError(f"{option} {folders[option]}/dict.txt differs from --task's input0/dict.txt: the "
                             "corpora must share one dictionary")
        if not token_splits(folders[option]):
            raise ValueError(f"{option} {folders[option]}: no binarized split (NAME.bin/.idx)")
    if "train" not in token_splits(folders["--select-from"]):
        raise ValueError(f"--select-from {folders['--select-from']}: no train split to choose the words from")
    check_output_directory(args.out, "--out", COMMAND, others=[(o, str(p)) for o, p in given.items()])
    return {"dictionary": dictionaries["--task"], "folders": folders, "fingerprint": fingerprint}


def write(args) -> int:
    from fairseq.data import Dictionary

    from fairseq_maskplug.compare.views import mirror
    from fairseq_maskplug.data import renamed_lexicon as lexicon
    from fairseq_maskplug.data.word_boundaries import SPM_SPACE, word_start_symbols
    from fairseq_maskplug.tools.binarize import atomic_directory, read_items, write_items

    checked = check_inputs(args)
    dictionary, folders = checked["dictionary"], checked["folders"]
    starts, boundaries = word_start_symbols(dictionary)
    if boundaries != "sentencepiece":
        raise ValueError(f"--task {args.task}: its dictionary's words are {boundaries}'s; pseudo-words are made "
                         "of sentencepiece pieces only")
    nspecial, symbols = dictionary.nspecial, dictionary.symbols

    def text(word):
        return "".join(symbols[i] for i in word)

    def eligible(word):  # a word of letters: not punctuation, not a number
        return text(word).replace(SPM_SPACE, "").isalpha()

    label_dictionary = Dictionary.load(str(args.select_from / "label" / "dict.txt"))
    select_items = read_items(folders["--select-from"] / "train", dictionary)
    labels = [int(item[0]) for item in read_items(args.select_from / "label" / "train", label_dictionary)]
    types, counts = lexicon.class_word_counts(select_items, labels, starts, nspecial, eligible)
    z = lexicon.label_log_odds(counts, args.prior)
    chosen = lexicon.choose_lexicon(z, args.words)
    if len(chosen) < args.words:
        raise ValueError(f"--words {args.words}: {args.select_from}'s train split has only {len(chosen)} word types "
                         "associated with a class")
    classes = sorted(set(labels))
    corpora = {option: {split: read_items(folder / split, dictionary) for split in token_splits(folder)}
               for option, folder in folders.items() if option != "--select-from"}
    forbidden = {word for splits in corpora.values() for items in splits.values() for item in items
                 for word in lexicon.split_words(item, starts, nspecial)}
    # no piece of a renamed word in a pseudo-word: its embedding would carry the word's meaning over
    theirs = {piece for w, _ in chosen for piece in types[w]}
    start_pieces, continuation_pieces = ([i for i in pieces if i not in theirs]
                                         for pieces in lexicon.letter_pieces(symbols, nspecial, SPM_SPACE))
    rng = np.random.default_rng(args.seed)
    fresh = lexicon.pseudo_words(len(chosen), start_pieces, continuation_pieces, args.pieces, forbidden, rng)
    renamed = {types[w]: pseudo for (w, _), pseudo in zip(chosen, fresh)}
    pseudo = set(renamed.values())
    out = {option: {split: [lexicon.rename(item, renamed, starts, nspecial) for item in items]
                    for split, items in corpora[option].items()} for option in ("--task", "--corpus")}
    vocab = len(dictionary)
    words_in = {split: lexicon.words_present(items, pseudo, starts, nspecial) for split, items in out["--task"].items()}
    record = {"command": COMMAND, "seed": args.seed, "words": args.words, "pieces": args.pieces, "prior": args.prior,
              "dictionary_sha256": checked["fingerprint"],
              "sources": {option: str(Path(folder).resolve()) for option, folder in
                          (("--task", args.task), ("--corpus", args.corpus), ("--general", args.general),
                           ("--select-from", args.select_from)) if folder is not None},
              "lexicon": [{"word": text(types[w]), "pseudo_word": " ".join(symbols[i] for i in renamed[types[w]]),
                           "class": label_dictionary[classes[c]], "z": round(float(z[w, c]), 4),
                           "select_count": int(counts[w].sum())} for (w, c) in chosen],
              "renamed_tokens": {f"{name}/{split}": renamed_tokens(items, pseudo, starts, nspecial)
                                 for name, option in (("task", "--task"), ("corpus", "--corpus"))
                                 for split, items in out[option].items()}}
    unseen = None
    if "train" in words_in and "test" in words_in:
        unseen = lexicon.unseen_items(words_in["test"], words_in["train"])
        record["test_unseen"] = {
            "items": int(unseen.size), "of_test": len(words_in["test"]),
            "with_pseudo_words": sum(1 for words in words_in["test"] if words),
            "with_only_unseen": int(lexicon.unseen_items(words_in["test"], words_in["train"], every=True).size),
            "types_in_train": len(set().union(*words_in["train"]))}
    with atomic_directory(args.out, COMMAND) as tmp:
        task, corpus = tmp / "task", tmp / "corpus"
        mirror(args.task, task)
        mirror(args.corpus, corpus)
        _drop_stale_links(task / "input0", out["--task"])
        _drop_stale_links(corpus, out["--corpus"])
        for split, items in out["--task"].items():
            write_items(task / "input0" / split, items, vocab)
        for split, items in out["--corpus"].items():
            write_items(corpus / split, items, vocab)
        if unseen is not None:
            task_labels = Dictionary.load(str(args.task / "label" / "dict.txt"))
            test_labels = read_items(args.task / "label" / "test", task_labels)
            write_items(task / "input0" / "test_unseen", (out["--task"]["test"][i] for i in unseen), vocab)
            write_items(task / "label" / "test_unseen", (test_labels[i] for i in unseen), len(task_labels))
        if args.shuffled_corpus:
            shuffled = tmp / "corpus-shuffled"
            mirror(args.corpus, shuffled)
            _drop_stale_links(shuffled, out["--corpus"])
            for split, items in out["--corpus"].items():
                write_items(shuffled / split, lexicon.shuffle_words(items, starts, nspecial, rng), vocab)
        (tmp / "lexicon.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    unseen_note = (f"; {record['test_unseen']['items']} of {record['test_unseen']['of_test']} test items hold a "
                   "pseudo-word the train split never holds (test_unseen)") if "test_unseen" in record else ""
    print(f"{COMMAND}: {len(chosen)} word types renamed in {args.task} and {args.corpus}{unseen_note}; "
          f"into {args.out}")
    return 0


def renamed_tokens(items, pseudo, starts, nspecial) -> int:
    """How many tokens of ``items`` lie inside a pseudo-word."""
    from fairseq_maskplug.data.renamed_lexicon import word_positions

    return int(sum(word_positions(item, pseudo, starts, nspecial).sum() for item in items))


def _drop_stale_links(folder: Path, replaced: dict) -> None:
    """Remove the links of ``folder`` to a replaced split's files (its tokens and any track of it)."""
    for link in folder.iterdir():
        if link.is_symlink() and link.name.split(".", 1)[0] in replaced:
            link.unlink()


main = command_main(parse_args, write)


if __name__ == "__main__":
    sys.exit(main())
