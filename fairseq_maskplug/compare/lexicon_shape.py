"""The renamed-lexicon shape's files (issue 100): ``fairseq-maskplug-rename-lexicon``'s work, its inputs checked before
any work, the shape written atomically (:mod:`fairseq_maskplug.data.renamed_lexicon` holds the pure pieces; the command's
help says what it writes)."""

import json
from pathlib import Path

import numpy as np

COMMAND = "fairseq-maskplug-rename-lexicon"
#: (word-start mark, continuation mark) of the dictionaries pseudo-words are made for (renamed_lexicon.letter_pieces)
MARKS = {"sentencepiece": ("\u2581", ""), "wordpiece": ("", "##")}


def token_splits(folder: Path) -> list:
    """The binarized token splits of a folder (``NAME.idx`` with no dot in NAME: not a producer's track)."""
    return sorted(p.stem for p in folder.glob("*.idx") if "." not in p.stem)


def check_inputs(args) -> dict:
    """Every folder's dictionary, refused in one line before any work where one is missing or differs from the
    task's (token ids would mean other words), and ``--out``; returns the dictionary, the token folders by option and
    the dictionary's fingerprint."""
    from ..common.atomic import check_output_directory
    from ..data.dictionaries import dictionary_sha256, load_dictionary

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


def write_shape(args) -> int:
    from fairseq.data import Dictionary

    from .views import mirror, unlink_split_links
    from ..data import renamed_lexicon as lexicon
    from ..data.word_boundaries import word_start_symbols
    from ..tools.binarize import atomic_directory, read_items, write_items

    checked = check_inputs(args)
    dictionary, folders = checked["dictionary"], checked["folders"]
    starts, boundaries = word_start_symbols(dictionary)
    if boundaries not in MARKS:
        raise ValueError(f"--task {args.task}: its dictionary's words are {boundaries}'s; pseudo-words are made "
                         "of sentencepiece or WordPiece pieces only")
    marks = MARKS[boundaries]
    nspecial, symbols = dictionary.nspecial, dictionary.symbols

    def text(word):
        return "".join(symbols[i] for i in word)

    def eligible(word):  # a word of letters: not punctuation, not a number
        return "".join(bare(symbols[i]) for i in word).isalpha()

    def bare(symbol):  # the piece without its word-start or continuation mark
        mark = next((m for m in marks if m and symbol.startswith(m)), "")
        return symbol[len(mark):]

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
                                         for pieces in lexicon.letter_pieces(symbols, nspecial, *marks))
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
        seen_types = len(set().union(*words_in["train"]))
        if not unseen.size:  # an empty split would fail every unit's scoring later, far from its cause
            raise ValueError(f"--task {args.task}: no test item holds a pseudo-word that its train split never holds "
                             f"(the train split holds {seen_types} of the {len(chosen)} "
                             "renamed types, the test items none of the others): rename more word types (--words) or "
                             "keep fewer train examples")
        record["test_unseen"] = {
            "items": int(unseen.size), "of_test": len(words_in["test"]),
            "with_pseudo_words": sum(1 for words in words_in["test"] if words),
            "with_only_unseen": int(lexicon.unseen_items(words_in["test"], words_in["train"], every=True).size),
            "types_in_train": seen_types}
    with atomic_directory(args.out, COMMAND) as tmp:
        task, corpus = tmp / "task", tmp / "corpus"
        mirror(args.task, task)
        mirror(args.corpus, corpus)
        unlink_split_links(task / "input0", out["--task"])
        unlink_split_links(corpus, out["--corpus"])
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
            unlink_split_links(shuffled, out["--corpus"])
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
    from ..data.renamed_lexicon import word_positions

    return int(sum(word_positions(item, pseudo, starts, nspecial).sum() for item in items))

