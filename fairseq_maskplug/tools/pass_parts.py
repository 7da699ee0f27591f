"""Each shard's result of one pass over its own lines, kept as a part until every shard has one.

For producers whose values depend on statistics of *all* lines (PMI-Masking's n-gram counts, DSIR's
bucket counts): pass 1 writes each shard's counts as a part; every shard then reads the parts of all
shards and sums them (the global statistics, as Elasticsearch's ``dfs_query_then_fetch`` gathers term
statistics from every shard before scoring) and makes its second pass with them. Under a
``torchrun``/``srun`` launch the ranks meet at a barrier (:func:`~.sharding.meet`) after writing;
independent jobs (a Slurm array) are run twice: the first run of each shard writes its counts and
stops, saying which shards are still missing; the second finds every part (a rerun skips a part that is
whole and made the same way, and refuses one made otherwise) and goes on.

A part is ``DIR/KIND.shardI-of-N.bin`` (the bytes of ``save``) and then ``.json`` (the shard, its line
range, what the values depend on, the file's length and SHA-256), both written atomically, in a directory
marked as the command's (:func:`make_parts_directory`).
"""

import io
import json
import os
import shutil
from typing import Callable, List

from ..common.atomic import OWNER_FILE, owner, temporary_name, write_failed, write_owner, write_text
from ..common.file_records import file_record, read_manifest, recorded_damage


def counts_directory(data: str, count_split: str, name: str) -> str:
    """Where the shards of a producer of track ``name`` exchange the parts of their passes over ``count_split`` of
    ``data``: beside the tracks, ``DATA/COUNT_SPLIT.NAME.counts.shards``."""
    return os.path.join(data, f"{count_split}.{name}.counts.shards")


def make_parts_directory(parts: str, command: str) -> bool:
    """Make ``parts`` whole with its owner mark (under a temporary name: another shard may race), unless it is
    there; returns whether this call made it. A directory there that ``command`` did not make is refused."""
    check_parts_directory(parts, command)
    if os.path.isdir(parts):
        return False
    tmp = temporary_name(parts)
    os.makedirs(tmp)
    write_owner(tmp, command)
    try:
        os.rename(tmp, parts)
    except OSError:
        shutil.rmtree(tmp)
        if not os.path.isdir(parts):
            raise
        return False
    return True


def check_parts_directory(parts: str, command: str) -> None:
    """Refuse, before any work, a parts directory that ``command`` did not make."""
    if os.path.lexists(parts) and (not os.path.isdir(parts) or (os.listdir(parts) and owner(parts) != command)):
        raise ValueError(f"{parts} exists and was not made by {command} for the parts of its shards: remove it or "
                         "give another output")


def remove_parts_directory(parts: str, command: str) -> None:
    """Remove ``parts`` once the output is written (only a directory ``command`` made)."""
    if os.path.isdir(parts) and owner(parts) == command:
        shutil.rmtree(parts)


class PassParts:
    """The parts of one pass (``kind``: e.g. ``counts``) of ``num_shards`` shards in the directory ``parts``.
    ``save(value, file)`` and ``load(file)`` write and read one shard's value (no pickle: the parts are read
    back by other processes); ``options``: what the values depend on (compared on a rerun and between
    shards)."""

    def __init__(self, parts: str, kind: str, num_shards: int, options: dict, save: Callable, load: Callable):
        self.parts, self.kind, self.num_shards, self.options = parts, kind, num_shards, options
        self.save, self.load = save, load

    def path(self, shard_id: int, suffix: str) -> str:
        return os.path.join(self.parts, f"{self.kind}.shard{shard_id}-of-{self.num_shards}.{suffix}")

    def _manifest(self, shard_id: int) -> dict:
        path = self.path(shard_id, "json")
        manifest = read_manifest(path, f"remove {path} and rerun shard {shard_id}")
        if manifest.get("options") != self.options:
            raise ValueError(f"shard part {path} was made with other options or inputs than this run: remove "
                             f"{self.parts} (or rerun with the options it records)")
        return manifest

    def done(self, shard_id: int, lines: range) -> bool:
        """Whether shard ``shard_id``'s part is written, whole, made the same way and over ``lines`` (a rerun
        skips it); a part made otherwise is refused with one line."""
        if not os.path.exists(self.path(shard_id, "json")):
            return False
        manifest = self._manifest(shard_id)
        if manifest["lines"] != [lines.start, lines.stop]:
            raise ValueError(f"shard part {self.path(shard_id, 'json')} covers lines {manifest['lines']}, not "
                             f"[{lines.start}, {lines.stop}]: remove {self.parts} and rerun every shard")
        return recorded_damage(self.path(shard_id, "bin"), manifest["file"], False) is None

    def write(self, shard_id: int, lines: range, value) -> None:
        """Write shard ``shard_id``'s value (the data file, then the manifest that marks it whole)."""
        data_path = self.path(shard_id, "bin")
        tmp = temporary_name(data_path)
        try:
            with open(tmp, "wb") as f:
                self.save(value, f)
            os.replace(tmp, data_path)
            manifest = {"kind": self.kind, "num_shards": self.num_shards, "shard_id": shard_id,
                        "lines": [lines.start, lines.stop], "file": file_record(data_path), "options": self.options}
            write_text(self.path(shard_id, "json"), json.dumps(manifest, indent=1) + "\n")
        except OSError as error:  # a refused write (OutputWriteError from write_text is a ValueError)
            written = os.path.getsize(tmp) if os.path.exists(tmp) else None
            for path in (tmp, data_path):
                if os.path.exists(path):
                    os.remove(path)
            remove_if_only_owned(self.parts)
            raise write_failed(data_path, error, written) from None

    def missing(self) -> List[int]:
        """The shards whose part is not written yet."""
        return [i for i in range(self.num_shards) if not os.path.exists(self.path(i, "json"))]

    def waiting_for(self, missing: List[int], written: str, second_run: str) -> str:
        """What a shard of independent jobs says when its ``written`` part is written and the ``missing`` shards'
        are not: run them, then every shard again (``second_run``: what that run does)."""
        shards = f"{'shard' if len(missing) == 1 else 'shards'} {', '.join(map(str, missing))}"
        return (f"{written} written; {shards} {'has' if len(missing) == 1 else 'have'} not written theirs: run them, "
                f"then run every shard again ({second_run})")

    def read_all(self, lines: int, own: dict = None) -> list:
        """Every shard's value, in shard order, checked: all there, whole (SHA-256), made the same way, their
        line ranges tiling ``range(lines)``. ``own``: ``{shard id: value}`` this process holds already (its
        own counts), taken instead of reading that part back (the part is checked all the same)."""
        values, cursor = [], 0
        for shard_id in range(self.num_shards):
            if not os.path.exists(self.path(shard_id, "json")):
                raise ValueError(f"shard {shard_id} of {self.num_shards} has not written its {self.kind} in "
                                 f"{self.parts}: run it (--num-shards {self.num_shards} --shard-id {shard_id})")
            manifest = self._manifest(shard_id)
            first, end = manifest["lines"]
            if first != cursor:
                raise ValueError(f"shard part {self.path(shard_id, 'json')} starts at line {first}, not {cursor}: the "
                                 f"parts do not tile the lines; remove {self.parts} and rerun every shard")
            damage = recorded_damage(self.path(shard_id, "bin"), manifest["file"], True)
            if damage is not None:
                raise ValueError(f"shard part {damage}: rerun shard {shard_id}")
            if own and shard_id in own:
                values.append(own[shard_id])
                cursor = end
                continue
            with open(self.path(shard_id, "bin"), "rb") as f:
                values.append(self.load(f))
            cursor = end
        if cursor != lines:
            raise ValueError(f"the parts in {self.parts} end at line {cursor}, the input has {lines}: remove "
                             f"{self.parts} and rerun every shard")
        return values


def shard_pass(parts: PassParts, shard, lines: range, n_lines: int, compute: Callable, what: str,
               second_run: str, unit: str = "lines"):
    """One pass of a counting producer's shard: ``compute(lines)`` over this shard's ``lines`` (of ``n_lines``),
    written as its part unless a rerun finds it written; under a launch the ranks meet (every part written);
    returns every shard's value in shard order (this shard's as computed, not read back), or None when
    independent jobs must be run again (``what``: the values, for the reports, e.g. "n-gram counts";
    ``second_run``: what that run does; ``unit``: what the lines are, for the reports)."""
    from .sharding import meet, shard_lines_text

    where = shard_lines_text(shard, lines, unit)
    own = {}
    if parts.done(shard.shard_id, lines):
        print(f"{where}: its {what} are written already: skipped", flush=True)
    else:
        own[shard.shard_id] = compute(lines)
        parts.write(shard.shard_id, lines, own[shard.shard_id])
    meet(shard)
    missing = parts.missing()
    if missing:
        print(f"{where}: {parts.waiting_for(missing, what, second_run)}", flush=True)
        return None
    return parts.read_all(n_lines, own)


def save_arrays(arrays: dict, f) -> None:
    """``save`` of a dictionary of numpy arrays (uncompressed ``.npz`` bytes, no pickle)."""
    import numpy as np

    np.savez(f, **arrays)


def load_arrays(f) -> dict:
    import numpy as np

    with np.load(io.BytesIO(f.read()), allow_pickle=False) as arrays:
        return {name: arrays[name] for name in arrays.files}


def found_parts(parts: str, kind: str):
    """``(num_shards, options)`` of the ``kind`` parts in ``parts`` (from shard 0's manifest, or the first
    there); parts of two shard counts are refused (they overlap)."""
    import glob
    import re

    pattern = re.compile(rf"^{re.escape(kind)}\.shard(\d+)-of-(\d+)\.json$")
    found = {}
    for path in sorted(glob.glob(os.path.join(glob.escape(parts), f"{kind}.shard*-of-*.json"))):
        match = pattern.match(os.path.basename(path))
        if match:
            found.setdefault(int(match.group(2)), path)
    num_shards, path = one_shard_count(found, parts, f"{kind} parts", f"{kind}.shardI-of-N.bin/.json")
    return num_shards, read_manifest(path, f"remove {path} and rerun its shard")["options"]


def one_shard_count(found: dict, parts: str, what: str, files: str):
    """The one ``(number of shards, value)`` of ``found`` (``{number of shards: value}``, the ``what`` found in
    ``parts``, named as ``files``); none, or parts of two shard counts (they overlap), refused in one line."""
    if not found:
        raise ValueError(f"{parts} holds no {what} ({files}): nothing to merge")
    if len(found) > 1:
        raise ValueError(f"{parts} has {what} of {' and '.join(map(str, sorted(found)))} shards: they overlap; "
                         "remove the parts of the run you do not want")
    (num_shards, value), = found.items()
    return num_shards, value


def save_array(array, f) -> None:
    """``save`` of a numpy array (``.npy`` bytes, no pickle)."""
    import numpy as np

    np.save(f, array, allow_pickle=False)


def load_array(f):
    import numpy as np

    return np.load(io.BytesIO(f.read()), allow_pickle=False)


def remove_if_only_owned(parts: str) -> None:
    """After a refused write: remove ``parts`` if it holds nothing but its owner mark (nothing is lost: no
    shard's part is in it), so that the tree is as it was."""
    if os.path.isdir(parts) and sorted(os.listdir(parts)) == [OWNER_FILE]:
        shutil.rmtree(parts)
