"""Select task-relevant documents from a general corpus with DSIR (Xie et al., NeurIPS 2023).

Importance resampling over hashed n-grams (``fairseq_maskplug.retrieval.dsir``): the task's texts
(``--target``) and the corpus (``--corpus``, one document per line) are each fitted as a
distribution over 10,000 hashed unigram and bigram buckets; every document gets the log importance
weight sum over its n-grams of log p_target - log p_corpus, and ``--num-docs`` documents are drawn
without replacement with probabilities proportional to the weights (``--top`` keeps the largest
instead). No index, no queries: two streaming passes over the corpus.

Example (as many documents as BM25 retrieved, for the TLM recipe)::

    fairseq-maskplug-select --corpus general.txt --target task.train.txt --num-docs 15786 --out selected/

Output in ``--out``, the layout of ``fairseq-maskplug-retrieve`` so that ``--task tlm`` and the
recipes take either (a new or empty directory, or this command's earlier output, replaced
atomically): ``retrieved.txt`` (the documents, in corpus order), ``retrieved.ids`` (their 0-based
corpus line numbers), ``provenance.tsv`` (``draw doc log_weight``: the order drawn, the line, its
log importance weight) and ``summary.json`` (counts, settings, timings, the weights' spread).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

from fairseq_maskplug.common.option_ranges import number

from . import HelpFormatter, configure_tool_output

COMMAND = "fairseq-maskplug-select"
WRITES = ("provenance.tsv", "retrieved.txt", "retrieved.ids", "summary.json")


def parse_args(argv=None):
    from fairseq_maskplug.retrieval.dsir import BUCKETS, NGRAMS

    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--corpus", required=True, help="general corpus: UTF-8, one document per line")
    parser.add_argument("--target", required=True, help="the task's texts: UTF-8, one per line")
    parser.add_argument("--num-docs", required=True, type=number("[1, inf)", int),
                        help="documents to select (at most the corpus's documents with an n-gram)")
    parser.add_argument("--out", required=True, help="output directory: new or empty, or this command's earlier "
                                                     "output, which is replaced atomically")
    parser.add_argument("--buckets", type=number("[1, inf)", int), default=BUCKETS,
                        help="hash buckets of the n-gram features (the paper's and authors' code: 10,000)")
    parser.add_argument("--ngrams", type=number("[1, inf)", int), default=NGRAMS,
                        help="longest n-gram: 2 = unigrams and bigrams (the paper's and authors' code)")
    parser.add_argument("--min-words", type=number("[0, inf)", int), default=0,
                        help="documents of fewer words are never selected (ours: 0; the authors' package: 100, "
                             "for Pile documents)")
    parser.add_argument("--top", action="store_true",
                        help="keep the --num-docs largest weights instead of resampling (deterministic; the "
                             "paper resamples)")
    parser.add_argument("--seed", type=number("[0, inf)", int), default=0, help="seed of the resampling")
    return parser.parse_args(argv)


def check_outputs(args) -> None:
    """Refuse now, before any work: an ``--out`` this command may not replace, or one that is, holds
    or lies in an input."""
    from fairseq_maskplug.common.atomic import check_output_directory

    check_output_directory(args.out, "--out", COMMAND, [("--corpus", args.corpus), ("--target", args.target)],
                           legacy=WRITES)


def log_weights(args, ratio, progress=True):
    """The log importance weight of every corpus line (``-inf`` below ``--min-words`` or without an
    n-gram), in one streaming pass."""
    import numpy as np

    from fairseq_maskplug.common.progress import progress_bar
    from fairseq_maskplug.retrieval.corpus import read_lines
    from fairseq_maskplug.retrieval.dsir import WORD_PUNCT, hashed_ngrams

    weights = []
    for _, text in progress_bar(read_lines(args.corpus, "corpus"), desc="weights", unit="doc", disable=not progress):
        buckets = hashed_ngrams(text, args.buckets, args.ngrams)
        short = len(buckets) == 0 or (args.min_words > 0 and len(WORD_PUNCT.findall(text)) < args.min_words)
        weights.append(-np.inf if short else float(ratio[buckets].sum()))
    return np.asarray(weights, dtype=np.float64)


def write_outputs(args, chosen, weights, summary) -> None:
    from fairseq_maskplug.retrieval.corpus import read_lines
    from fairseq_maskplug.tools.binarize import atomic_directory

    wanted = set(chosen.tolist())
    with atomic_directory(Path(args.out), COMMAND, WRITES) as out:
        with open(out / "provenance.tsv", "w") as f:
            f.write("draw\tdoc\tlog_weight\n")
            f.writelines(f"{draw}\t{doc}\t{weights[doc]:.7g}\n" for draw, doc in enumerate(chosen.tolist(), 1))
        with open(out / "retrieved.txt", "w", encoding="utf-8") as f:
            f.writelines(text + "\n" for n, text in read_lines(args.corpus, "corpus") if n in wanted)
        with open(out / "retrieved.ids", "w") as f:
            f.writelines(f"{doc}\n" for doc in sorted(wanted))
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")


def main(argv=None) -> int:
    configure_tool_output()
    args = parse_args(argv)
    import numpy as np

    from fairseq_maskplug.retrieval.corpus import read_lines
    from fairseq_maskplug.retrieval.dsir import fit_distribution, log_ratio, resample

    try:
        check_outputs(args)
        started = time.perf_counter()
        target_texts = [text for _, text in read_lines(args.target, "target file")]  # every line checked first
        target = fit_distribution(target_texts, args.buckets, args.ngrams)
        raw = fit_distribution((text for _, text in read_lines(args.corpus, "corpus")), args.buckets, args.ngrams)
        weights = log_weights(args, log_ratio(target, raw))
        eligible = int(np.isfinite(weights).sum())
        if args.num_docs > eligible:
            raise ValueError(f"--num-docs {args.num_docs} exceeds the {eligible} documents of {args.corpus} that "
                             f"can be selected (with an n-gram and at least --min-words {args.min_words} words)")
        chosen = resample(weights, args.num_docs, np.random.default_rng(args.seed), sample=not args.top)
        finite = weights[np.isfinite(weights)]
        summary = {
            "method": "dsir", "documents_selected": int(len(chosen)), "corpus_documents": int(len(weights)),
            "eligible_documents": eligible, "target_texts": len(target_texts), "buckets": args.buckets,
            "ngrams": args.ngrams, "min_words": args.min_words, "resampled": not args.top, "seed": args.seed,
            "log_weight": {"min": round(float(finite.min()), 4), "median": round(float(np.median(finite)), 4),
                           "max": round(float(finite.max()), 4),
                           "selected_median": round(float(np.median(weights[chosen])), 4)},
            "seconds": round(time.perf_counter() - started, 3), "corpus": os.path.abspath(args.corpus),
            "target": os.path.abspath(args.target),
        }
        write_outputs(args, chosen, weights, summary)
    except (FileNotFoundError, ValueError, PermissionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps({k: v for k, v in summary.items() if k not in ("corpus", "target")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
