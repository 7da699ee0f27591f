"""Write a small example of "your own data" for the README's walkthrough: raw review texts (one per
line) and labelled sentences (``label<TAB>text``), with accents and other non-ASCII characters.

    python examples/own_data/make_example.py DIR [--lines N]

Replace the files it writes with your own: the walkthrough's commands take any such files.
"""

import argparse
import random
from pathlib import Path

SUBJECTS = ["the café in Zürich", "this naïve comedy", "the director from Łódź", "our hotel in Malmö",
            "the sushi bar near 東京 station", "Renée's first novel", "the new phone", "a long flight to São Paulo"]
GOOD = ["was wonderful", "felt fresh and clever", "is worth every euro (€)", "made us smile", "surprised me"]
BAD = ["was a disappointment", "felt dull and slow", "is not worth the money", "made no sense", "bored me"]
TAILS = ["", " — really.", " overall.", " to be honest.", ", again!", " ☺"]


def sentence(rng: random.Random, good: bool) -> str:
    subject = rng.choice(SUBJECTS)
    return f"{subject[0].upper()}{subject[1:]} {rng.choice(GOOD if good else BAD)}{rng.choice(TAILS)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--lines", type=int, default=400, help="unlabelled training lines (others scale with it)")
    args = parser.parse_args()
    rng = random.Random(0)
    args.out.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", args.lines), ("valid", args.lines // 4)):
        lines = [" ".join(sentence(rng, rng.random() < 0.5) for _ in range(rng.randint(1, 3))) for _ in range(n)]
        (args.out / f"reviews.{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for split, n in (("train", args.lines // 2), ("valid", args.lines // 4), ("test", args.lines // 4)):
        rows = []
        for _ in range(n):
            good = rng.random() < 0.5
            rows.append(f"{'positive' if good else 'negative'}\t{sentence(rng, good)}")
        (args.out / f"sentiment.{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    print(f"wrote {args.out}/reviews.{{train,valid}}.txt and {args.out}/sentiment.{{train,valid,test}}.tsv")


if __name__ == "__main__":
    main()
