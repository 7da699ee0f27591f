"""The corpus shards of one index built by several jobs, each on its own machine, with global statistics.

``retrieve --corpus-shards K --build-shard I`` (independent jobs, e.g. a Slurm array), or ``--corpus-shards
K`` under a ``torchrun``/``srun`` launch of K ranks: job ``I`` builds shard ``I`` of the index that one
process builds with ``--corpus-shards K`` (:func:`~.index.build_index`), file for file the same bytes:

1. **pass 1** (its own documents, :func:`~.index.corpus_shard_ranges`): analyse them in chunks with a
   vocabulary of its own (terms in order of first appearance), write the chunks' postings and then its
   statistics (its terms, their document frequencies among its documents, its documents' lengths) as a
   part (:mod:`fairseq_maskplug.tools.pass_parts`) in ``INDEX.parts/``;
2. with every shard's statistics: the global vocabulary (the shards' terms in shard order, each term where
   it first appears: the one-process order, since the shards are contiguous), N, every term's document
   frequency and avgdl (what Elasticsearch's ``dfs_query_then_fetch`` gathers); **pass 2** scores its
   postings with them into ``INDEX.parts/shardI/``;
3. the job that finds every shard built (or rank 0 after a barrier) moves the shards into the index,
   writes its manifest and removes ``INDEX.parts/``.

Independent jobs run every shard twice, as ``select`` and ``pmi-units``: the first run of a shard
writes its statistics and stops (naming the shards still missing), the second scores its postings. A
rerun skips what is written; statistics made from another corpus or with other settings are refused.
"""

import glob
import io
import json
import os
import shutil
import time
from contextlib import contextmanager
from typing import Callable, Optional

import numpy as np

from ..common.atomic import is_write_failure, temporary_name, tree_bytes, write_failed
from ..tools.pass_parts import PassParts, make_parts_directory, remove_if_only_owned, remove_parts_directory
from .analysis import Analyser
from .corpus import count_lines
from .index import (CHUNK_DOCS, _write_postings, analyse_range, corpus_shard_ranges, global_scoring, global_vocabulary,
                    index_lock, read_manifest, write_manifest)


@contextmanager
def removed_on_write_failure(directory: str, parts: str):
    """Remove ``directory`` (what this run was writing) when a write is refused, and the parts directory if
    nothing else is left in it, then raise the one-line :func:`~..common.atomic.write_failed`."""
    try:
        yield
    except OSError as error:
        if not is_write_failure(error):
            raise
        written = tree_bytes(directory)
        shutil.rmtree(directory, ignore_errors=True)
        remove_if_only_owned(parts)
        raise write_failed(directory, error, written) from None


def parts_directory(index_dir: str) -> str:
    """Where the jobs that build the shards of ``index_dir`` write their parts."""
    return os.path.abspath(index_dir).rstrip(os.sep) + ".parts"


def save_statistics(value, f) -> None:
    """A shard's statistics: its terms (JSON, first-appearance order), then its document frequencies and
    document lengths (``.npy``, no pickle)."""
    terms, doc_freq, lengths = value
    header = json.dumps(terms, ensure_ascii=False).encode("utf-8")
    f.write(len(header).to_bytes(8, "little"))
    f.write(header)
    np.save(f, doc_freq.astype(np.int64), allow_pickle=False)
    np.save(f, lengths.astype(np.int32), allow_pickle=False)


def load_statistics(f):
    size = int.from_bytes(f.read(8), "little")
    terms = json.loads(f.read(size).decode("utf-8"))
    rest = io.BytesIO(f.read())
    return terms, np.load(rest, allow_pickle=False), np.load(rest, allow_pickle=False)


def save_json(value, f) -> None:
    f.write(json.dumps(value).encode("utf-8"))


def load_json(f):
    return json.loads(f.read().decode("utf-8"))


def chunk_files(chunks_dir: str, docs: range, chunk_docs: int) -> list:
    """``(path, documents)`` of the chunk files :func:`~.index.analyse_range` wrote for ``docs`` (also after a
    rerun that skipped it)."""
    starts = range(docs.start, docs.stop, chunk_docs)
    return [(os.path.join(chunks_dir, f"chunk{i}.npy"), range(start, min(start + chunk_docs, docs.stop)))
            for i, start in enumerate(starts)]


def take_back_moved_shards(index_dir: str, parts: str, corpus_shards: int) -> None:
    """Move back into ``parts`` the shards that a job killed while assembling had moved into its temporary index
    (called under the index lock, so no live job is assembling; the temporary is removed afterwards as stale)."""
    for stale in glob.glob(glob.escape(index_dir.rstrip("/")) + ".tmp-*"):
        for i in range(corpus_shards):
            moved, home = os.path.join(stale, f"shard{i}"), os.path.join(parts, f"shard{i}")
            if os.path.isdir(moved) and not os.path.exists(home):
                os.rename(moved, home)


def build_index_shard(corpus: str, index_dir: str, analyser: Analyser, k1: float, b: float, corpus_shards: int,
                      shard_id: int, settings: dict, command: str, chunk_docs: int = CHUNK_DOCS, progress: bool = True,
                      meet: Callable[[], None] = lambda: None, say: Callable[[str], None] = print) -> Optional[dict]:
    """Build shard ``shard_id`` of ``index_dir`` (the module's docstring); ``meet()`` returns once every job has
    called it (a launch's barrier; independent jobs: at once). Returns the index's manifest once it is whole
    (this job wrote it), None while other shards are still to run."""
    started = time.perf_counter()
    documents = count_lines(corpus, "corpus")  # every line checked before any work
    ranges = corpus_shard_ranges(documents, corpus_shards)
    docs = ranges[shard_id]
    parts = parts_directory(index_dir)
    make_parts_directory(parts, command)
    options = dict(settings, documents=documents, chunk_docs=chunk_docs)
    where = f"corpus shard {shard_id} of {corpus_shards} (documents {docs.start + 1} to {docs.stop})"
    chunks_dir = os.path.join(parts, f"shard{shard_id}.chunks")
    statistics = PassParts(parts, "statistics", corpus_shards, options, save_statistics, load_statistics)
    built = PassParts(parts, "built", corpus_shards, options, save_json, load_json)
    if built.done(shard_id, docs) or (statistics.done(shard_id, docs) and os.path.isdir(chunks_dir)):
        say(f"{where}: its statistics are written already: skipped")
    else:
        shutil.rmtree(chunks_dir, ignore_errors=True)  # what a killed pass 1 left
        os.makedirs(chunks_dir)
        with removed_on_write_failure(chunks_dir, parts):
            value, _ = analyse_range(corpus, docs, analyser, chunk_docs, chunks_dir, progress)
        statistics.write(shard_id, docs, value)
    meet()
    missing = statistics.missing()
    if missing:
        say(f"{where}: " + statistics.waiting_for(missing, "statistics",
                                                  "each skips its statistics and scores its postings"))
        return None
    vocab, maps, doc_freq, doc_len = global_vocabulary(statistics.read_all(documents))
    scoring = global_scoring(corpus, analyser, doc_len, doc_freq, k1, b)
    if built.done(shard_id, docs):
        say(f"{where}: its postings are written already: skipped")
    else:
        shard_dir = os.path.join(parts, f"shard{shard_id}")
        shutil.rmtree(shard_dir, ignore_errors=True)  # what a killed pass 2 left
        building = temporary_name(shard_dir)
        os.makedirs(building)
        with removed_on_write_failure(building, parts):
            postings = _write_postings(building, chunk_files(chunks_dir, docs, chunk_docs), docs, None, scoring,
                                       vocab, progress, f"index pass 2/2, shard {shard_id + 1} of {corpus_shards}",
                                       term_map=maps[shard_id])
        os.rename(building, shard_dir)
        built.write(shard_id, docs, {"postings": postings, "seconds": round(time.perf_counter() - started, 3)})
        shutil.rmtree(chunks_dir)
    meet()
    with index_lock(index_dir):  # one job assembles; the others find the index whole
        if os.path.isdir(index_dir) and os.listdir(index_dir):
            return read_manifest(index_dir)
        if built.missing():
            say(f"{where}: postings written; the last shard to finish assembles the index")
            return None
        take_back_moved_shards(index_dir, parts, corpus_shards)
        postings = sum(value["postings"] for value in built.read_all(documents))
        tmp = temporary_name(index_dir.rstrip("/"))
        os.makedirs(tmp)
        for i in range(corpus_shards):
            os.rename(os.path.join(parts, f"shard{i}"), os.path.join(tmp, f"shard{i}"))
        try:
            manifest = write_manifest(tmp, settings, corpus, scoring, len(vocab), postings, started, ranges)
        except OSError as error:  # the shards go back where they were: a rerun assembles them
            for i in range(corpus_shards):
                os.rename(os.path.join(tmp, f"shard{i}"), os.path.join(parts, f"shard{i}"))
            shutil.rmtree(tmp)
            raise write_failed(index_dir, error) from None
        if os.path.isdir(index_dir):
            os.rmdir(index_dir)  # empty (checked above)
        os.rename(tmp, index_dir)
        remove_parts_directory(parts, command)
    return manifest
