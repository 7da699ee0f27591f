"""Downstream Mask: the buffer algorithm (Gu et al. 2020, Eq. 1) against a classifier computable by hand."""

import numpy as np
import pytest

from fairseq_maskplug.scoring.buffer import buffer_importance
from fairseq_maskplug.scoring.preview import render_marked

GOOD, BAD = 7, 4


class HandClassifier:
    """P(class 1 | x) = 0.55 + 0.4 [GOOD in x] - 0.1 * (number of BAD in x), clipped to [0.01, 0.99]."""

    def __init__(self):
        self.calls, self.inputs = 0, []

    def __call__(self, inputs):
        self.calls += 1
        self.inputs.append([list(x) for x in inputs])
        p1 = np.array([np.clip(0.55 + 0.4 * (GOOD in x) - 0.1 * list(x).count(BAD), 0.01, 0.99) for x in inputs])
        return np.stack([1 - p1, p1], axis=1)


def test_hand_checked_sentences():
    sentences = [np.array([3, GOOD, BAD, GOOD, 5]), np.array([BAD, BAD, 3]), np.array([GOOD, 3])]
    labels = [1, 0, 0]
    classifier = HandClassifier()
    importance, scored = buffer_importance(sentences, labels, classifier, delta=0.05, batch_size=8, progress=False)
    # sentence 1: P(1|s) = 0.85. [3]: 0.55, S = .30 keep; [3 G]: .95, S = -.10 important (left out);
    # [3 B]: .45, S = .40 keep; [3 B G]: .85, S = 0 important; [3 B 5]: .45 keep
    assert importance[0].tolist() == [0, 1, 0, 1, 0]
    # sentence 2: P(0|s) = 0.65. [B]: .55, S = .10 keep; [B B]: .65, S = 0 important; [B 3]: .55 keep
    assert importance[1].tolist() == [0, 1, 0]
    # sentence 3: P(1|s) = .95, predicted 1, gold 0: misclassified, not scored
    assert importance[2].tolist() == [0, 0] and scored.tolist() == [True, True, False]
    # one call for the whole sentences, then one per buffer position of the longest scored sentence
    assert classifier.calls == 1 + 5
    # third position: buffers [3] and [B] (the second B was important) plus the new token
    assert classifier.inputs[3] == [[3, BAD], [BAD, 3]]
    assert classifier.inputs[4] == [[3, BAD, GOOD]]  # sentence 2 has ended
    # a larger delta marks more: sentence 2 at 0.15: [B] S = .10 important; [B] again .10 important; [3] .2 keep
    importance, _ = buffer_importance(sentences, labels, HandClassifier(), delta=0.15, progress=False)
    assert importance[1].tolist() == [1, 1, 0]


def test_one_sentence_at_a_time_gives_the_same_labels():
    rng = np.random.default_rng(0)
    sentences = [rng.integers(3, 9, rng.integers(1, 12)) for _ in range(40)]
    labels = rng.integers(0, 2, 40)
    batched = HandClassifier()
    a, sa = buffer_importance(sentences, labels, batched, batch_size=16, progress=False)
    single = HandClassifier()
    b, sb = buffer_importance(sentences, labels, single, batch_size=1, progress=False)
    assert all(np.array_equal(x, y) for x, y in zip(a, b)) and np.array_equal(sa, sb)
    assert batched.calls < single.calls / 4
    small = HandClassifier()  # forwards of at most 20 padded tokens: more calls, same labels
    c, sc = buffer_importance(sentences, labels, small, batch_size=16, max_tokens=20, progress=False)
    assert all(np.array_equal(x, y) for x, y in zip(a, c)) and np.array_equal(sa, sc)
    assert batched.calls < small.calls
    assert all(len(inputs) * (max(map(len, inputs)) + 2) <= 20 or len(inputs) == 1 for inputs in small.inputs)


def test_labels_and_sentences_must_pair_up():
    with pytest.raises(ValueError, match="3 sentences but 2 labels"):
        buffer_importance([np.array([3])] * 3, [0, 1], HandClassifier(), progress=False)


def test_preview_marks_subwords_and_words():
    assert render_marked(["\u2581an", "\u2581exhilar", "ating", "\u2581film"], [0, 0, 1, 0]) == "an exhilar[ating] film"
    assert render_marked(["\u2581a", "\u2581great", "\u2581film"], [0, 1, 0]) == "a [great] film"
    assert render_marked(["w1", "w2"], [1, 0]) == "[w1] w2"
    # a marked word mark alone (sentencepiece: "\u2581" then a quote) is shown, not an empty "[]"
    assert render_marked(["\u2581said", "\u2581", "\"", "hi"], [0, 1, 1, 0]) == "said [\u2581][\"]hi"
