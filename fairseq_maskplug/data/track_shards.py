"""A side-information track written in shards: each shard one contiguous range of lines, merged once.

A producer run as ``N`` shards (``--num-shards N --shard-id I``, or the ranks of a ``torchrun`` /
``srun`` launch) gives shard ``I`` the lines of blocks ``[B*I//N, B*(I+1)//N)``, where the split's
lines are cut into ``B`` blocks of ``block_lines`` lines (:func:`shard_lines`; the commands'
``--shard-block-lines``). A producer forms
its batches within a block, never across one, so a line's batch mates, and with them its values
to the last bit, do not depend on ``N``.

Shard ``I`` writes ``PREFIX.shardI-of-N.bin/.idx/.json`` (:func:`part_prefix`) atomically with
:func:`~.side_info.write_side_info`; its manifest records the token data's fingerprint, the line
range and the producer's options. A rerun skips a shard whose part is complete and made from the
same input and options (:func:`part_done`) and refuses one made otherwise. :func:`merge_parts`
checks that the parts tile the split, writes ``PREFIX`` from their rows (the bytes one process
writes: the same rows through the same writer) and removes them; ``PREFIX.merged.json``, present
while they are removed, lets :func:`finish_merges` complete a merge killed during that removal.
"""

import glob
import itertools
import os
import re
from typing import Dict, Iterable, List

from ..common.atomic import write_text
from ..common.file_records import read_manifest
from .side_info import SideInfoDataset, check_aligned, check_recorded_files, token_fingerprint, write_side_info

PART = re.compile(r"^(?P<prefix>.+)\.shard(?P<shard>\d+)-of-(?P<shards>\d+)$")


def check_shard(num_shards: int, shard_id: int) -> None:
    if num_shards < 1:
        raise ValueError(f"--num-shards must be >= 1, got {num_shards}")
    if not 0 <= shard_id < num_shards:
        raise ValueError(f"--shard-id must lie in [0, {num_shards - 1}] (--num-shards {num_shards}), got {shard_id}")


def shard_lines(lines: int, num_shards: int, shard_id: int, block_lines: int) -> range:
    """The lines of shard ``shard_id`` of ``num_shards``: whole blocks of ``block_lines``, contiguous,
    as even as blocks allow; the shards tile ``range(lines)`` (a shard may be empty)."""
    check_shard(num_shards, shard_id)
    if block_lines < 1:
        raise ValueError(f"block_lines must be >= 1, got {block_lines}")
    blocks = -(-lines // block_lines)
    first, last = blocks * shard_id // num_shards, blocks * (shard_id + 1) // num_shards
    return range(min(first * block_lines, lines), min(last * block_lines, lines))


def blocks_of(lines: range, block_lines: int) -> List[range]:
    """``lines`` (a shard's range, starting on a block boundary) cut into its blocks."""
    return [range(start, min(start + block_lines, lines.stop)) for start in range(lines.start, lines.stop, block_lines)]


def part_prefix(prefix: str, num_shards: int, shard_id: int) -> str:
    """``data/train.plt`` -> ``data/train.plt.shard1-of-3``."""
    return f"{prefix}.shard{shard_id}-of-{num_shards}"


def _shard_record(lines: range, num_shards: int, shard_id: int, options: dict) -> dict:
    return {"shard": {"shard_id": shard_id, "num_shards": num_shards, "first_line": lines.start,
                      "end_line": lines.stop, "options": options}}


def part_done(prefix: str, tokens_prefix: str, lines: range, num_shards: int, shard_id: int,
              options: dict) -> bool:
    """Whether shard ``shard_id``'s part of ``prefix`` is complete and was made from this token data
    (its fingerprint) with these ``options``; a part made from other input or options is refused
    with one line naming it (remove it, or rerun with the options it records)."""
    part = part_prefix(prefix, num_shards, shard_id)
    if not all(os.path.exists(part + suffix) for suffix in (".idx", ".bin", ".json")):
        return False
    recorded = read_manifest(part + ".json", f"remove {part}.* and rerun shard {shard_id}")
    wanted = _shard_record(lines, num_shards, shard_id, options)["shard"]
    if recorded.get("token_fingerprint") != token_fingerprint(tokens_prefix):
        raise ValueError(f"shard part {part}.bin was made from other token data than {tokens_prefix}.bin: remove "
                         f"{part}.* (or the whole set of parts) and rerun")
    shard = recorded.get("shard") or {}
    if shard.get("options") != options:
        raise ValueError(f"shard part {part}.bin was made with other options ({shard.get('options')}) than this run "
                         f"({options}): rerun with those, or remove {part}.* to make it again")
    if shard != wanted:
        raise ValueError(f"shard part {part}.bin covers lines [{shard.get('first_line')}, {shard.get('end_line')}), "
                         f"not [{lines.start}, {lines.stop}): remove {part}.* and rerun")
    check_recorded_files(part, f"remove {part}.* and rerun shard {shard_id}")
    return True


def write_part(prefix: str, rows: Iterable, dtype: str, tokens_prefix: str, lines: range, num_shards: int,
               shard_id: int, options: dict) -> int:
    """Write shard ``shard_id``'s rows (one per line of ``lines``) as its part of ``prefix``."""
    return write_side_info(part_prefix(prefix, num_shards, shard_id), rows, dtype, tokens_prefix,
                           extra=_shard_record(lines, num_shards, shard_id, options))


def merge_parts(prefix: str, tokens_prefix: str, token_sizes, num_shards: int, dtype: str) -> int:
    """Write ``prefix`` from its ``num_shards`` parts (checked: present, complete, made from this token
    data with one set of options, tiling every line, each row as long as its line) and remove them.
    Returns the line count."""
    from ..common.locks import OutputLock

    with OutputLock(prefix, "a merge of its shards"):  # one writer of the track (:mod:`...common.locks`)
        return _merge_parts(prefix, tokens_prefix, token_sizes, num_shards, dtype)


def _merge_parts(prefix: str, tokens_prefix: str, token_sizes, num_shards: int, dtype: str) -> int:
    parts, options = [], None
    expected_start = 0
    for shard_id in range(num_shards):
        part = part_prefix(prefix, num_shards, shard_id)
        if not os.path.exists(part + ".json"):
            raise ValueError(f"shard {shard_id} of {num_shards} of {prefix} is missing ({part}.bin/.idx/.json): run "
                             f"it (--num-shards {num_shards} --shard-id {shard_id}) before the merge")
        shard = read_manifest(part + ".json", f"remove {part}.* and rerun shard {shard_id}").get("shard") or {}
        options = shard.get("options") if options is None else options
        lines = range(shard.get("first_line", -1), shard.get("end_line", -1))
        if lines.start != expected_start:
            raise ValueError(f"shard part {part}.bin starts at line {lines.start}, not {expected_start}: the parts "
                             "overlap or leave a gap; remove the parts and rerun every shard")
        if not part_done(prefix, tokens_prefix, lines, num_shards, shard_id, options):
            raise ValueError(f"shard part {part} is incomplete: rerun shard {shard_id}")
        if len(lines):  # a shard of no block (more shards than blocks) wrote an empty part, which cannot be mapped
            side = SideInfoDataset(part)
            check_aligned(token_sizes[lines.start:lines.stop], side.sizes, split=os.path.basename(tokens_prefix),
                          name=os.path.basename(part), path=part)
            parts.append(side)
        expected_start = lines.stop
    if expected_start != len(token_sizes):
        raise ValueError(f"the {num_shards} parts of {prefix} end at line {expected_start}, but {tokens_prefix} has "
                         f"{len(token_sizes)} lines: remove the parts and rerun every shard")
    rows = itertools.chain.from_iterable((part[i].numpy() for i in range(len(part))) for part in parts)
    count = write_side_info(prefix, rows, dtype, tokens_prefix)
    write_text(prefix + MERGED, f'{{"num_shards": {num_shards}}}\n')
    _remove_parts(prefix, num_shards)
    return count


#: beside a track while the parts it was merged from are removed
MERGED = ".merged.json"


def _remove_parts(prefix: str, num_shards: int) -> None:
    for shard_id in range(num_shards):
        for suffix in (".json", ".idx", ".bin"):
            path = part_prefix(prefix, num_shards, shard_id) + suffix
            if os.path.exists(path):
                os.remove(path)
    os.remove(prefix + MERGED)


def finish_merges(directory: str) -> List[str]:
    """Remove the parts left by merges killed while removing them (their track is whole: it was
    written before); returns the tracks whose merge this finished."""
    finished = []
    for marker in sorted(glob.glob(os.path.join(glob.escape(directory), "*" + MERGED))):
        prefix = marker[:-len(MERGED)]
        _remove_parts(prefix, int(read_manifest(marker, f"remove {marker}")["num_shards"]))
        finished.append(prefix)
    return finished


def parts_in(directory: str) -> Dict[str, int]:
    """``{track prefix: number of shards}`` of the shard parts in ``directory``; a track with parts of
    two shard counts is refused (they overlap)."""
    found: Dict[str, set] = {}
    for path in glob.glob(os.path.join(glob.escape(directory), "*.shard*-of-*.json")):
        match = PART.match(path[:-len(".json")])
        if match:
            found.setdefault(match.group("prefix"), set()).add(int(match.group("shards")))
    for prefix, counts in found.items():
        if len(counts) > 1:
            raise ValueError(f"{prefix} has parts of {' and '.join(map(str, sorted(counts)))} shards: they overlap; "
                             "remove the parts of the runs you do not want")
    return {prefix: counts.pop() for prefix, counts in sorted(found.items())}


def split_of(prefix: str) -> str:
    """The split prefix a track prefix annotates, from its manifest's ``tokens`` (``data/train``)."""
    tokens = read_manifest(prefix + ".json", f"remove {prefix}.* and rerun").get("tokens")
    if not isinstance(tokens, str):
        raise ValueError(f"{prefix}.json does not name the split it annotates (no \"tokens\"): remove {prefix}.* and "
                         "rerun")
    return os.path.join(os.path.dirname(prefix), tokens)
