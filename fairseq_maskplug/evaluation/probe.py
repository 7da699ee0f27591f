"""A small closed-book probe: an entity cloze over a corpus with salient spans.

Question = a sentence of the corpus with one salient span replaced by ``<mask>``; answer =
the span's tokens. Closed-book: the model sees only the question, so it must have stored
the fact during (intermediate) pre-training. Two evaluation splits:

* **seen**: the sentence stays in the pre-training corpus (the fact was seen verbatim);
* **held-out**: the sentence is removed from the corpus, but the answer and another entity
  of the same sentence occur *together* in a sentence that stays (the *support*), so the
  association is available to the model in principle, though never in this wording.

Held-out sentences are chosen greedily in a seeded random order: a sentence qualifies if,
among the sentences not held out, one contains both its answer and one of its other
entities (entities compared by case-folded text); that support sentence is then protected
from being held out itself. A fine-tuning split (and a dev split) of questions from other
corpus sentences teaches the question format. Exact match compares case-folded,
whitespace-collapsed answers (SQuAD's normalisation without punctuation and article rules).
"""

from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Sequence, Set, Tuple

import numpy as np


@dataclass(frozen=True)
class Cloze:
    line: int                 # line of the corpus the question comes from
    question: Tuple[str, ...]  # token symbols, the answer span replaced by <mask>
    answer: Tuple[str, ...]


def entity_key(symbols: Sequence[str]) -> str:
    """Case-folded text of a span of sentencepiece symbols (the key entities are compared by)."""
    return normalise_answer("".join(symbols).replace("\u2581", " "))


def normalise_answer(text: str) -> str:
    return " ".join(text.casefold().split())


def make_cloze(line: int, symbols: Sequence[str], span: Tuple[int, int], mask: str = "<mask>") -> Cloze:
    start, end = span
    return Cloze(line, tuple(symbols[:start]) + (mask,) + tuple(symbols[end:]), tuple(symbols[start:end]))


@dataclass
class ProbeSplits:
    heldout: List[Cloze]
    seen: List[Cloze]
    train: List[Cloze]
    valid: List[Cloze]
    removed: Set[int]  # corpus lines held out (not pre-trained on)
    supports: Dict[int, int]  # held-out line -> the corpus line that supports it


def build_probe(lines: Sequence[Sequence[str]], spans: Sequence[Sequence[Tuple[int, int]]], seed: int,
                n_heldout: int, n_seen: int, n_train: int, n_valid: int, max_tokens: int = 126) -> ProbeSplits:
    """Choose the answer span of every sentence with spans, the held-out sentences and the
    seen / fine-tuning / dev questions (module docstring). ``lines`` are token symbols per
    corpus line (no ``</s>``), ``spans`` the salient spans of each line as token ranges.
    Lines of more than ``max_tokens`` tokens give no question (the model could not read them
    whole); they stay in the corpus and may support a held-out question."""
    if len(lines) != len(spans):
        raise ValueError(f"{len(lines)} lines but {len(spans)} span lists")
    rng = np.random.default_rng(seed)
    keys = [[entity_key(symbols[s:e]) for s, e in line_spans] for symbols, line_spans in zip(lines, spans)]
    answer = {i: int(rng.integers(len(line_spans))) for i, line_spans in enumerate(spans)
              if line_spans and len(lines[i]) <= max_tokens}
    lines_with = defaultdict(set)  # entity key -> lines holding it
    for i, line_keys in enumerate(keys):
        for key in line_keys:
            lines_with[key].add(i)
    order = rng.permutation(sorted(answer))
    removed, protected, supports = set(), set(), {}
    for i in order.tolist():
        if len(removed) >= n_heldout:
            break
        if i in protected:
            continue
        target = keys[i][answer[i]]
        others = {k for k in keys[i] if k != target}
        candidates = sorted(j for k in others for j in (lines_with[k] & lines_with[target])
                            if j != i and j not in removed)
        if not candidates:
            continue
        support = candidates[0]
        removed.add(i)
        protected.add(support)
        supports[i] = support
    heldout = [make_cloze(i, lines[i], spans[i][answer[i]]) for i in sorted(removed)]
    rest = [i for i in order.tolist() if i not in removed]
    if len(rest) < n_seen + n_train + n_valid:
        raise ValueError(f"only {len(rest)} sentences with a salient span remain for {n_seen} seen, {n_train} "
                         f"fine-tuning and {n_valid} dev questions: use a larger corpus or fewer questions")
    chosen = {name: rest[a:b] for name, (a, b) in
              {"seen": (0, n_seen), "train": (n_seen, n_seen + n_train),
               "valid": (n_seen + n_train, n_seen + n_train + n_valid)}.items()}
    clozes = {name: [make_cloze(i, lines[i], spans[i][answer[i]]) for i in sorted(ids)]
              for name, ids in chosen.items()}
    return ProbeSplits(heldout, clozes["seen"], clozes["train"], clozes["valid"], removed, supports)


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Percent of hypotheses equal to their reference after :func:`normalise_answer`."""
    if len(hypotheses) != len(references) or not references:
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    hits = sum(normalise_answer(h) == normalise_answer(r) for h, r in zip(hypotheses, references))
    return 100.0 * hits / len(references)


def word_cloze(lines: Sequence[str], rng: np.random.Generator, mask: str = "<mask>") -> Tuple[List[str], List[str]]:
    """``(questions, answers)``: in each line one uniformly drawn word replaced by ``mask``, the answer
    that word (the downstream task of the meta-learned span policy's tests and benchmarks)."""
    questions, answers = [], []
    for line in lines:
        words = line.split()
        k = int(rng.integers(len(words)))
        answers.append(words[k])
        questions.append(" ".join(words[:k] + [mask] + words[k + 1:]))
    return questions, answers
