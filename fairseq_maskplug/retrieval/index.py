"""A BM25 index built in chunks into the compressed postings of :mod:`.postings`, memory-mapped on load.

The builder reads the corpus twice and never holds more than ``chunk_docs`` documents' postings:

1. analyse each chunk (a document's tokens become term ids as it is read; with the default analyser in
   the compiled kernel of :mod:`.word_kernel`, the same ids), count (document, term) frequencies, write
   them sorted by term to a temporary file and add to the per-term document frequencies and the document
   lengths;
2. with N, every n_t and avgdl known: write each chunk's postings as a run on disk (sorted by term again
   only where its terms were renumbered: pass 1 in processes or jobs), then read
   the terms part by part from every run (chunks in document order, so each term's documents ascend) and
   pack them with each block's largest Lucene BM25 score (:func:`~.analysis.lucene_term_score`, rounded to
   float32) into the output files.

Memory: the vocabulary, one int32 length per document and one chunk's postings or one part of terms.
Disk: about 1.8 bytes per (document, distinct term) pair on a Zipf corpus (:mod:`.postings`), plus
temporary chunk files and runs of 24 bytes per pair, removed at the end. The directory also holds
``params.json`` (k1, b, avgdl, the block size) and ``maskplug_index.json``: the index format, the
corpus's SHA-256 and line count, the analyser and k1/b, checked before an index is reused (an index of
another format is refused in one line), and each index file's byte length and SHA-256
(:mod:`..common.file_records`): lengths are compared at every reuse, sums with ``--verify-data``.
Document ids are corpus line numbers (0-based), empty lines included.

Corpus shards (``corpus_shards`` K > 1, ``retrieve --corpus-shards K``): pass 1 is the same (N, every
term's document frequency and the documents' lengths over the whole corpus: the *global* statistics, as
Elasticsearch's ``dfs_query_then_fetch``); pass 2 writes K indexes ``shard0/`` ... ``shardK-1/``, each
of a contiguous range of documents (:func:`corpus_shard_ranges`) with local document ids, every
posting's score computed with the global statistics, so a posting holds the float it holds in the
one-index build. Each shard is an index of its own (the whole vocabulary; ``params.json`` counts its
documents); the top manifest lists the shards with their first document, and records
every file of every shard. :class:`~.search.ShardedSearcher` asks every shard and merges. The shards can also be
built by several jobs, pass 1 included (:mod:`.index_shards`).
"""

import fcntl
import glob
import itertools
import json
import os
import shutil
import sys
import time
from contextlib import contextmanager
from typing import Dict

import numpy as np

from ..common.atomic import is_write_failure, temporary_name, tree_bytes, write_failed
from ..common.file_records import DamagedFileError, file_record, file_sha256, read_manifest as read_json_manifest
from ..common.file_records import recorded_damage
from . import postings, word_kernel
from .analysis import Analyser, check_bm25_parameters, lucene_idf
from .postings import posting_scores
from .corpus import count_lines, read_lines

MANIFEST = "maskplug_index.json"
#: documents a chunk of pass 1 (25,000: 16.5 s and 396 MiB for 1M documents of 50-200 words, 2026-11-27, against
#: 18.4 s and 382 MiB at 10,000, 18.2 s and 434 MiB at 50,000, 17.9 s and 578 MiB at 100,000; one run each)
CHUNK_DOCS = 25_000
FORMAT = 2  # 1: bm25s's format (float32 scores and int32 ids); 2: the compressed postings of .postings


def index_settings(corpus: str, analyser: Analyser, k1: float, b: float, corpus_shards: int = 1) -> dict:
    """What an index must match to be reused: the corpus's content, the scoring settings and the number of
    corpus shards (recorded only when above 1, so that an index of one shard built before it keeps its
    manifest)."""
    settings = {"format": FORMAT, "corpus_sha256": file_sha256(corpus), "analyser": analyser.settings(),
                "k1": k1, "b": b}
    if corpus_shards > 1:
        settings["corpus_shards"] = corpus_shards
    return settings


def corpus_shard_ranges(documents: int, shards: int) -> list:
    """The documents of each of ``shards`` corpus shards: contiguous, as even as can be, tiling them."""
    if shards < 1:
        raise ValueError(f"--corpus-shards must be >= 1, got {shards}")
    return [range(documents * i // shards, documents * (i + 1) // shards) for i in range(shards)]


REBUILD = "remove the --index directory to rebuild it (or copy it again)"


def read_manifest(index_dir: str) -> dict:
    """An index's manifest; an index of another format is refused in one line that says how to rebuild it."""
    path = os.path.join(index_dir, MANIFEST)
    if not os.path.isfile(path):
        raise ValueError(f"{index_dir} is not an index of this tool (no {MANIFEST}); give another --index "
                         f"or remove the directory")
    manifest = read_json_manifest(path, REBUILD)
    if manifest.get("format") != FORMAT:
        raise ValueError(f"--index {index_dir} is in index format {manifest.get('format')} of an earlier version "
                         f"(this version reads format {FORMAT}: compressed postings); {REBUILD}")
    return manifest


def _setting(record: dict, key: str):
    """A setting of an index manifest or of :func:`index_settings`: one corpus shard where none is recorded."""
    return record.get(key, 1 if key == "corpus_shards" else None)


def check_reusable(index_dir: str, settings: dict, checksum: bool = False) -> dict:
    """The manifest of ``index_dir`` if it was built with ``settings`` and its files are whole (their
    lengths, and with ``checksum`` their SHA-256, as recorded); otherwise a ValueError naming what
    differs or the damaged file."""
    manifest = read_manifest(index_dir)
    keys = list(settings) + ["corpus_shards"] * ("corpus_shards" not in settings)
    differs = [key for key in keys if _setting(manifest, key) != _setting(settings, key)]
    if differs:
        what = ", ".join("corpus content" if k == "corpus_sha256" else k for k in differs)
        raise ValueError(f"--index {index_dir} was built with a different {what}; give a new --index directory "
                         f"(or remove this one to rebuild it)")
    for name, record in manifest.get("files", {}).items():
        damage = recorded_damage(os.path.join(index_dir, name), record, checksum)
        if damage is not None:
            raise DamagedFileError(f"index file {damage}: {REBUILD}")
    return manifest


def _chunk_postings(ids: np.ndarray, lengths: np.ndarray, first_doc: int):
    """(doc, term, tf) arrays of one chunk (its documents' term ids end to end, and their lengths), sorted by term
    then doc (the order pass 2 writes a term's postings in)."""
    docs = np.repeat(np.arange(first_doc, first_doc + len(lengths), dtype=np.int64), lengths)
    keys, tf = np.unique((ids.astype(np.int64) << 32) | docs, return_counts=True)
    return (keys & 0xFFFFFFFF).astype(np.int32), (keys >> 32).astype(np.int32), tf.astype(np.int32)


def analyse_chunks(texts, first_doc: int, analyser: Analyser, chunk_docs: int, directory: str, progress: bool,
                   desc: str, total: int = None):
    """Pass 1 over ``texts`` (documents numbered from ``first_doc``): every ``chunk_docs`` documents' postings
    ``(doc, term, tf)`` in a chunk file of ``directory``. Returns ``(vocabulary, document frequencies, document
    lengths, chunk files)``: terms numbered in order of first appearance, the chunk files as ``(path,
    documents)``. A document's tokens become term ids as it is read (4 bytes a token held, not a string); with
    the default analyser, a chunk at a time in :mod:`.word_kernel` (the same results)."""
    from array import array

    from ..common.progress import progress_bar

    if word_kernel.applies_to(analyser):
        table = word_kernel.TermTable()

        def analyse_chunk(chunk, first):
            _, chunk_lengths, chunk_postings = word_kernel.analyse(chunk, table, analyser, first)
            return chunk_lengths, chunk_postings, table.terms

        def vocabulary():
            return word_kernel.vocabulary(table)
    else:
        vocab: Dict[str, int] = {}

        def analyse_chunk(chunk, first):
            ids, chunk_lengths = array("q"), array("q")
            for text in chunk:
                tokens = analyser.tokens(text)
                ids.extend(vocab.setdefault(tok, len(vocab)) for tok in tokens)
                chunk_lengths.append(len(tokens))
            chunk_lengths = np.frombuffer(chunk_lengths, dtype=np.int64)
            return (chunk_lengths, np.stack(_chunk_postings(np.frombuffer(ids, dtype=np.int64), chunk_lengths, first)),
                    len(vocab))

        def vocabulary():
            return vocab

    doc_freq = np.zeros(0, dtype=np.int64)
    lengths, chunk_files = [], []
    bar = progress_bar(total=total, desc=desc, unit="doc", disable=None if progress else True)
    texts = iter(texts)
    first = first_doc
    while True:
        chunk = list(itertools.islice(texts, chunk_docs))
        if not chunk:
            break
        chunk_lengths, chunk_postings, terms = analyse_chunk(chunk, first)
        del chunk
        doc_freq = np.concatenate([doc_freq, np.zeros(terms - len(doc_freq), dtype=np.int64)])
        doc_freq += np.bincount(chunk_postings[1], minlength=len(doc_freq))
        path = os.path.join(directory, f"chunk{len(chunk_files)}.npy")
        np.save(path, chunk_postings)
        chunk_files.append((path, range(first, first + len(chunk_lengths))))
        first += len(chunk_lengths)
        lengths.append(chunk_lengths.astype(np.int32))
        bar.update(len(chunk_lengths))
    bar.close()
    return vocabulary(), doc_freq, np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int32), chunk_files


def analyse_range(corpus: str, docs: range, analyser: Analyser, chunk_docs: int, directory: str,
                  progress: bool = False):
    """Pass 1 over the corpus lines ``docs`` alone, with a vocabulary of their own: their statistics ``(terms in
    order of first appearance, document frequencies, lengths)`` and their chunk files in ``directory``."""
    texts = (text for n, text in itertools.takewhile(lambda line: line[0] < docs.stop, read_lines(corpus, "corpus"))
             if n >= docs.start)
    vocab, doc_freq, lengths, chunks = analyse_chunks(texts, docs.start, analyser, chunk_docs, directory, progress,
                                                      "index pass 1/2 (analyse), this shard", total=len(docs))
    return (sorted(vocab, key=vocab.get), doc_freq, lengths), chunks


def global_vocabulary(statistics: list):
    """``(vocabulary, maps, document frequencies, document lengths)`` of the statistics of consecutive ranges of
    documents, in order: the vocabulary in the order of first appearance over the whole corpus, and for each
    range the global id of each of its own term ids."""
    vocab, maps = {}, []
    for terms, _, _ in statistics:
        maps.append(np.fromiter((vocab.setdefault(term, len(vocab)) for term in terms), dtype=np.int64,
                                count=len(terms)))
    doc_freq = np.zeros(len(vocab), dtype=np.int64)
    for (_, range_freq, _), term_map in zip(statistics, maps):
        np.add.at(doc_freq, term_map, range_freq)
    return vocab, maps, doc_freq, np.concatenate([lengths for _, _, lengths in statistics])


def _analyse_part(job):
    corpus, docs, analyser, chunk_docs, directory = job
    os.makedirs(directory)
    return analyse_range(corpus, docs, analyser, chunk_docs, directory)


def _stop_with_parent(parent: int) -> None:
    """A pass-1 worker dies with the command that forked it (Linux's parent-death signal): a command killed
    with SIGKILL would otherwise leave it writing into the temporary directory that the next run removes."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)


def analyse_in_processes(corpus: str, analyser: Analyser, chunk_docs: int, directory: str, workers: int,
                         progress: bool):
    """Pass 1 in ``workers`` forked processes, each over a contiguous range of the lines with a vocabulary of its
    own (as the jobs of ``--build-shard``); the vocabularies are merged in range order (:func:`global_vocabulary`:
    the order of first appearance over the whole corpus) and each chunk entry carries its range's map to the
    global ids, applied as pass 2 reads it, so pass 2 writes the bytes of a one-process build (tested). Returns
    what :func:`analyse_chunks` returns, its chunks as ``(path, documents, map)``."""
    import multiprocessing

    from ..common.progress import progress_bar

    ranges = [docs for docs in corpus_shard_ranges(count_lines(corpus, "corpus"), workers) if len(docs)]
    jobs = [(corpus, docs, analyser, chunk_docs, os.path.join(directory, f"analysed{i}")) for i, docs in
            enumerate(ranges)]
    with multiprocessing.get_context("fork").Pool(max(1, len(jobs)), _stop_with_parent, (os.getpid(),)) as pool:
        results = list(progress_bar(pool.imap(_analyse_part, jobs), total=len(jobs), unit="range",
                                    desc=f"index pass 1/2 (analyse, {len(jobs)} processes)",
                                    disable=None if progress else True))
    vocab, maps, doc_freq, doc_len = global_vocabulary([statistics for statistics, _ in results] or
                                                       [([], np.zeros(0, np.int64), np.zeros(0, np.int32))])
    return vocab, doc_freq, doc_len, [(path, held, term_map) for (_, chunks), term_map in zip(results, maps)
                                      for path, held in chunks]


def build_index(corpus: str, index_dir: str, analyser: Analyser, k1: float, b: float,
                chunk_docs: int = CHUNK_DOCS, progress: bool = True, settings: dict = None, corpus_shards: int = 1,
                block: int = postings.BLOCK, workers: int = 1) -> dict:
    """Index ``corpus`` (one document per line) into ``index_dir``, written atomically
    (built under a temporary name, renamed at the end), in ``corpus_shards`` shards with the global
    statistics (the module's docstring), postings in blocks of ``block``, pass 1 in ``workers`` processes
    (:func:`analyse_in_processes`: the same index). Returns the manifest."""
    check_bm25_parameters(k1, b)
    if chunk_docs < 1:
        raise ValueError(f"--chunk-docs must be >= 1, got {chunk_docs}")
    corpus_shard_ranges(0, corpus_shards)  # checks the number
    settings = settings or index_settings(corpus, analyser, k1, b, corpus_shards)
    started = time.perf_counter()
    tmp = temporary_name(index_dir.rstrip("/"))
    os.makedirs(tmp)
    try:
        if workers > 1:
            vocab, doc_freq, doc_len, chunk_files = analyse_in_processes(corpus, analyser, chunk_docs, tmp, workers,
                                                                         progress)
        else:
            texts = (text for _, text in read_lines(corpus, "corpus"))
            vocab, doc_freq, doc_len, chunk_files = analyse_chunks(texts, 0, analyser, chunk_docs, tmp, progress,
                                                                   "index pass 1/2 (analyse)")
        scoring = global_scoring(corpus, analyser, doc_len, doc_freq, k1, b)
        ranges = corpus_shard_ranges(len(doc_len), corpus_shards)
        if corpus_shards == 1:
            nnz = _write_postings(tmp, chunk_files, ranges[0], doc_freq, scoring, vocab, progress, "index pass 2/2",
                                  block=block)
        else:
            nnz = 0
            for i, docs in enumerate(ranges):
                shard_dir = os.path.join(tmp, f"shard{i}")
                os.makedirs(shard_dir)
                nnz += _write_postings(shard_dir, chunk_files, docs, None, scoring, vocab, progress,
                                       f"index pass 2/2, shard {i + 1} of {corpus_shards}", block=block)
        for path, *_ in chunk_files:
            os.remove(path)
        for part in glob.glob(os.path.join(tmp, "analysed*")):  # the workers' directories of pass 1
            os.rmdir(part)
        manifest = write_manifest(tmp, settings, corpus, scoring, len(vocab), nnz, started, ranges)
    except BaseException as error:
        written = tree_bytes(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        if is_write_failure(error):
            raise write_failed(index_dir, error, written) from None
        raise
    try:
        os.rename(tmp, index_dir)  # replaces an empty directory; a non-empty one is never replaced
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ValueError(f"--index {index_dir} appeared while the index was built and is not empty: it is left as "
                         "it is and the new index is not kept") from None
    return manifest


def global_scoring(corpus: str, analyser: Analyser, doc_len: np.ndarray, doc_freq: np.ndarray, k1: float,
                   b: float) -> tuple:
    """``(idf, document lengths, avgdl, k1, b)`` of Lucene's BM25 from the whole corpus's statistics: N counts
    the documents with a token, as Lucene's ``docCount`` does."""
    scored = int((doc_len > 0).sum())
    if scored == 0:
        raise ValueError(f"{corpus}: no line of the corpus has a token the analyser keeps "
                         f"(pattern {analyser.pattern!r}); nothing can be retrieved")
    return lucene_idf(scored, doc_freq), doc_len, float(doc_len.sum()) / scored, k1, b


def write_manifest(directory: str, settings: dict, corpus: str, scoring: tuple, terms: int, postings: int,
                   started: float, ranges: list) -> dict:
    """Write the index's manifest (after every other file of ``directory``: it records them) and return it."""
    _, doc_len, avgdl, _, _ = scoring
    files = {os.path.relpath(path, directory): file_record(path) for path in sorted(_files_under(directory))}
    manifest = dict(settings, corpus=os.path.abspath(corpus), documents=int(len(doc_len)),
                    scored_documents=int((doc_len > 0).sum()), terms=terms, postings=postings, avgdl=avgdl,
                    build_seconds=round(time.perf_counter() - started, 3), files=files)
    if len(ranges) > 1:
        manifest["shards"] = [{"directory": f"shard{i}", "first_document": docs.start, "documents": len(docs)}
                              for i, docs in enumerate(ranges)]
    with open(os.path.join(directory, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


#: postings per part of the encoding pass (whole terms; a longer term is a part of its own): about 25 MB of
#: temporary arrays per million
PART_POSTINGS = 1_000_000


def term_parts(indptr: np.ndarray) -> list:
    """Consecutive ranges of whole terms holding about :data:`PART_POSTINGS` postings each (a term with more
    alone), tiling the terms."""
    parts, term = [], 0
    terms = len(indptr) - 1
    while term < terms:
        last = int(np.searchsorted(indptr, indptr[term] + PART_POSTINGS, side="right")) - 1
        last = min(max(last, term + 1), terms)
        parts.append(range(term, last))
        term = last
    return parts


def _write_postings(directory: str, chunk_files, docs: range, doc_freq, scoring, vocab: dict, progress: bool,
                    desc: str, term_map: np.ndarray = None, block: int = postings.BLOCK) -> int:
    """Pass 2 for the documents ``docs``: their postings, term-major, with document ids counted from
    ``docs.start``, packed with their scores' block maxima from the global statistics ``scoring`` (idf,
    document lengths, avgdl, k1, b) into the compressed files of :mod:`.postings`, and ``params.json``;
    ``doc_freq``: the documents of each term among ``docs`` (None: counted from the chunks); ``term_map``: the
    global id of each term id the chunks hold (chunks analysed with a vocabulary of their own shard); a chunk
    entry ``(path, documents, map)`` brings its own (pass 1 in processes).

    Each chunk's postings are sorted by term into a run beside the output (12 bytes a posting, removed at the
    end), with where each part of :func:`term_parts` starts in it; each part is then read from every run (the
    chunks in document order, so a stable sort by term keeps each term's documents ascending) and encoded.
    Memory: one chunk, then one part. Returns the number of postings."""
    from ..common.progress import progress_bar

    idf, doc_len, avgdl, k1, b = scoring
    chunks = [(path, held, own[0] if own else term_map) for path, held, *own in chunk_files
              if held.start < docs.stop and docs.start < held.stop]

    def postings_of(path, chunk_map):
        chunk_docs, terms, tf = np.load(path)
        if chunk_map is not None:
            terms = chunk_map[terms].astype(np.int32)
        inside = (chunk_docs >= docs.start) & (chunk_docs < docs.stop)
        return chunk_docs[inside], terms[inside], tf[inside]

    if doc_freq is None:
        doc_freq = np.zeros(len(idf), dtype=np.int64)
        for path, _, chunk_map in chunks:
            doc_freq += np.bincount(postings_of(path, chunk_map)[1], minlength=len(idf))
    indptr = np.concatenate([[0], np.cumsum(doc_freq)]).astype(np.int64)
    nnz = int(indptr[-1])
    parts = term_parts(indptr)
    bounds = np.array([part.start for part in parts] + [len(doc_freq)], dtype=np.int64)
    runs = []  # (path, postings, where each part starts)
    for c, (path, _, chunk_map) in enumerate(progress_bar(chunks, desc=desc, unit="chunk",
                                                          disable=None if progress else True)):
        chunk_docs, terms, tf = postings_of(path, chunk_map)
        # by term, documents ascending within a term: pass 1 writes them so, unless its terms were renumbered
        order = slice(None) if np.all(terms[1:] >= terms[:-1]) else np.argsort(terms, kind="stable")
        run = os.path.join(directory, f"run{c}.tmp")
        with open(run, "wb") as f:
            for row in (chunk_docs[order] - docs.start, tf[order], terms[order]):
                np.ascontiguousarray(row, dtype="<i4").tofile(f)
        runs.append((run, len(terms), np.searchsorted(terms[order], bounds)))
    lengths = doc_len[docs.start:docs.stop]

    def part_rows(i):
        """The documents, frequencies and terms of part ``i`` from every run, in run (document) order."""
        rows = [[np.fromfile(run, dtype="<i4", count=int(at[i + 1] - at[i]), offset=4 * (row * count + int(at[i])))
                 for run, count, at in runs] for row in range(3)]
        return [np.concatenate(row) if row else np.zeros(0, np.int32) for row in rows]

    def encoded_parts():
        for i, part in enumerate(progress_bar(parts, desc=f"{desc}, packing", unit="part",
                                              disable=None if progress else True)):
            local, tf, terms = part_rows(i)
            order = np.argsort(terms, kind="stable")  # by term; within a term, runs in document order
            local, tf, terms = local[order], tf[order], terms[order]
            yield local, tf, doc_freq[part.start:part.stop], posting_scores(idf[terms], tf, lengths[local], avgdl,
                                                                            k1, b)

    postings.write(directory, encoded_parts(), indptr, idf, lengths, vocab, block)
    for run, _, _ in runs:
        os.remove(run)
    with open(os.path.join(directory, "params.json"), "w") as f:
        json.dump({"format": FORMAT, "k1": k1, "b": b, "avgdl": avgdl, "documents": len(docs),
                   "block": block}, f, indent=1)
    return nnz


def _files_under(directory: str):
    for root, _, names in os.walk(directory):
        yield from (os.path.join(root, name) for name in names)


def is_empty_directory(path: str) -> bool:
    return os.path.isdir(path) and not os.listdir(path)


@contextmanager
def index_lock(index_dir: str):
    """Hold an exclusive lock on ``index_dir``'s parent directory while the index is checked or
    built, so that a second run on the same ``--index`` waits for the first run's build and then
    reuses it (instead of building its own beside it)."""
    parent = os.path.dirname(os.path.abspath(index_dir.rstrip("/"))) or "."
    os.makedirs(parent, exist_ok=True)  # a missing parent is made, like fairseq-train's --save-dir
    fd = os.open(parent, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"[retrieve] another run holds {parent} (building an index there): waiting for it",
                  file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def index_bytes(index_dir: str) -> int:
    return sum(os.path.getsize(path) for path in _files_under(index_dir))
