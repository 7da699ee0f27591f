"""RAKE keyphrase queries (Rose et al. 2010), as the TLM authors' ``--rake`` option used them.

The authors call ``rake_nltk.Rake()`` with its defaults and join the 20 best-ranked phrases
with spaces. ``rake-nltk`` needs NLTK's stop-word and punkt data, which no package installs
offline, so this is a small re-implementation of those defaults:

* tokens: ``\\w+|[^\\w\\s]+`` on the lower-cased text (NLTK ``wordpunct_tokenize``);
* a phrase is a maximal run of tokens that are neither stop words (NLTK's English list,
  179 words, as shipped by ``bm25s.stopwords.STOPWORDS_EN_PLUS``) nor punctuation;
* word score ``degree(w) / frequency(w)``, where ``degree(w)`` sums the length of every
  phrase occurrence holding ``w`` (once per occurrence of ``w``) and ``frequency(w)`` counts
  its occurrences in phrases; a phrase scores the sum of its word scores;
* phrases are ranked by score, then by the phrase text, both descending (Python's sort of
  ``(score, phrase)`` pairs, as rake-nltk); repeated phrases stay repeated in the ranking
  (rake-nltk's ``include_repeated_phrases=True``).

Two differences: rake-nltk splits sentences with punkt first and ignores only single
punctuation characters, so a run such as ``."`` becomes a word of a phrase there; here any
punctuation run ends a phrase (sentence ends are punctuation runs, so no sentence splitter
is needed).
"""

import re
from collections import Counter
from typing import FrozenSet, List, Optional

WORDPUNCT = re.compile(r"\w+|[^\w\s]+")
WORD = re.compile(r"\w")
TOP_PHRASES = 20  # the authors' query: the 20 best phrases


def nltk_english_stopwords() -> FrozenSet[str]:
    """NLTK's English stop-word list (179 words), from the installed ``bm25s`` package."""
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN_PLUS)


def rake_phrases(text: str, stopwords: Optional[FrozenSet[str]] = None) -> List[str]:
    """Every phrase of ``text``, best first (see the module docstring for the scoring)."""
    stopwords = nltk_english_stopwords() if stopwords is None else stopwords
    phrases, current = [], []
    for token in WORDPUNCT.findall(text.lower()):
        if token in stopwords or not WORD.search(token):
            if current:
                phrases.append(tuple(current))
            current = []
        else:
            current.append(token)
    if current:
        phrases.append(tuple(current))
    frequency = Counter(word for phrase in phrases for word in phrase)
    degree = Counter()
    for phrase in phrases:
        for word in phrase:
            degree[word] += len(phrase)
    ranked = sorted(((sum(degree[w] / frequency[w] for w in phrase), " ".join(phrase)) for phrase in phrases),
                    reverse=True)
    return [phrase for _, phrase in ranked]


def rake_query(text: str, stopwords: Optional[FrozenSet[str]] = None, top: int = TOP_PHRASES) -> str:
    """The authors' ``--rake`` query: the ``top`` best phrases joined by spaces."""
    if top < 1:
        raise ValueError(f"the number of RAKE phrases must be >= 1, got {top}")
    return " ".join(rake_phrases(text, stopwords)[:top])
