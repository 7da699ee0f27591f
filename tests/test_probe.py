"""The closed-book probe's construction: held-out questions are answerable in principle, splits disjoint."""

import numpy as np
import pytest

from fairseq_maskplug.evaluation.probe import build_probe, entity_key, exact_match, make_cloze


def corpus(seed=0, n=400, entities=30):
    """Lines of filler words with 1-3 entity mentions ``▁E<k>`` each (one-token spans)."""
    rng = np.random.default_rng(seed)
    lines, spans = [], []
    for _ in range(n):
        words = [f"\u2581w{i}" for i in rng.integers(0, 50, rng.integers(4, 12))]
        positions = sorted(rng.choice(len(words), size=rng.integers(0, 4), replace=False).tolist())
        for p in positions:
            words[p] = f"\u2581E{int(rng.integers(entities))}"
        lines.append(words)
        spans.append([(p, p + 1) for p in positions])
    return lines, spans


def test_held_out_questions_have_a_support_sentence_that_stays():
    lines, spans = corpus()
    probe = build_probe(lines, spans, seed=3, n_heldout=40, n_seen=30, n_train=100, n_valid=20)
    assert len(probe.heldout) == 40 == len(probe.removed)
    for cloze in probe.heldout:
        support = probe.supports[cloze.line]
        assert support not in probe.removed
        answer = entity_key(cloze.answer)
        support_keys = {entity_key(lines[support][s:e]) for s, e in spans[support]}
        other_keys = {entity_key(lines[cloze.line][s:e]) for s, e in spans[cloze.line]} - {answer}
        assert answer in support_keys and other_keys & support_keys
        assert cloze.question.count("<mask>") == 1
    used = [c.line for split in (probe.seen, probe.train, probe.valid) for c in split]
    assert len(used) == len(set(used)) == 150 and not set(used) & probe.removed


def test_same_seed_same_probe_and_too_few_sentences_refused():
    lines, spans = corpus()
    a = build_probe(lines, spans, 5, 10, 10, 50, 10)
    b = build_probe(lines, spans, 5, 10, 10, 50, 10)
    assert a.heldout == b.heldout and a.seen == b.seen and a.train == b.train
    with pytest.raises(ValueError, match="sentences with a salient span remain"):
        build_probe(lines, spans, 5, 10, 300, 300, 10)


def test_long_lines_give_no_question_and_exact_match_normalises():
    lines, spans = corpus()
    probe = build_probe(lines, spans, 1, 10, 10, 50, 10, max_tokens=8)
    assert all(len(lines[c.line]) <= 8 for split in (probe.heldout, probe.seen, probe.train) for c in split)
    cloze = make_cloze(7, ["\u2581a", "\u2581B", "\u2581c"], (1, 2))
    assert cloze.question == ("\u2581a", "<mask>", "\u2581c") and cloze.answer == ("\u2581B",)
    assert exact_match(["Liberty  Hall", "dublin"], ["liberty hall", "Cork"]) == 50.0
    with pytest.raises(ValueError):
        exact_match([], [])
