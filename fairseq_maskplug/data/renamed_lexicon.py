"""A renamed lexicon: the shape where in-domain continued pre-training must help (issue 100).

The few hundred word types of a labelled task that carry its labels most (:func:`label_log_odds`, both or all
classes alike) are replaced by fresh pseudo-words (:func:`pseudo_words`) in the task's text and in the unlabelled
in-domain text, never in the general corpus. A general model has then never seen the words that decide the task;
what they mean can be learned only from the in-domain text (by continued pre-training) or from the few labelled
examples that hold them. Gururangan et al. (2020, "Don't Stop Pretraining", section 3) find domain-adaptive
pre-training helps most where the domain's vocabulary differs from the general corpus's; this makes that difference
by construction, so a comparison knows in advance that in-domain pre-training has something to learn.

Everything here works on the ids of binarized items and a dictionary's word-start symbols
(:func:`~fairseq_maskplug.data.word_boundaries.word_start_symbols`): a word is a start symbol and the symbols after
it up to the next start; special symbols are words of their own and are never renamed. A pseudo-word is a sequence of
the dictionary's own short letter pieces (one word-start piece, then continuation pieces) that is no word of any
corpus read: the general model knows its pieces, never the word. Pure functions of their inputs and a
``numpy.random.Generator``: no torch, no fairseq.
"""

from typing import Dict, Iterable, List, Sequence, Set, Tuple

import numpy as np

Word = Tuple[int, ...]


def split_words(tokens: Sequence[int], starts: np.ndarray, nspecial: int) -> List[Word]:
    """The words of one item, in order: each a tuple of ids that begins at a word-start symbol (``starts``: per
    dictionary id) or at a special symbol (an id below ``nspecial``, a word of its own), or after a special one."""
    words: List[List[int]] = []
    after_special = True
    for token in np.asarray(tokens).tolist():
        special = token < nspecial
        if special or after_special or token >= len(starts) or starts[token]:
            words.append([token])
        else:
            words[-1].append(token)
        after_special = special
    return [tuple(word) for word in words]


def is_special(word: Word, nspecial: int) -> bool:
    """True for a word that is one special symbol (``<s>``, ``</s>``, ``<pad>``, ``<unk>``)."""
    return len(word) == 1 and word[0] < nspecial


def class_word_counts(items: Iterable[Sequence[int]], labels: Sequence[int], starts: np.ndarray, nspecial: int,
                      eligible=lambda word: True) -> Tuple[List[Word], np.ndarray]:
    """``(word types, counts)``: every eligible non-special word type of the labelled ``items`` (in order of first
    appearance) and its count per class, ``counts[word, class]`` over the sorted distinct ``labels``."""
    items, labels = list(items), np.asarray(labels)
    if len(items) != labels.size:
        raise ValueError(f"{len(items)} items but {labels.size} labels")
    classes = np.unique(labels)
    if classes.size < 2:
        raise ValueError(f"log-odds need at least two classes, the labels hold {classes.size}")
    column = {label: i for i, label in enumerate(classes.tolist())}
    index: Dict[Word, int] = {}
    rows: List[np.ndarray] = []
    for item, label in zip(items, labels.tolist()):
        for word in split_words(item, starts, nspecial):
            if is_special(word, nspecial) or not eligible(word):
                continue
            if word not in index:
                index[word] = len(rows)
                rows.append(np.zeros(classes.size, dtype=np.int64))
            rows[index[word]][column[label]] += 1
    return list(index), (np.stack(rows) if rows else np.zeros((0, classes.size), dtype=np.int64))


def label_log_odds(counts: np.ndarray, prior: float) -> np.ndarray:
    """Per word type and class, the z-score of the log-odds of the word in that class against all others, with an
    informative Dirichlet prior (Monroe, Colaresi and Quinn 2008, "Fightin' Words", equations 16 and 22):

        delta = log((y_c + a) / (n_c + a0 - y_c - a)) - log((y_r + a) / (n_r + a0 - y_r - a)),
        z = delta / sqrt(1 / (y_c + a) + 1 / (y_r + a)),

    ``y_c`` the word's count in the class, ``y_r`` in the rest, ``n`` their totals, ``a = a0 * y / n`` the prior's
    share for the word (its pooled frequency) and ``a0 = prior`` the prior's total weight. A word frequent in a class
    and rare elsewhere gets a large positive z for that class; a rare word's z shrinks towards 0."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[1] < 2 or counts.shape[0] == 0:
        raise ValueError(f"counts must be words x classes with at least one word and two classes, got {counts.shape}")
    if (counts < 0).any() or not np.isfinite(counts).all():
        raise ValueError("counts must be finite and non-negative")
    if not (np.isfinite(prior) and prior > 0):
        raise ValueError(f"prior must be a positive number, got {prior}")
    pooled = counts.sum(axis=1)
    total = pooled.sum()
    alpha = prior * pooled / total
    z = np.empty_like(counts)
    for c in range(counts.shape[1]):
        inside, rest = counts[:, c], pooled - counts[:, c]
        n_inside, n_rest = inside.sum(), rest.sum()
        delta = (np.log((inside + alpha) / (n_inside + prior - inside - alpha))
                 - np.log((rest + alpha) / (n_rest + prior - rest - alpha)))
        z[:, c] = delta / np.sqrt(1.0 / (inside + alpha) + 1.0 / (rest + alpha))
    return z


def choose_lexicon(z: np.ndarray, words: int, min_z: float = 0.0) -> List[Tuple[int, int]]:
    """``[(word type, class), ...]``: for each class in turn, the word types of largest z for it (those above
    ``min_z``), ``words`` in all shared out evenly among the classes (the first classes take one more where it
    does not divide), each word type once, in decreasing z within a class."""
    z = np.asarray(z, dtype=np.float64)
    if z.ndim != 2 or z.shape[1] < 2:
        raise ValueError(f"z must be word types x classes (at least two), got shape {z.shape}")
    if words < 1:
        raise ValueError(f"words must be at least 1, got {words}")
    n_classes = z.shape[1]
    quota = [words // n_classes + (1 if c < words % n_classes else 0) for c in range(n_classes)]
    chosen: List[Tuple[int, int]] = []
    taken: Set[int] = set()
    for c in range(n_classes):
        order = np.argsort(-z[:, c], kind="stable")
        picked = [int(w) for w in order if z[w, c] > min_z and int(w) not in taken][:quota[c]]
        taken.update(picked)
        chosen.extend((w, c) for w in picked)
    return chosen


def letter_pieces(symbols: Sequence[str], nspecial: int, start_mark: str, continuation_mark: str = "",
                  longest: int = 3) -> Tuple[List[int], List[int]]:
    """``(start pieces, continuation pieces)``: ids of the dictionary's symbols that are 1 to ``longest`` lower-case
    ASCII letters after ``start_mark`` (starts) or after ``continuation_mark`` (continuations): sentencepiece marks
    a word's start (``▁``, and continuations bare), WordPiece its continuations (starts bare, ``##``). One of the
    two marks is empty, the other not."""
    if bool(start_mark) == bool(continuation_mark):
        raise ValueError(f"exactly one of start_mark {start_mark!r} and continuation_mark {continuation_mark!r} is a mark")

    def letters(text: str) -> bool:
        return 1 <= len(text) <= longest and text.isascii() and text.isalpha() and text.islower()

    def pieces(mark: str) -> List[int]:
        return [i for i, s in enumerate(symbols) if i >= nspecial and s.startswith(mark) and letters(s[len(mark):])]

    return pieces(start_mark), pieces(continuation_mark)


def pseudo_words(n: int, start_pieces: Sequence[int], continuation_pieces: Sequence[int], pieces: int,
                 forbidden: Set[Word], rng: np.random.Generator, tries_per_word: int = 1000) -> List[Word]:
    """``n`` distinct pseudo-words of ``pieces`` ids each (a start piece, then continuation pieces, drawn uniformly
    with ``rng``), none of them in ``forbidden`` (the words of every corpus read). Refused where the pieces cannot
    make ``n`` of them in ``tries_per_word * n`` draws."""
    if n < 0 or pieces < 1:
        raise ValueError(f"n must be >= 0 and pieces >= 1, got n={n}, pieces={pieces}")
    if not start_pieces or (pieces > 1 and not continuation_pieces):
        raise ValueError("the dictionary has no short letter pieces to make pseudo-words of")
    made: List[Word] = []
    seen: Set[Word] = set()
    for _ in range(tries_per_word * max(n, 1)):
        if len(made) == n:
            break
        word = (int(start_pieces[rng.integers(len(start_pieces))]),
                *(int(continuation_pieces[rng.integers(len(continuation_pieces))]) for _ in range(pieces - 1)))
        if word not in forbidden and word not in seen:
            seen.add(word)
            made.append(word)
    if len(made) < n:
        raise ValueError(f"only {len(made)} of {n} pseudo-words of {pieces} pieces could be made from "
                         f"{len(start_pieces)} start and {len(continuation_pieces)} continuation pieces: "
                         "ask for fewer words or more pieces")
    return made


def rename(tokens: Sequence[int], renamed: Dict[Word, Word], starts: np.ndarray, nspecial: int) -> np.ndarray:
    """The item with every word of ``renamed`` replaced by its pseudo-word (the other words as they were)."""
    out: List[int] = []
    for word in split_words(tokens, starts, nspecial):
        out.extend(renamed.get(word, word))
    return np.asarray(out, dtype=np.int64)


def word_positions(tokens: Sequence[int], vocabulary: Set[Word], starts: np.ndarray, nspecial: int) -> np.ndarray:
    """Boolean array over ``tokens``: True at every position of a word of ``vocabulary`` (the pseudo-words, whose
    masked-LM loss issue 100 reads apart)."""
    out = []
    for word in split_words(tokens, starts, nspecial):
        out.extend([word in vocabulary] * len(word))
    return np.asarray(out, dtype=bool)


def pseudo_words_of(record: dict, dictionary) -> Set[Word]:
    """The pseudo-words of a ``lexicon.json`` record (``fairseq-maskplug-rename-lexicon``'s) as id tuples of
    ``dictionary``; a piece it does not hold is refused (the record was made with another dictionary)."""
    words = set()
    for entry in record.get("lexicon", []):
        pieces = entry["pseudo_word"].split()
        ids = tuple(dictionary.index(piece) for piece in pieces)
        if any(i == dictionary.unk() for i in ids):
            raise ValueError(f"pseudo-word {entry['pseudo_word']!r} has a piece the dictionary does not hold")
        words.add(ids)
    if not words:
        raise ValueError("the record names no pseudo-word (not a fairseq-maskplug-rename-lexicon lexicon.json)")
    return words


def words_present(items: Iterable[Sequence[int]], vocabulary: Set[Word], starts: np.ndarray,
                  nspecial: int) -> List[Set[Word]]:
    """Per item, the words of ``vocabulary`` it holds."""
    return [set(split_words(item, starts, nspecial)) & vocabulary for item in items]


def unseen_items(test_words: Sequence[Set[Word]], train_words: Iterable[Set[Word]], every: bool = False) -> np.ndarray:
    """Positions of the test items that hold a pseudo-word the labelled train split never holds (with ``every``: that
    hold pseudo-words and only such ones): the items a classifier can read fully only with what unlabelled text
    taught it of those words (issue 100's first outcome; on MR with 400 labels and 300 words, ``every`` leaves 5 of
    3,200 items, since nearly every sentence holds a frequent renamed word such as "movie" or "too")."""
    seen: Set[Word] = set().union(*train_words)
    if every:
        return np.array([i for i, words in enumerate(test_words) if words and not (words & seen)], dtype=np.int64)
    return np.array([i for i, words in enumerate(test_words) if words - seen], dtype=np.int64)


def shuffle_words(items: Sequence[Sequence[int]], starts: np.ndarray, nspecial: int,
                  rng: np.random.Generator) -> List[np.ndarray]:
    """The items with their non-special words permuted uniformly across the whole corpus: each item keeps its number
    of words and its special symbols in place, and every word keeps its pieces together, but which words stand beside
    which is random. A pseudo-word's frequency survives, its contexts do not: continued pre-training on this text has
    nothing of a word's meaning to learn (the harm control of issue 100)."""
    split = [split_words(item, starts, nspecial) for item in items]
    pool = [word for words in split for word in words if not is_special(word, nspecial)]
    order = rng.permutation(len(pool))
    out, taken = [], 0
    for words in split:
        line: List[int] = []
        for word in words:
            if is_special(word, nspecial):
                line.extend(word)
            else:
                line.extend(pool[order[taken]])
                taken += 1
        out.append(np.asarray(line, dtype=np.int64))
    return out
