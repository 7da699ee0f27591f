"""Whole-word granularity for any policy (``--mask-unit word``).

A word is a token that starts one (GPT-2 BPE's ``Ġ``, sentencepiece's ``▁``, every token of a
whitespace-tokenised corpus: :func:`word_starts`) and the tokens after it up to the next start.
Special tokens are words of their own, and the token after one always starts a word, so a
block cut inside a word begins with the rest of that word as a word.

:class:`WordUnitPolicy` makes any policy choose whole words, one of two ways the policy declares:

- **on the word sequence** (``word_reductions``: a reduction per side-information track): the
  policy runs on one position per word, with each track reduced over the word's subwords, and
  every chosen word's subwords are predicted. Its rate is then per *word*: ``random`` at 0.15
  chooses 15% of the maskable words, which is more than 15% of the tokens when words have
  several subwords. Google BERT's whole-word masking instead budgets 15% of the *tokens*; the
  logs state both rates (``mask_rate`` per token, ``unit_mask_rate`` per word).
- **by expansion** (``words_by_expansion``): the policy chooses tokens and every word it
  touches is predicted whole (entity and learned spans, whose units are already spans).

FE-MLM views of a policy on the word sequence are its views of the words, expanded: disjoint
because the words are. The 80/10/10 replacement stays per token (as in BERT's whole-word
masking) unless the policy corrupts whole units (:attr:`MaskPolicy.corrupts_units`).
"""

from typing import Optional

import numpy as np

from .random_masks import unit_starts
from .registry import WORD_IDS, WORD_TOKENS, MaskPolicy, PolicyWrapper

#: how a track's values of a word's subwords become the word's value
REDUCTIONS = {
    "first": lambda values, starts: values[starts],
    "max": lambda values, starts: np.maximum.reduceat(values, starts),
    "min": lambda values, starts: np.minimum.reduceat(values, starts),
    "sum": lambda values, starts: np.add.reduceat(values, starts),
    "prod": lambda values, starts: np.multiply.reduceat(values, starts),
}


def word_starts(tokens: np.ndarray, maskable: np.ndarray, start_symbols: np.ndarray) -> np.ndarray:
    """Boolean array, True where a word starts: at a token ``start_symbols`` marks (ids beyond it:
    starts), at every non-maskable token, after one, and at position 0."""
    tokens = np.asarray(tokens)
    marked = np.ones(len(tokens), dtype=bool)
    known = tokens < len(start_symbols)
    marked[known] = start_symbols[tokens[known]]
    return unit_starts(marked, maskable)


def word_ids(starts: np.ndarray) -> np.ndarray:
    """The word each position belongs to, 0 ... (number of words - 1)."""
    return np.cumsum(starts) - 1


class Words:
    """One sequence seen as words: :meth:`reduce` makes word-level arrays, :meth:`expand` maps a
    word-level mask (or ``K x words`` masks) back onto the tokens."""

    def __init__(self, tokens: np.ndarray, maskable: np.ndarray, start_symbols: np.ndarray):
        self.starts = word_starts(tokens, maskable, start_symbols)
        self.first = np.flatnonzero(self.starts)
        self.ids = word_ids(self.starts)
        self.tokens = np.asarray(tokens)[self.first]
        self.maskable = np.asarray(maskable, dtype=bool)[self.first]  # a word is maskable or special whole

    def reduce(self, values: np.ndarray, how: str) -> np.ndarray:
        if how not in REDUCTIONS:
            raise ValueError(f"unknown word reduction {how!r}: one of {sorted(REDUCTIONS)}")
        values = np.asarray(values)
        return REDUCTIONS[how](values, self.first) if len(values) else values

    def expand(self, word_mask: np.ndarray) -> np.ndarray:
        """Token-level mask(s): every token of a chosen word."""
        return np.asarray(word_mask)[..., self.ids]

    def covering(self, mask: np.ndarray) -> np.ndarray:
        """Token-level mask of every word ``mask`` touches (at maskable positions)."""
        touched = np.zeros(len(self.first), dtype=bool)
        touched[self.ids[np.asarray(mask, dtype=bool)]] = True
        return touched[self.ids]


class WordUnitPolicy(PolicyWrapper):
    """``policy`` made to choose whole words (module docstring); refused, with the reason, for a
    policy that declares neither ``word_reductions`` for all its tracks nor ``words_by_expansion``.

    Args:
        policy: the policy ``--mask-policy`` built.
        start_symbols: per dictionary id, whether that symbol starts a word.
    """

    def __init__(self, policy: MaskPolicy, start_symbols: np.ndarray):
        super().__init__(policy.options, policy)  # the wrapped policy's options (checked when it was built)
        self.start_symbols = np.asarray(start_symbols, dtype=bool)
        self.registered_name = policy.registered_name
        self.chooses_spans, self.corrupts_units = policy.chooses_spans, policy.corrupts_units
        if not policy.words_by_expansion:
            missing = [name for name in policy.side_info_names if name not in policy.word_reductions]
            if missing:
                raise ValueError(f"--mask-unit word: mask policy {policy.registered_name!r} does not say how its "
                                 f"track(s) {', '.join(missing)} combine over a word's subwords; the policy must "
                                 f"declare word_reductions (one of {sorted(REDUCTIONS)} per track) or "
                                 "words_by_expansion")

    @property
    def views_refused(self):
        if self.inner.words_by_expansion:
            return "it chooses whole words by expanding its token choices, which can make views overlap"
        return self.inner.views_refused

    def defines_views(self) -> bool:  # an instance's answer: the wrapped policy's
        return self.views_refused is None and self.inner.defines_views()

    def _word_level(self, tokens, maskable, side_info):
        words = Words(tokens, maskable, self.start_symbols)
        side = {name: words.reduce(side_info[name], self.inner.word_reductions[name])
                for name in self.inner.side_info_names}
        if self.inner.budgets_tokens:  # each word's token count, for a policy whose budget counts tokens
            side[WORD_TOKENS] = np.diff(np.append(words.first, len(words.ids)))
        return words, side

    def choose(self, tokens, maskable, side_info, rng):
        if self.inner.words_by_expansion:
            mask = np.asarray(self.inner.choose(tokens, maskable, side_info, rng), dtype=bool)
            return Words(tokens, maskable, self.start_symbols).covering(mask) & maskable
        words, side = self._word_level(tokens, maskable, side_info)
        return words.expand(self.inner.choose(words.tokens, words.maskable, side, rng))

    def probabilities(self, tokens, maskable, side_info) -> Optional[np.ndarray]:
        """Each token's word's probability (the wrapped policy's, on the word sequence), for the
        fe_mlm capacity check; the views stay whole words (:meth:`views`)."""
        if self.inner.words_by_expansion:
            return None
        words, side = self._word_level(tokens, maskable, side_info)
        p = self.inner.probabilities(words.tokens, words.maskable, side)
        return None if p is None else words.expand(p)

    def views(self, tokens, maskable, side_info, rng, k):
        words, side = self._word_level(tokens, maskable, side_info)
        return words.expand(self.inner.views(words.tokens, words.maskable, side, rng, k))

    def units(self, tokens, maskable, side_info) -> np.ndarray:
        """The words; for a policy on the word sequence that has units of its own (``pmi``), its units
        of the words, expanded."""
        if self.inner.words_by_expansion:
            return Words(tokens, maskable, self.start_symbols).ids
        words, side = self._word_level(tokens, maskable, side_info)
        inner = self.inner.units(words.tokens, words.maskable, side)
        return words.ids if inner is None else np.asarray(inner)[words.ids]



class TokenWordsPolicy(PolicyWrapper):
    """``policy`` choosing tokens with each token's word in ``side_info[WORD_IDS]`` (for a policy with
    :attr:`~.registry.MaskPolicy.reads_words`; special tokens are words of their own).

    Args:
        policy: the policy ``--mask-policy`` built.
        start_symbols: per dictionary id, whether that symbol starts a word.
    """

    def __init__(self, policy: MaskPolicy, start_symbols: np.ndarray):
        super().__init__(policy.options, policy)
        self.start_symbols = np.asarray(start_symbols, dtype=bool)
        self.registered_name = policy.registered_name
        self.chooses_spans, self.corrupts_units = policy.chooses_spans, policy.corrupts_units
        self.views_refused = policy.views_refused

    def choose(self, tokens, maskable, side_info, rng):
        side = dict(side_info)
        side[WORD_IDS] = word_ids(word_starts(tokens, maskable, self.start_symbols))
        return self.inner.choose(tokens, maskable, side, rng)


def with_words(policy: MaskPolicy, mask_unit: str, start_symbols) -> MaskPolicy:
    """``policy`` as ``--mask-unit`` asks: a :class:`WordUnitPolicy` for words; for tokens, a
    :class:`TokenWordsPolicy` where the policy reads each token's word, else itself. ``start_symbols``: a
    callable giving the per-id word starts, called only when they are needed."""
    if mask_unit == "word":
        return WordUnitPolicy(policy, start_symbols())
    return TokenWordsPolicy(policy, start_symbols()) if policy.reads_words else policy
