"""The work of ``fairseq-maskplug-select`` (``preprocess/select_dsir.py`` parses its options, ``args``): DSIR's
importance weights of every corpus document (:func:`log_weights`, :mod:`.dsir`), the draw and ``--out`` written
atomically (:func:`select`), in one process (:func:`run`) or in document shards whose passes are exchanged as
parts (:func:`run_shard`; merged by :func:`merge_select_shards`)."""

import json
import os
import time
from pathlib import Path

from ..common.atomic import check_output_directory

COMMAND = "fairseq-maskplug-select"
WRITES = ("provenance.tsv", "retrieved.txt", "retrieved.ids", "summary.json")


def check_outputs(args) -> None:
    """Refuse now, before any work: an ``--out`` this command may not replace, or one that is, holds
    or lies in an input."""
    check_output_directory(args.out, "--out", COMMAND, [("--corpus", args.corpus), ("--target", args.target)],
                           legacy=WRITES)


def corpus_texts(corpus: str, lines: range = None):
    """The texts of the corpus lines ``lines`` (default: all), in order."""
    from .corpus import read_lines

    for n, text in read_lines(corpus, "corpus"):
        if lines is None or n in lines:
            yield text
        if lines is not None and n + 1 >= lines.stop:
            break


def log_weights(args, ratio, lines: range = None, progress=True):
    """The log importance weight of every corpus line of ``lines`` (default: all; ``-inf`` below
    ``--min-words`` or without an n-gram), in one streaming pass."""
    import numpy as np

    from ..common.progress import progress_bar
    from .dsir import WORD_PUNCT, hashed_ngrams

    weights = []
    for text in progress_bar(corpus_texts(args.corpus, lines), desc="weights", unit="doc", disable=not progress,
                             total=None if lines is None else len(lines)):
        buckets = hashed_ngrams(text, args.buckets, args.ngrams)
        short = len(buckets) == 0 or (args.min_words > 0 and len(WORD_PUNCT.findall(text)) < args.min_words)
        weights.append(-np.inf if short else float(ratio[buckets].sum()))
    return np.asarray(weights, dtype=np.float64)


def write_outputs(out: str, corpus: str, chosen, weights, summary) -> None:
    from .corpus import read_lines
    from ..tools.binarize import atomic_directory

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

    from .dsir import resample

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


def run(args) -> int:
    """The command's work: every input and output checked, then the documents weighed and drawn (in shards:
    :func:`run_shard`); returns 0."""
    from ..tools.pass_parts import check_parts_directory
    from ..tools.sharding import shard_of
    from .corpus import read_lines
    from .dsir import bucket_counts, fit_distribution, log_ratio, normalised

    from ..common.locks import lock_output

    shard = shard_of(args)
    check_outputs(args)
    if shard.num_shards > 1:
        check_parts_directory(parts_directory(args.out), COMMAND)
    if shard.num_shards == 1:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)  # the lock file's directory
    lock = lock_output(args.out, COMMAND) if shard.num_shards == 1 else None  # one writer of --out (OUT.lock)
    try:
        started = time.perf_counter()
        target_texts = [text for _, text in read_lines(args.target, "target file")]  # every line checked first
        target = fit_distribution(target_texts, args.buckets, args.ngrams)
        if shard.num_shards > 1:
            return run_shard(args, shard, target, len(target_texts), started)
        weights = log_weights(args, log_ratio(target, normalised(bucket_counts(
            corpus_texts(args.corpus), args.buckets, args.ngrams))))
        report(select(vars(args), weights, len(target_texts), started))
    finally:
        if lock is not None:
            lock.release()
    return 0


# ---- in shards --------------------------------------------------------------------------------


def parts_directory(out: str) -> str:
    """Where the shards of ``--out`` write their parts."""
    return os.path.abspath(out).rstrip(os.sep) + ".shards"


def shard_options(args, documents: int, target_texts: int) -> dict:
    """What every shard's parts depend on (compared on a rerun and between shards), and what the merge
    needs: the inputs' identities and the command's options."""
    from ..common.file_records import file_sha256
    from ..tools.sharding import file_identity

    return {**file_identity(args.corpus, "corpus"), "corpus_sha256": file_sha256(args.corpus),
            **file_identity(args.target, "target"), "documents": documents,
            "target_texts": target_texts, "out": os.path.abspath(args.out),
            **{name: getattr(args, name) for name in ("num_docs", "buckets", "ngrams", "min_words", "top", "seed")}}


def pass_parts(parts: str, kind: str, num_shards: int, options: dict):
    from ..tools.pass_parts import PassParts, load_array, save_array

    return PassParts(parts, kind, num_shards, options, save_array, load_array)


def run_shard(args, shard, target, target_texts: int, started: float) -> int:
    """Shard ``I`` of ``N`` (the command's docstring, ``preprocess/select_dsir.py``): pass 1 counts the buckets of
    its documents; with every shard's counts (the corpus distribution, exact: integer sums), pass 2 weighs its
    documents; the merging process (rank 0 of a launch, or ``fairseq-maskplug-merge-shards OUT``) draws from all
    the weights."""
    from ..data.track_shards import shard_lines
    from .corpus import count_lines
    from .dsir import bucket_counts, log_ratio, normalised
    from ..tools.pass_parts import make_parts_directory, shard_pass
    from ..tools.sharding import shard_lines_text, wait_for_every_shard

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
    step of rank 0, and of ``fairseq-maskplug-merge-shards``), holding ``--out``'s lock (one writer)."""
    from ..common.locks import OutputLock

    started = time.perf_counter() if started is None else started
    parts = parts_directory(out)
    with OutputLock(out, COMMAND):
        return _merge_select_shards(out, parts, started)


def _merge_select_shards(out: str, parts: str, started: float) -> dict:
    import numpy as np

    from ..tools.pass_parts import found_parts, remove_parts_directory

    num_shards, options = found_parts(parts, "weights")
    check_output_directory(out, "--out", COMMAND, [("--corpus", options["corpus"]), ("--target", options["target"])],
                           legacy=WRITES)
    if "corpus_sha256" in options:  # parts written before it was recorded are merged as before
        from ..common.file_records import check_same_content
        check_same_content(options["corpus"], options["corpus_sha256"], "--corpus", "the document shards")
    weights = np.concatenate(pass_parts(parts, "weights", num_shards, options).read_all(options["documents"]))
    summary = select(options, weights, options["target_texts"], started)
    remove_parts_directory(parts, COMMAND)
    return summary
