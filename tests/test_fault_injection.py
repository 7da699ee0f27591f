"""Fault injection for every command that writes: killed, refused a write, or given a damaged input.

Each command in :data:`WRITERS` (one line each; a new writing command joins with one more) runs
in a copy of the same input tree, and the whole tree is compared with that of an uninterrupted run
(JSON fields that hold timings left out):

- **SIGKILL** when its first temporary file appears (mid-write) and half-way through the
  uninterrupted run's duration: every file under its final name is then the input's or the
  uninterrupted run's, whole (a command writing several files may have written some of them; the
  killed run's temporaries and its lock are left for the next run to remove), and a rerun gives the
  uninterrupted run's tree byte for byte, with no temporary left (a command killed after it had
  finished may instead say in one line that nothing is left to do);
- **a file-size limit** (``ulimit -f``, so no root or mount is needed): exit status 2, one line
  naming what could not be written, and the tree as it was;
- **each file it reads that can be checked** (checkpoint, ``.bin``/``.idx``, ``dict.txt``, the
  retrieval index and its manifest), cut at offsets Hypothesis chooses: exit status 2, one line
  naming that file, and the tree as it was.

Training's checkpoint saves are covered by ``test_bad_input``: killed and resumed
(``test_training_killed_with_sigkill_resumes_to_the_uninterrupted_parameters``) and a write
limit while saving (``test_a_write_limit_while_saving_a_checkpoint_keeps_the_last_good_one``).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings, strategies as st

from fairseq_helpers import BIN, REPO, check, one_line_error, train

pytestmark = [pytest.mark.e2e, pytest.mark.full]

TEMPORARY = re.compile(r"\.tmp-\d+")
#: a writer's lock on its output (``fairseq_maskplug/common/locks.py``): a killed run leaves it naming itself, for
#: the next writer to take over and remove, as it leaves its temporaries
LOCK = re.compile(r"\.lock$")
PLAIN = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")


@dataclass(frozen=True)
class Writer:
    """A writing command: its command line in a work tree ``w`` (a copy of the inputs), the files it
    reads whose damage it must name (relative to ``w``), and per JSON file the keys that hold timings
    or the tree's own absolute path."""

    name: str
    argv: Callable[[Path], list]
    reads: Tuple[str, ...] = ()
    volatile: Dict[str, Tuple[str, ...]] = field(default_factory=dict)
    #: files a run writes whole (atomically) while it works and removes when done: present in a killed tree,
    #: absent from a finished one (merge-shards' marker, which lets the next run finish a merge killed while
    #: it removed the parts); a kill that lands while one exists finds it whole, not partial
    markers: Tuple[str, ...] = ()


def tool(name):
    return str(BIN / f"fairseq-maskplug-{name}")


WRITERS = [
    Writer("prepare-text", lambda w: [tool("prepare-text"), "--out", w / "prepared", "--vocab-size", "40",
                                      "--unlabelled", "c", w / "train.txt", w / "valid.txt"]),
    Writer("retrieve-index", lambda w: [tool("retrieve"), "--corpus", w / "corpus.txt", "--index", w / "new_index"],
           volatile={"maskplug_index.json": ("build_seconds", "corpus")}),
    Writer("retrieve", lambda w: [tool("retrieve"), "--corpus", w / "corpus.txt", "--index", w / "index", "--queries",
                                  w / "queries.txt", "--out", w / "retrieved", "--top-k", "200"],
           reads=("index/postings.u32", "index/block_last.npy", "index/maskplug_index.json"),
           volatile={"summary.json": ("query_seconds", "queries_per_second", "corpus")}),
    Writer("retrieve-corpus-shards", lambda w: [tool("retrieve"), "--corpus", w / "corpus.txt", "--index",
                                                w / "new_index", "--corpus-shards", "2"],
           volatile={"maskplug_index.json": ("build_seconds", "corpus")}),
    Writer("retrieve-query-shard", lambda w: [tool("retrieve"), "--corpus", w / "corpus.txt", "--index", w / "index",
                                              "--queries", w / "queries.txt", "--out", w / "retrieved", "--top-k",
                                              "200", "--num-shards", "2", "--shard-id", "1"],
           reads=("index/postings.u32", "index/maskplug_index.json"),
           volatile={"queries.shard1-of-2.json": ("seconds", "options")}),
    Writer("select", lambda w: [tool("select"), "--corpus", w / "corpus.txt", "--target", w / "queries.txt",
                                "--num-docs", "300", "--out", w / "selected"],
           volatile={"summary.json": ("seconds", "corpus", "target")}),
    Writer("select-shard", lambda w: [tool("select"), "--corpus", w / "corpus.txt", "--target", w / "queries.txt",
                                      "--num-docs", "300", "--out", w / "selected", "--num-shards", "2", "--shard-id",
                                      "1"],
           volatile={"counts.shard1-of-2.json": ("options",)}),
    Writer("retrieve-build-shard", lambda w: [tool("retrieve"), "--corpus", w / "corpus.txt", "--index",
                                              w / "sharded-index", "--corpus-shards", "2", "--build-shard", "1",
                                              "--chunk-docs", "500"]),
    Writer("pmi-units-shard", lambda w: [tool("pmi-units"), "--data", w / "bin", "--splits", "train",
                                         "--word-boundaries", "whitespace", "--min-count", "2", "--shard-block-lines",
                                         "64", "--num-shards", "2", "--shard-id", "0"]),
    Writer("score-pll", lambda w: [tool("score-pll"), "--checkpoint", w / "model.pt", "--data", w / "bin", "--splits",
                                   "train", "--word-starts", "token"],
           reads=("model.pt", "bin/train.bin", "bin/train.idx", "bin/dict.txt")),
    Writer("pmi-units", lambda w: [tool("pmi-units"), "--data", w / "bin", "--splits", "train", "--word-boundaries",
                                   "whitespace", "--min-count", "2", "--write-lexicon", w / "lexicon.tsv"],
           reads=("bin/train.bin", "bin/train.idx", "bin/dict.txt")),
    Writer("merge-shards", lambda w: [tool("merge-shards"), w / "sharded"],
           reads=("sharded/train.plt.shard0-of-2.bin", "sharded/train.plt.shard1-of-2.idx", "sharded/train.idx"),
           markers=("sharded/train.plt.merged.json",)),
    Writer("binarize-side-info", lambda w: [tool("binarize-side-info"), "--tokens", w / "train.txt", "--values",
                                            w / "train.values", "--destdir", w / "bin", "--split", "train", "--name",
                                            "flags", "--dtype", "uint8"],
           reads=("bin/train.bin", "bin/train.idx")),
]
IDS = [w.name for w in WRITERS]
BY_NAME = {w.name: w for w in WRITERS}


@pytest.fixture(scope="module")
def inputs(tiny_data, tmp_path_factory):
    """The input tree every command runs in a copy of."""
    root = tmp_path_factory.mktemp("fault_inputs")
    shutil.copytree(tiny_data / "bin", root / "bin")
    shutil.copy(tiny_data / "train.txt", root / "train.txt")
    shutil.copy(tiny_data / "valid.txt", root / "valid.txt")
    (root / "train.values").write_text("".join(" ".join(["1"] * len(line.split())) + "\n"
                                               for line in (root / "train.txt").read_text().splitlines()))
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(400)]
    (root / "corpus.txt").write_text("".join(" ".join(rng.choice(words, 15)) + "\n" for _ in range(3000)))
    (root / "queries.txt").write_text("".join(" ".join(rng.choice(words, 5)) + "\n" for _ in range(20)))
    check(subprocess.run([tool("retrieve"), "--corpus", root / "corpus.txt", "--index", root / "index"],
                         capture_output=True, text=True, env=PLAIN))
    check(train(root / "bin", root / "ck", "--max-epoch", "1"))
    shutil.copy(root / "ck" / "checkpoint_last.pt", root / "model.pt")
    shutil.rmtree(root / "ck")
    shutil.copytree(root / "bin", root / "sharded")
    for shard in ("0", "1"):  # the parts two jobs wrote, for merge-shards
        check(subprocess.run([tool("score-pll"), "--checkpoint", root / "model.pt", "--data", root / "sharded",
                              "--splits", "train", "--word-starts", "token", "--shard-block-lines", "64",
                              "--num-shards", "2", "--shard-id", shard], capture_output=True, text=True, env=PLAIN))
    return root


def snapshot(tree: Path, writer: Writer, temporaries: bool = False) -> Dict[str, bytes]:
    """Every file under ``tree`` by relative path (JSON timings left out); the killed runs' temporaries and
    locks are left out unless ``temporaries``."""
    files = {}
    for path in sorted(tree.rglob("*")):
        relative = path.relative_to(tree).as_posix()
        left_by_a_kill = TEMPORARY.search(relative) or LOCK.search(relative)
        if not path.is_file() or (not temporaries and left_by_a_kill) or "preprocess.log" in relative:
            continue
        data = path.read_bytes()
        if path.name in writer.volatile:
            value = json.loads(data)
            for key in writer.volatile[path.name]:
                value.pop(key, None)
            data = json.dumps(value, sort_keys=True).encode()
        files[relative] = data
    return files


def whole_json(data: bytes) -> bool:
    try:
        json.loads(data)
        return True
    except ValueError:
        return False


def work_copy(inputs: Path, tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(inputs, tmp_path / name, symlinks=True))


def run_writer(writer: Writer, tree: Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in writer.argv(tree)], capture_output=True, text=True, cwd=REPO, env=PLAIN,
                          **kwargs)


@pytest.fixture(scope="module")
def uninterrupted(inputs, tmp_path_factory):
    """Per writer: the tree of an uninterrupted run and its duration in seconds."""
    done = {}
    for writer in WRITERS:
        tree = work_copy(inputs, tmp_path_factory.mktemp("whole"), writer.name)
        started = time.perf_counter()
        check(run_writer(writer, tree))
        done[writer.name] = (snapshot(tree, writer), time.perf_counter() - started)
        assert snapshot(tree, writer) != snapshot(inputs, writer), f"{writer.name} wrote nothing"
    return done


def holds_a_temporary(tree: Path) -> bool:
    """Whether a temporary is under ``tree``; a directory the writer renames while it is walked reads as
    none yet (the walk raised FileNotFoundError on a 2-core machine under load)."""
    try:
        return any(TEMPORARY.search(p.name) for p in tree.rglob("*"))
    except FileNotFoundError:
        return False


def kill_at(writer: Writer, tree: Path, point, duration: float) -> None:
    """Start ``writer`` and SIGKILL it when its first temporary appears (``point == "temporary"``)
    or after ``point`` times ``duration`` seconds."""
    proc = subprocess.Popen([str(a) for a in writer.argv(tree)], cwd=REPO, env=PLAIN, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.perf_counter() + (duration * point if point != "temporary" else duration * 3 + 60)
    while proc.poll() is None and time.perf_counter() < deadline:
        if point == "temporary" and holds_a_temporary(tree):
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


# when the first temporary appears (mid-write) and half-way (a command that writes several files has finished some):
# a third point at 0.9 retested the second's paths (33 runs, about 6 minutes of the full tier, 2026-11-29)
@pytest.mark.parametrize("point", ["temporary", 0.5])
@pytest.mark.parametrize("name", IDS)
def test_killed_then_rerun_gives_the_uninterrupted_output(inputs, uninterrupted, tmp_path, name, point):
    writer = BY_NAME[name]
    whole, duration = uninterrupted[name]
    tree = work_copy(inputs, tmp_path, "killed")
    kill_at(writer, tree, point, duration)
    before = snapshot(inputs, writer)
    partial = [path for path, data in snapshot(tree, writer).items() if data not in (before.get(path), whole.get(path))
               and not (path in writer.markers and whole_json(data))]
    assert not partial, f"{name} killed at {point}: files under their final names that are not whole: {partial}"
    finished = snapshot(tree, writer) == whole  # killed after it had finished
    rerun = run_writer(writer, tree)
    if finished and rerun.returncode != 0:
        one_line_error(rerun)  # nothing left to do (merge-shards: no parts), said in one line
    else:
        check(rerun)
    assert snapshot(tree, writer) == whole
    assert not [p for p in tree.rglob("*") if TEMPORARY.search(p.name)], "the rerun left temporaries"
    assert not [p for p in tree.rglob("*") if LOCK.search(p.name)], "the rerun left a lock"


@pytest.mark.parametrize("name", IDS)
def test_a_write_limit_is_one_line_and_leaves_the_tree_as_it_was(inputs, tmp_path, name):
    import resource

    writer = BY_NAME[name]
    tree = work_copy(inputs, tmp_path, "limited")
    before = snapshot(tree, writer, temporaries=True)

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    one_line_error(run_writer(writer, tree, preexec_fn=limit), "writing ", " failed", "a file-size limit (ulimit -f)")
    assert snapshot(tree, writer, temporaries=True) == before


READS = [(w.name, read) for w in WRITERS for read in w.reads]


@pytest.mark.parametrize("name, read", READS, ids=[f"{n}:{r}" for n, r in READS])
# the cut half-way and one cut Hypothesis draws (a second drawn cut per file cost about 3 minutes of the full tier)
@settings(max_examples=1, deadline=None, phases=[Phase.explicit, Phase.generate],  # no shrinking: 5 s a run
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(share=st.floats(0.0, 1.0, exclude_max=True))
@example(share=0.5)
def test_a_read_file_cut_short_is_named(inputs, tmp_path, name, read, share):
    """Cut ``share`` of the way through. A ``dict.txt`` cut inside its last count keeps every symbol
    (fairseq reads a smaller count), so the command may run; any other cut is named."""
    writer = BY_NAME[name]
    tree = tmp_path / f"cut-{share}"
    shutil.rmtree(tree, ignore_errors=True)
    work_copy(inputs, tmp_path, tree.name)
    damaged = tree / read
    data = damaged.read_bytes()
    kept = data[:int(len(data) * share)]
    damaged.write_bytes(kept)
    before = snapshot(tree, writer, temporaries=True)
    result = run_writer(writer, tree)
    if damaged.name == "dict.txt" and symbols(kept) == symbols(data):
        check(result)
        return
    one_line_error(result, str(damaged))
    assert snapshot(tree, writer, temporaries=True) == before


def symbols(dictionary: bytes) -> list:
    """The symbols of a ``dict.txt`` whose lines all read as ``SYMBOL COUNT``, else None."""
    lines = [re.fullmatch(r"(.+) (\d+)", line.rstrip()) for line in dictionary.decode("utf-8", "replace").splitlines()]
    return [line.group(1) for line in lines] if all(lines) else None
