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

In shards (``--num-shards N --shard-id I``, or the ranks of a torchrun/srun launch), each shard takes a
contiguous range of the documents (:mod:`fairseq_maskplug.tools.pass_parts`): pass 1 writes its bucket
counts to ``OUT.shards/``; with every shard's counts (their sum is the corpus distribution of one process,
exactly: integer counts), pass 2 writes its documents' weights; rank 0, or ``fairseq-maskplug-merge-shards
OUT`` after independent jobs, draws the documents from all the weights with ``--seed`` and writes ``--out``:
the files of one process (the summary's seconds aside). Independent jobs run every shard twice: the first
run writes the counts and stops, the second weighs (docs/scale.md).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

from fairseq_maskplug.common.atomic import check_output_directory
from fairseq_maskplug.common.option_ranges import number

from fairseq_maskplug.tools.sharding import add_shard_options

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
    add_shard_options(parser, unit="documents")
    return parser.parse_args(argv)


def check_outputs(args) -> None:
    """Refuse now, before any work: an ``--out`` this command may not replace, or one that is, holds
    or lies in an input."""
    check_output_directory(args.out, "--out", COMMAND, [("--corpus", args.corpus), ("--target", args.target)],
                           legacy=WRITES)


def corpus_texts(corpus: str, lines: range = None):
    """The texts of the corpus lines ``lines`` (default: all), in order."""
    from fairseq_maskplug.retrieval.corpus import read_lines

    for n, text in read_lines(corpus, "corpus"):
        if lines is None or n in lines:
            yield text
        if lines is not None and n + 1 >= lines.stop:
            break


def log_weights(args, ratio, lines: range = None, progress=True):
    """The log importance weight of every corpus line of ``lines`` (default: all; ``-inf`` below
    ``--min-words`` or without an n-gram), in one streaming pass."""
    import numpy as np

    from fairseq_maskplug.common.progress import progress_bar
    from fairseq_maskplug.retrieval.dsir import WORD_PUNCT, hashed_ngrams

    weights = []
    for text in progress_bar(corpus_texts(args.corpus, lines), desc="weights", unit="doc", disable=not progress,
                             total=None if lines is None else len(lines)):
        buckets = hashed_ngrams(text, args.buckets, args.ngrams)
        short = len(buckets) == 0 or (args.min_words > 0 and len(WORD_PUNCT.findall(text)) < args.min_words)
        weights.append(-np.inf if short else float(ratio[buckets].sum()))
    return np.asarray(weights, dtype=np.float64)


def write_outputs(out: str, corpus: str, chosen, weights, summary) -> None:
    from fairseq_maskplug.retrieval.corpus import read_lines
    from fairseq_maskplug.tools.binarize import atomic_directory

    wanted = set(chosen.tolist())
    with atomic_directory(Path(out), COMMAND, WRITES) as out:
        with open(out / "provenance.tsv", "w") as f:
            f.write("draw\tdoc\tlog_weight\n")
            f.writelines(f"{draw}\t{doc}\t{weights[doc]:.7g}\n" for draw, doc in enumerate(chosen.tolist(), 1))
        with open(out / "retrieved.txt", "w", encoding="utf-8") as f:
            f.writelines(text + "\n" for n, text in read_lines(corpus, "corpus") if n in wanted)
        with open(out / "retrieved.ids", "w") as f:
            f.writelines(f"{doc}\n" for doc in sorted(wanted))
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")


def select(settings: dict, weights, target_texts: int, started: float) -> dict:
    """Draw the documents from ``weights`` (every corpus line's), write ``settings["out"]`` and return the
    summary. ``settings``: the command's options by their names (``num_docs``, ``seed``, ...)."""
    import numpy as np

    from fairseq_maskplug.retrieval.dsir import resample

    eligible = int(np.isfinite(weights).sum())
    if settings["num_docs"] > eligible:
        raise ValueError(f"--num-docs {settings['num_docs']} exceeds the {eligible} documents of {settings['corpus']} "
                         f"that can be selected (with an n-gram and at least --min-words {settings['min_words']} "
                         "words)")
    chosen = resample(weights, settings["num_docs"], np.random.default_rng(settings["seed"]),
                      sample=not settings["top"])
    finite = weights[np.isfinite(weights)]
    summary = {
        "method": "dsir", "documents_selected": int(len(chosen)), "corpus_documents": int(len(weights)),
        "eligible_documents": eligible, "target_texts": target_texts, "buckets": settings["buckets"],
        "ngrams": settings["ngrams"], "min_words": settings["min_words"], "resampled": not settings["top"],
        "seed": settings["seed"],
        "log_weight": {"min": round(float(finite.min()), 4), "median": round(float(np.median(finite)), 4),
                       "max": round(float(finite.max()), 4),
                       "selected_median": round(float(np.median(weights[chosen])), 4)},
        "seconds": round(time.perf_counter() - started, 3), "corpus": os.path.abspath(settings["corpus"]),
        "target": os.path.abspath(settings["target"]),
    }
    write_outputs(settings["out"], settings["corpus"], chosen, weights, summary)
    return summary


def report(summary: dict) -> None:
    print(json.dumps({k: v for k, v in summary.items() if k not in ("corpus", "target")}))


def main(argv=None) -> int:
    configure_tool_output()
    args = parse_args(argv)
    from fairseq_maskplug.retrieval.corpus import read_lines
    from fairseq_maskplug.retrieval.dsir import bucket_counts, fit_distribution, log_ratio, normalised
    from fairseq_maskplug.tools.pass_parts import check_parts_directory
    from fairseq_maskplug.tools.sharding import shard_of

    try:
        shard = shard_of(args)
        check_outputs(args)
        if shard.num_shards > 1:
            check_parts_directory(parts_directory(args.out), COMMAND)
        started = time.perf_counter()
        target_texts = [text for _, text in read_lines(args.target, "target file")]  # every line checked first
        target = fit_distribution(target_texts, args.buckets, args.ngrams)
        if shard.num_shards > 1:
            return run_shard(args, shard, target, len(target_texts), started)
        weights = log_weights(args, log_ratio(target, normalised(bucket_counts(corpus_texts(args.corpus),
                                                                               args.buckets, args.ngrams))))
        summary = select(vars(args), weights, len(target_texts), started)
    except (FileNotFoundError, ValueError, PermissionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    report(summary)
    return 0


# ---- in shards --------------------------------------------------------------------------------


def parts_directory(out: str) -> str:
    """Where the shards of ``--out`` write their parts."""
    return os.path.abspath(out).rstrip(os.sep) + ".shards"


def shard_options(args, documents: int, target_texts: int) -> dict:
    """What every shard's parts depend on (compared on a rerun and between shards), and what the merge
    needs: the inputs' identities and the command's options."""
    from fairseq_maskplug.tools.sharding import file_identity

    return {**file_identity(args.corpus, "corpus"), **file_identity(args.target, "target"), "documents": documents,
            "target_texts": target_texts, "out": os.path.abspath(args.out),
            **{name: getattr(args, name) for name in ("num_docs", "buckets", "ngrams", "min_words", "top", "seed")}}


def pass_parts(parts: str, kind: str, num_shards: int, options: dict):
    from fairseq_maskplug.tools.pass_parts import PassParts, load_array, save_array

    return PassParts(parts, kind, num_shards, options, save_array, load_array)


def run_shard(args, shard, target, target_texts: int, started: float) -> int:
    """Shard ``I`` of ``N`` (module docstring): pass 1 counts the buckets of its documents; with every
    shard's counts (the corpus distribution, exact: integer sums), pass 2 weighs its documents; the merging
    process (rank 0 of a launch, or ``fairseq-maskplug-merge-shards OUT``) draws from all the weights."""
    from fairseq_maskplug.data.track_shards import shard_lines
    from fairseq_maskplug.retrieval.corpus import count_lines
    from fairseq_maskplug.retrieval.dsir import bucket_counts, log_ratio, normalised
    from fairseq_maskplug.tools.pass_parts import make_parts_directory, shard_pass
    from fairseq_maskplug.tools.sharding import shard_lines_text, wait_for_every_shard

    documents = count_lines(args.corpus, "corpus")  # every line checked before any work
    parts = parts_directory(args.out)
    options = shard_options(args, documents, target_texts)
    lines = shard_lines(documents, shard.num_shards, shard.shard_id, 1)
    make_parts_directory(parts, COMMAND)
    counts = shard_pass(pass_parts(parts, "counts", shard.num_shards, options), shard, lines, documents,
                        lambda lines: bucket_counts(corpus_texts(args.corpus, lines), args.buckets, args.ngrams),
                        "counts", "each skips its counts and weighs its documents", "documents")
    if counts is None:  # independent jobs: the second run of each shard goes on
        return 0
    raw = normalised(sum(counts))
    where = shard_lines_text(shard, lines, "documents")
    weights = pass_parts(parts, "weights", shard.num_shards, options)
    if weights.done(shard.shard_id, lines):
        print(f"{where}: its weights are written already: skipped", flush=True)
    else:
        weights.write(shard.shard_id, lines, log_weights(args, log_ratio(target, raw), lines))
    wait_for_every_shard(shard)
    if not shard.merges:
        print(f"{where}: weights written; when every shard is written: fairseq-maskplug-merge-shards {args.out}",
              flush=True)
        return 0
    report(merge_select_shards(args.out, started))
    return 0


def merge_select_shards(out: str, started: float = None) -> dict:
    """Write ``out`` from the weights its shards wrote, then remove the parts; returns the summary (the merge
    step of rank 0, and of ``fairseq-maskplug-merge-shards``)."""
    import numpy as np

    from fairseq_maskplug.tools.pass_parts import found_parts, remove_parts_directory

    started = time.perf_counter() if started is None else started
    parts = parts_directory(out)
    num_shards, options = found_parts(parts, "weights")
    check_output_directory(out, "--out", COMMAND, [("--corpus", options["corpus"]), ("--target", options["target"])],
                           legacy=WRITES)
    weights = np.concatenate(pass_parts(parts, "weights", num_shards, options).read_all(options["documents"]))
    summary = select(options, weights, options["target_texts"], started)
    remove_parts_directory(parts, COMMAND)
    return summary


if __name__ == "__main__":
    sys.exit(main())
