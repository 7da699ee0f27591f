"""The renamed lexicon (issue 100): the log-odds against a direct computation, the lexicon's quotas, pseudo-words
that are no word of any corpus, renaming that loses nothing, the harm's shuffle, the unseen test items; and the
command on sentencepiece-style data binarized by fairseq-preprocess, with its refusals before any work."""

import json
import numpy as np
import pytest

from fairseq_helpers import BIN, check, run
from fairseq_maskplug.data import renamed_lexicon as lexicon

S = "\u2581"

#: a toy dictionary: 4 specials, then pieces (True: a word-start piece)
SYMBOLS = ["<s>", "<pad>", "</s>", "<unk>", f"{S}gr", "eat", f"{S}dull", f"{S}the", f"{S}q", "z", "ka", f"{S}x"]
STARTS = np.array([True] * 4 + [s.startswith(S) for s in SYMBOLS[4:]])


def test_split_words_keeps_pieces_together_and_specials_alone():
    # <s> ▁gr eat ▁the eat </s> : "eat" after a special starts a word of its own
    assert lexicon.split_words([0, 4, 5, 7, 2, 5, 2], STARTS, 4) == [(0,), (4, 5), (7,), (2,), (5,), (2,)]


def test_log_odds_match_the_formula_and_are_opposite_for_two_classes():
    counts = np.array([[30, 2], [5, 25], [10, 12], [1, 0]])
    prior = 40.0
    z = lexicon.label_log_odds(counts, prior)
    # word 0, class 0, written out: a = a0 * y / n with the pooled counts
    y, n = counts.sum(1), counts.sum()
    a = prior * y[0] / n
    n0, n1 = counts[:, 0].sum(), counts[:, 1].sum()
    delta = np.log((30 + a) / (n0 + prior - 30 - a)) - np.log((2 + a) / (n1 + prior - 2 - a))
    assert z[0, 0] == pytest.approx(delta / np.sqrt(1 / (30 + a) + 1 / (2 + a)), rel=1e-12)
    np.testing.assert_allclose(z[:, 0], -z[:, 1], rtol=1e-12)
    assert z[0, 0] > 3 and z[1, 1] > 3 and abs(z[2, 0]) < 1 and abs(z[3, 0]) < 1  # rare words shrink to 0
    for bad in (np.zeros((0, 2)), np.ones((3, 1)), -np.ones((2, 2))):
        with pytest.raises(ValueError):
            lexicon.label_log_odds(bad, 1.0)
    with pytest.raises(ValueError, match="prior"):
        lexicon.label_log_odds(counts, float("nan"))


def test_choose_lexicon_shares_the_words_among_the_classes_once_each():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(50, 3))
    chosen = lexicon.choose_lexicon(z, 10)
    per_class = [sum(1 for _, c in chosen if c == k) for k in range(3)]
    assert per_class == [4, 3, 3] and len({w for w, _ in chosen}) == 10
    for k in range(3):  # each class's words are its largest z above 0, in decreasing order
        mine = [w for w, c in chosen if c == k]
        assert all(z[w, k] > 0 for w in mine) and list(z[mine, k]) == sorted(z[mine, k], reverse=True)
    only_two = np.array([[2.0, -2.0], [-1.0, 1.0], [0.5, -0.5]])
    assert lexicon.choose_lexicon(only_two, 6) == [(0, 0), (2, 0), (1, 1)]  # no word with z <= 0 for its class
    with pytest.raises(ValueError):
        lexicon.choose_lexicon(z, 0)


def test_pseudo_words_are_distinct_seeded_and_never_forbidden():
    starts, continuations = list(range(10, 20)), list(range(20, 30))
    forbidden = {(10, 20, 21), (11, 22, 23)} | {(s, 20, 20) for s in starts}
    words = lexicon.pseudo_words(300, starts, continuations, 3, forbidden, np.random.default_rng(5))
    assert len(set(words)) == 300 and not set(words) & forbidden
    assert all(w[0] in starts and all(p in continuations for p in w[1:]) for w in words)
    assert words == lexicon.pseudo_words(300, starts, continuations, 3, forbidden, np.random.default_rng(5))
    with pytest.raises(ValueError, match="only 4 of 5"):  # 2 starts x 2 continuations make 4 words of 2 pieces
        lexicon.pseudo_words(5, [10, 11], [20, 21], 2, set(), np.random.default_rng(0))


def test_letter_pieces_are_short_lowercase_letters():
    starts, continuations = lexicon.letter_pieces(SYMBOLS + [f"{S}Ab", "k9", "long"], 4, S)
    assert [SYMBOLS[i] for i in starts] == [f"{S}gr", f"{S}the", f"{S}q", f"{S}x"]  # not ▁dull (4 letters), ▁Ab
    assert [SYMBOLS[i] for i in continuations] == ["eat", "z", "ka"]


def test_wordpiece_letter_pieces_start_bare_and_continue_with_hashes():
    """BERT's WordPiece marks continuations (``##``) where sentencepiece marks starts: the same pieces by its marks."""
    symbols = ["<s>", "<pad>", "</s>", "<unk>", "gr", "##eat", "the", "##z", "dull", "##ing", "#", "##9", "Ab"]
    starts, continuations = lexicon.letter_pieces(symbols, 4, "", "##")
    assert [symbols[i] for i in starts] == ["gr", "the"]  # not dull (4 letters), #, Ab
    assert [symbols[i] for i in continuations] == ["##eat", "##z", "##ing"]
    with pytest.raises(ValueError, match="exactly one"):
        lexicon.letter_pieces(symbols, 4, "", "")


def test_rename_replaces_whole_words_only_and_inverts():
    renamed = {(4, 5): (8, 9, 10), (6,): (11, 10)}
    item = [0, 4, 5, 7, 6, 4, 2]  # <s> ▁gr eat ▁the ▁dull ▁gr </s>: the lone ▁gr is another word
    out = lexicon.rename(item, renamed, STARTS, 4)
    assert out.tolist() == [0, 8, 9, 10, 7, 11, 10, 4, 2]
    back = lexicon.rename(out, {v: k for k, v in renamed.items()}, STARTS, 4)
    assert back.tolist() == item


def test_unseen_items_hold_a_pseudo_word_the_train_split_never_holds():
    a, b, c = (8, 9), (11, 10), (8, 10)
    test = [{a}, {b}, set(), {a, c}, {c}]
    assert lexicon.unseen_items(test, [{a}, set()]).tolist() == [1, 3, 4]  # 3 holds c beside the seen a
    assert lexicon.unseen_items(test, [{a}, set()], every=True).tolist() == [1, 4]
    assert lexicon.unseen_items(test, []).tolist() == [0, 1, 3, 4]


def test_shuffle_keeps_each_line_s_words_and_specials_but_not_their_neighbours():
    """Every word and its pieces survive, each line keeps its special symbols in place and its number of words, and
    two words that always stand together in the text meet no more than chance allows once shuffled."""
    rng = np.random.default_rng(1)
    starts = np.array([True] * 4 + [True] * 40 + [False] * 10)  # ids 4..43 start words, 44..53 continue them
    items = []
    for _ in range(400):
        words = [[int(rng.integers(6, 44))] + ([int(rng.integers(44, 54))] if rng.random() < 0.3 else [])
                 for _ in range(int(rng.integers(3, 10)))]
        items.append(np.array([0, 4, 5, *[t for w in words for t in w], 2]))  # 4 5: the pair always together
    shuffled = lexicon.shuffle_words(items, starts, 4, np.random.default_rng(2))
    before = [lexicon.split_words(i, starts, 4) for i in items]
    after = [lexicon.split_words(i, starts, 4) for i in shuffled]
    assert sorted(w for ws in before for w in ws) == sorted(w for ws in after for w in ws)
    assert all(len(x) == len(y) and x[0] == y[0] == (0,) and x[-1] == y[-1] == (2,) for x, y in zip(before, after))
    pairs = sum(1 for ws in after for x, y in zip(ws, ws[1:]) if (x, y) == ((4,), (5,)))
    # chance: each of ~2,700 neighbouring word pairs is (4, 5) with probability about (400/2,800)^2, about 55 in
    # all; 400 (every line before) would mean the pair stayed together
    assert pairs < 120


# ----------------------------------------------------------------------------------------------- the command

POSITIVE = [f"{S}gr eat", f"{S}fun", f"{S}lov ely"]
NEGATIVE = [f"{S}aw ful", f"{S}dull", f"{S}ba d"]
FILLER = [f"{S}the", f"{S}mo vie", f"{S}is", f"{S}a", f"{S}q z", f"{S}k x", f"{S}zu ka", f"{S}pi xo", f"{S}w1",
          f"{S}ro ta", f"{S}ne mi", f"{S}ju", "."]


def sentence(rng, label):
    words = list(rng.choice(FILLER, size=int(rng.integers(3, 8))))
    cue = POSITIVE if label == "pos" else NEGATIVE
    words.insert(int(rng.integers(len(words) + 1)), str(rng.choice(cue)))
    return " ".join(words)


@pytest.fixture(scope="module")
def shape(tmp_path_factory):
    """A sentencepiece-style labelled task (a cue word of its class in every line), an in-domain corpus of such
    lines, and a general corpus of filler only, binarized with one dictionary."""
    root = tmp_path_factory.mktemp("lexicon")
    rng = np.random.default_rng(0)
    text = {}
    for split, n in (("train", 60), ("valid", 20), ("test", 80)):
        labels = [str(rng.choice(["pos", "neg"])) for _ in range(n)]
        text[split] = ([sentence(rng, label) for label in labels], labels)
    corpus = [sentence(rng, str(rng.choice(["pos", "neg"]))) for _ in range(120)]
    general = [" ".join(rng.choice(FILLER, size=6)) for _ in range(100)]
    everything = [line for lines, _ in text.values() for line in lines] + corpus + general
    (root / "all.txt").write_text("\n".join(everything) + "\n")
    check(run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", root / "all.txt", "--destdir",
               root / "dict", "--workers", "1"]))
    srcdict = root / "dict" / "dict.txt"

    def binarize(dest, **splits):
        args = []
        for split, lines in splits.items():
            (root / f"{dest.name}.{split}.txt").write_text("\n".join(lines) + "\n")
            args += [f"--{split}pref", root / f"{dest.name}.{split}.txt"]
        check(run([BIN / "fairseq-preprocess", "--only-source", *args, "--destdir", dest, "--workers", "1",
                   *(["--srcdict", srcdict] if srcdict else [])]))

    binarize(root / "task" / "input0", **{s: lines for s, (lines, _) in text.items()})
    srcdict = None
    binarize(root / "task" / "label", **{s: labels for s, (_, labels) in text.items()})
    srcdict = root / "dict" / "dict.txt"
    binarize(root / "corpus", train=corpus[:100], valid=corpus[100:])
    binarize(root / "general", train=general[:80], valid=general[80:])
    # a small copy of the task whose train split holds few of the cue words
    check(run([BIN / "fairseq-maskplug-subsample-task", "--data", root / "task", "--train-examples", "4",
               "--rest-to-test", "--out", root / "task-4"]))
    return root


def read_lines(prefix):
    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(str(prefix.parent / "dict.txt"))
    dataset = data_utils.load_indexed_dataset(str(prefix), dictionary)
    return [dictionary.string(dataset[i]) for i in range(len(dataset))]


def spelled_words(line):
    """The words of a line of pieces, spelled out without the word-start mark."""
    return [w for w in line.replace(" ", "").split(S) if w]


def lexicon_command(shape, out, *extra):
    return run([BIN / "fairseq-maskplug-rename-lexicon", "--task", shape / "task-4", "--select-from", shape / "task",
                "--corpus", shape / "corpus", "--general", shape / "general", "--words", "6", "--out", out, *extra])


def test_the_command_renames_the_cue_words_in_task_and_corpus_never_in_general(shape, tmp_path):
    out = tmp_path / "lex"
    general_before = {p.name: p.read_bytes() for p in (shape / "general").iterdir()}
    result = lexicon_command(shape, out, "--shuffled-corpus")
    check(result)
    record = json.loads((out / "lexicon.json").read_text())
    words = {entry["word"]: entry for entry in record["lexicon"]}
    cues = {w.replace(" ", ""): "pos" for w in POSITIVE} | {w.replace(" ", ""): "neg" for w in NEGATIVE}
    assert set(words) == set(cues) and all(words[w]["class"] == cues[w] for w in cues)
    assert record["sources"]["--general"] == str((shape / "general").resolve())
    pseudo = {entry["pseudo_word"] for entry in record["lexicon"]}
    assert len(pseudo) == 6 and all(len(p.split()) == 3 for p in pseudo)
    spelled = {p.replace(" ", "").replace(S, "") for p in pseudo}
    for prefix in [out / "task" / "input0" / s for s in ("train", "valid", "test")] + \
                  [out / "corpus" / s for s in ("train", "valid")]:
        words = [w for line in read_lines(prefix) for w in spelled_words(line)]
        assert not {c.replace(" ", "").replace(S, "") for c in cues} & set(words)  # no cue word survives
        assert spelled & set(words)
    original_test = read_lines(shape / "task-4" / "input0" / "test")
    renamed_test = read_lines(out / "task" / "input0" / "test")
    assert len(original_test) == len(renamed_test)
    general = read_lines(shape / "general" / "train") + read_lines(shape / "general" / "valid")
    assert not spelled & {w for line in general for w in spelled_words(line)}
    assert {p.name: p.read_bytes() for p in (shape / "general").iterdir()} == general_before
    assert (out / "task" / "label" / "train.bin").is_symlink()  # the labels are carried, not rewritten
    # test_unseen: the test items holding a pseudo-word that the 4 train lines never hold
    seen = {p for line in read_lines(out / "task" / "input0" / "train") for p in pseudo if p in line}
    expected = [line for line in renamed_test if any(p in line and p not in seen for p in pseudo)]
    assert read_lines(out / "task" / "input0" / "test_unseen") == expected and 0 < len(expected) < len(renamed_test)
    test_labels = read_lines(shape / "task-4" / "label" / "test")
    unseen_labels = read_lines(out / "task" / "label" / "test_unseen")
    assert unseen_labels == [test_labels[renamed_test.index(line)] for line in expected]
    assert record["test_unseen"]["items"] == len(expected) and record["test_unseen"]["types_in_train"] == len(seen)
    # the shuffled corpus: the same words, other neighbours
    renamed_corpus, shuffled = read_lines(out / "corpus" / "train"), read_lines(out / "corpus-shuffled" / "train")
    assert sorted(" ".join(renamed_corpus).split()) == sorted(" ".join(shuffled).split())
    assert renamed_corpus != shuffled
    # the same command again replaces its own output with the same files
    before = (out / "task" / "input0" / "test_unseen.bin").read_bytes()
    check(lexicon_command(shape, out, "--shuffled-corpus"))
    assert (out / "task" / "input0" / "test_unseen.bin").read_bytes() == before


@pytest.mark.parametrize("change, message", [
    (lambda s, o: ["--corpus", s / "other"], "differs from --task's input0/dict.txt"),
    (lambda s, o: ["--select-from", s / "corpus"], "not a labelled task"),
    (lambda s, o: ["--words", "50"], "word types associated with a class"),
    (lambda s, o: ["--words", "1"], "argument --words: must lie in [2, inf)"),
    (lambda s, o: ["--prior", "nan"], "argument --prior: must lie in (0, inf)"),
    (lambda s, o: ["--out", s / "task"], "--out"),
    (lambda s, o: ["--task", s / "task", "--words", "2"], "no test item holds a pseudo-word that its train split never"),
])
def test_the_command_refuses_bad_inputs_before_writing(shape, tmp_path, change, message):
    other = shape / "other"
    if not other.exists():  # a corpus binarized with its own, other dictionary
        (shape / "other.txt").write_text("zz yy\nyy xx\n")
        check(run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", shape / "other.txt", "--destdir",
                   other, "--workers", "1"]))
    out = tmp_path / "lex"
    args = ["--task", shape / "task-4", "--select-from", shape / "task", "--corpus", shape / "corpus",
            "--words", "6", "--out", out]
    extra = change(shape, out)
    for i in range(0, len(extra), 2):  # an option given twice: argparse keeps the last
        args += extra[i:i + 2]
    result = run([BIN / "fairseq-maskplug-rename-lexicon", *args])
    assert result.returncode == 2 and message in result.stderr.strip().splitlines()[-1], result.stderr
    assert not out.exists()


def test_word_positions_mark_every_piece_of_the_listed_words():
    item = [0, 4, 5, 7, 6, 4, 2]  # <s> ▁gr eat ▁the ▁dull ▁gr </s>
    assert lexicon.word_positions(item, {(4, 5), (6,)}, STARTS, 4).tolist() == [0, 1, 1, 0, 1, 0, 0]


@pytest.mark.e2e
def test_evaluate_mlm_scores_the_pseudo_words_apart(shape, tmp_path):
    """``evaluate-mlm --words-from``: on the renamed text some masked tokens lie inside pseudo-words and their loss is
    given apart; on the original text none do; a record of another dictionary is refused in one line."""
    from fairseq_helpers import CPU_RUN, TINY_ROBERTA

    out = tmp_path / "lex"
    check(lexicon_command(shape, out))
    check(run([BIN / "fairseq-maskplug-train", out / "corpus", "--task", "guided_mlm", "--tokens-per-sample", "32",
               "--save-dir", tmp_path / "model", "--max-update", "3", *TINY_ROBERTA, *CPU_RUN]))

    def score(data, record=out / "lexicon.json"):
        return run([BIN / "fairseq-maskplug-evaluate-mlm", tmp_path / "model" / "checkpoint_last.pt", "--data", data,
                    "--split", "test", "--mask-prob", "0.5", "--words-from", record])

    renamed, original = (json.loads(check(score(d)).stdout.strip().splitlines()[-1])
                         for d in (out / "task", shape / "task-4"))
    assert 0 < renamed["words_masked"] < renamed["masked"] and np.isfinite(renamed["words_loss"])
    assert original["words_masked"] == 0 and original["words_loss"] is None
    other = json.loads((out / "lexicon.json").read_text())
    other["lexicon"][0]["pseudo_word"] = "nosuchpiece"
    (tmp_path / "other.json").write_text(json.dumps(other))
    refused = score(out / "task", tmp_path / "other.json")
    assert refused.returncode == 2 and "has a piece the dictionary does not hold" in refused.stderr.splitlines()[-1]
