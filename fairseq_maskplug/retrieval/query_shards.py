"""``retrieve`` in query shards: each shard answers a contiguous range of the queries, the merge writes the
one-process output.

A query's top-k does not depend on the other queries, so the shards' hits, concatenated in query order,
are the hits of one process, and the merge writes them through the same writer (the same bytes, timings
aside). Shard ``I`` of ``N`` (``--num-shards N --shard-id I``, or the ranks of a ``torchrun``/``srun``
launch) takes queries ``[Q*I//N, Q*(I+1)//N)`` and writes, in ``OUT.shards/`` (a directory of its own
beside ``--out``, marked as this command's), ``queries.shardI-of-N.npy`` (three arrays one after the
other: every query's number of hits, their documents and their scores; no zip, so no time stamp) and then ``queries.shardI-of-N.json``: the query range, the seconds it took, the file's length and
SHA-256, and what the hits depend on (the query file's content, the index's corpus and scoring settings,
``--top-k``, ``--rake``, the backend). A rerun skips a shard whose part is whole and made the same way and
refuses one made otherwise. Rank 0 merges after a barrier; independent jobs run
``fairseq-maskplug-merge-shards OUT``. The merge checks that the parts tile the queries, writes ``--out``
atomically and then removes ``OUT.shards/``.
"""

import glob
import json
import os
import re
from typing import Dict, List, Optional

import numpy as np

from ..common.atomic import temporary_name, write_failed, write_text
from ..common.file_records import file_record, read_manifest, recorded_damage
from ..tools.pass_parts import check_parts_directory as check_owned_parts
from ..tools.pass_parts import make_parts_directory, one_shard_count, remove_if_only_owned, remove_parts_directory

COMMAND = "fairseq-maskplug-retrieve"
PART = re.compile(r"^queries\.shard(?P<shard>\d+)-of-(?P<shards>\d+)\.json$")


def parts_directory(out: str) -> str:
    """Where the shards of ``--out`` write their parts."""
    return os.path.abspath(out).rstrip(os.sep) + ".shards"


def query_range(queries: int, num_shards: int, shard_id: int) -> range:
    """The queries of shard ``shard_id`` of ``num_shards``: contiguous, as even as can be, tiling them."""
    return range(queries * shard_id // num_shards, queries * (shard_id + 1) // num_shards)


def _part(parts: str, num_shards: int, shard_id: int, suffix: str) -> str:
    return os.path.join(parts, f"queries.shard{shard_id}-of-{num_shards}.{suffix}")


def check_parts_directory(parts: str) -> None:
    """Refuse, before any work, a parts directory that this command did not make."""
    check_owned_parts(parts, COMMAND)


def part_done(parts: str, num_shards: int, shard_id: int, options: dict) -> bool:
    """Whether this shard's part is written, whole and made with ``options`` (a rerun skips it); a part made
    otherwise is refused."""
    manifest_path = _part(parts, num_shards, shard_id, "json")
    if not os.path.exists(manifest_path):
        return False
    manifest = read_manifest(manifest_path, f"remove {manifest_path} and rerun the shard")
    if manifest.get("options") != options:
        raise ValueError(f"query shard part {manifest_path} was made with other options or inputs: remove "
                         f"{parts} (or give the options it was made with)")
    return recorded_damage(_part(parts, num_shards, shard_id, "npy"), manifest["hits_file"], False) is None


def write_part(parts: str, num_shards: int, shard_id: int, queries: range, hits: List[tuple], seconds: float,
               options: dict) -> str:
    """Write this shard's hits (the .npy, then the manifest that marks it whole), both atomically."""
    made = make_parts_directory(parts, COMMAND)
    hits_path = _part(parts, num_shards, shard_id, "npy")
    tmp = temporary_name(hits_path)
    counts = np.array([len(docs) for docs, _ in hits], dtype=np.int64)
    docs = np.concatenate([d for d, _ in hits]) if hits else np.zeros(0, dtype=np.int64)
    scores = np.concatenate([s for _, s in hits]) if hits else np.zeros(0, dtype=np.float32)
    try:
        with open(tmp, "wb") as f:
            for array in (counts, docs.astype(np.int64), scores):
                np.save(f, array, allow_pickle=False)
        os.replace(tmp, hits_path)
        manifest = {"num_shards": num_shards, "shard_id": shard_id, "first_query": queries.start,
                    "queries": len(queries), "seconds": seconds, "hits_file": file_record(hits_path),
                    "options": options}
        write_text(_part(parts, num_shards, shard_id, "json"), json.dumps(manifest, indent=1) + "\n")
    except OSError as error:  # a refused write (OutputWriteError from write_text is a ValueError)
        written = os.path.getsize(tmp) if os.path.exists(tmp) else None
        for path in (tmp, hits_path):
            if os.path.exists(path):
                os.remove(path)
        if made:
            remove_if_only_owned(parts)
        raise write_failed(hits_path, error, written) from None
    except ValueError:
        os.remove(hits_path)
        if made:
            remove_if_only_owned(parts)
        raise
    return f"queries {queries.start + 1} to {queries.stop}: {hits_path}"


def parts_in(parts: str) -> Dict[int, List[int]]:
    """``{num_shards: [shard ids with a manifest]}`` in ``parts``."""
    found: Dict[int, List[int]] = {}
    for path in sorted(glob.glob(os.path.join(parts, "queries.shard*-of-*.json"))):
        match = PART.match(os.path.basename(path))
        if match:
            found.setdefault(int(match["shards"]), []).append(int(match["shard"]))
    return found


def read_parts(parts: str, queries: Optional[int] = None):
    """Every part of ``parts`` checked (one number of shards, none missing, one set of options, whole, tiling
    the queries): ``(hits in query order, summed seconds, options)``."""
    num_shards, ids = one_shard_count(parts_in(parts), parts, "query shard parts", "queries.shardI-of-N.npy/.json")
    missing = sorted(set(range(num_shards)) - set(ids))
    if missing:
        raise ValueError(f"query shard {missing[0]} of {num_shards} of {parts} is missing: run it (--num-shards "
                         f"{num_shards} --shard-id {missing[0]}), then merge")
    hits, seconds, options, cursor = [], 0.0, None, 0
    for shard_id in range(num_shards):
        path = _part(parts, num_shards, shard_id, "json")
        manifest = read_manifest(path, f"remove {path} and rerun the shard")
        if options is not None and manifest["options"] != options:
            raise ValueError(f"{path} was made with other options or inputs than shard 0: rerun it")
        options = manifest["options"]
        if manifest["first_query"] != cursor:
            raise ValueError(f"{path} starts at query {manifest['first_query'] + 1}, not {cursor + 1}: the parts do "
                             "not tile the queries")
        damage = recorded_damage(_part(parts, num_shards, shard_id, "npy"), manifest["hits_file"], True)
        if damage is not None:
            raise ValueError(f"query shard part {damage}: rerun shard {shard_id}")
        with open(_part(parts, num_shards, shard_id, "npy"), "rb") as f:
            counts, docs, scores = (np.load(f, allow_pickle=False) for _ in range(3))
        ends = np.cumsum(counts)
        hits += list(zip(np.split(docs, ends[:-1]), np.split(scores, ends[:-1])))[:len(ends)]
        cursor += manifest["queries"]
        seconds += manifest["seconds"]
    total = options["queries"] if queries is None else queries
    if cursor != total:
        raise ValueError(f"the parts of {parts} hold {cursor} queries, the query file {total}")
    return hits, seconds, options


def remove_parts(parts: str) -> None:
    """Remove the parts directory once ``--out`` is written (only a directory this command made)."""
    remove_parts_directory(parts, COMMAND)
