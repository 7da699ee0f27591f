"""Which shard of a producer's work this process does, and the barrier before the merge.

fairseq's names: ``--num-shards N --shard-id I`` (independent jobs, e.g. a Slurm array: each
writes its part, then ``fairseq-maskplug-merge-shards DIR`` writes the track). Without them, a
``torchrun`` or ``srun`` launch (:func:`~..integration.launch.detect_launch`, as training reads
it) makes each rank a shard on GPU ``LOCAL_RANK`` when there are GPUs; rank 0 merges once every
rank has written its part (a ``torch.distributed`` barrier over gloo, waiting up to
:data:`BARRIER_TIMEOUT` for the slowest rank: ``torchrun`` stops every rank when one fails; under
``srun`` give ``--kill-on-bad-exit=1``, or a failed rank leaves rank 0 waiting). A single process
is shard 0 of 1 and writes the track itself. See :mod:`..data.track_shards` for the parts.
"""

import argparse
import datetime
import os
import sys
from typing import NamedTuple, Optional

from ..common.option_ranges import number
from ..integration.launch import Launch, detect_launch

#: lines per block, the unit of sharding and of batching (ours: enough lines for length-sorted batches)
BLOCK_LINES = 1024
#: how long the ranks that finished first wait at the barrier for the others (the slowest shard)
BARRIER_TIMEOUT = datetime.timedelta(hours=24)


class Shard(NamedTuple):
    num_shards: int
    shard_id: int
    launch: Optional[Launch]  # the launcher's ranks, when they are the shards

    @property
    def merges(self) -> bool:
        """Whether this process writes the whole track: a single process, or rank 0 of a launch."""
        return self.num_shards == 1 or (self.launch is not None and self.shard_id == 0)


def add_shard_options(parser: argparse.ArgumentParser, unit: str = "lines") -> None:
    """``--num-shards``/``--shard-id`` over ``unit`` (a producer's lines, in blocks: also ``--shard-block-lines``;
    ``retrieve``'s queries: no blocks, a query's top-k depends on nothing else)."""
    merged = "the track" if unit == "lines" else "the output"
    parser.add_argument("--num-shards", type=number("[1, inf)", int), default=None,
                        help=f"split the {unit} into this many shards, one per job (fairseq's name); each job writes "
                             f"its part, fairseq-maskplug-merge-shards writes {merged} (default: the ranks of a "
                             "torchrun/srun launch, else 1)")
    parser.add_argument("--shard-id", type=number("[0, inf)", int), default=None,
                        help="which shard this job computes, from 0 (with --num-shards)")
    if unit == "lines":
        parser.add_argument("--shard-block-lines", type=number("[1, inf)", int), default=BLOCK_LINES,
                            help="lines per block, the unit of sharding and of batching: batches never cross a "
                                 "block, so the values do not depend on the shards (ours; every shard of a track "
                                 "must use the same)")


def shard_of(args, environ=os.environ) -> Shard:
    """The shard of this process: ``--num-shards``/``--shard-id``, else the launch's rank and world size."""
    from ..data.track_shards import check_shard

    if (args.num_shards is None) != (args.shard_id is None):
        raise ValueError("--num-shards and --shard-id go together (or neither, to use a torchrun/srun launch)")
    if args.num_shards is not None:
        check_shard(args.num_shards, args.shard_id)
        return Shard(args.num_shards, args.shard_id, None)
    launch = detect_launch(environ)
    if launch is None or launch.world_size == 1:
        return Shard(1, 0, None)
    return Shard(launch.world_size, launch.rank, launch)


def use_local_device(shard: Shard) -> None:
    """Under a launch on a machine with GPUs, make GPU ``LOCAL_RANK`` this rank's device."""
    import torch

    if shard.launch is not None and torch.cuda.is_available():
        torch.cuda.set_device(shard.launch.local_rank % torch.cuda.device_count())


def meet(shard: Shard) -> None:
    """Under a launch: return once every rank has called this (e.g. every rank's counts written); the
    process group stays up for the next meeting."""
    if shard.launch is None:
        return
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method=shard.launch.init_method, world_size=shard.launch.world_size,
                                rank=shard.launch.rank, timeout=BARRIER_TIMEOUT)
    dist.barrier()


def wait_for_every_shard(shard: Shard) -> None:
    """Under a launch: return once every rank has called this (every part written); the last meeting."""
    if shard.launch is None:
        return
    import torch.distributed as dist

    try:
        meet(shard)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def file_identity(path: str, role: str) -> dict:
    """What a shard records of an input file its values come from, under the name ``role``: path, size and
    modification time (a file rewritten at the same path is another one)."""
    stat = os.stat(path)
    return {role: os.path.abspath(path), f"{role}_bytes": stat.st_size, f"{role}_mtime_ns": stat.st_mtime_ns}


def checkpoint_identity(path: str) -> dict:
    """:func:`file_identity` of the checkpoint a model-driven producer scores with."""
    return file_identity(path, "checkpoint")


def start_producer(args, parts_dir: str) -> Shard:
    """What a producer that loads no model does first: its shard (:func:`shard_of`) and, where it merges,
    the parts a killed merge left in ``parts_dir`` merged."""
    from ..data.track_shards import finish_merges

    shard = shard_of(args)
    if shard.merges:
        finish_merges(parts_dir)
    return shard


def line_lengths(split_prefix: str, dictionary, lines: range = None):
    """The split's line lengths (of ``lines``, default all), copied while its dataset (whose memory map they view)
    is alive."""
    import numpy as np
    from fairseq.data import data_utils

    dataset = data_utils.load_indexed_dataset(split_prefix, dictionary)  # kept alive: its sizes view its map
    return np.array(dataset.sizes if lines is None else dataset.sizes[lines.start:lines.stop])


class ShardedTrack:
    """A producer's shard of the tracks it writes, one per split: this shard's lines, a skip when its
    part is already written, its part (or, for one shard, the track), and the merge once every shard
    has written its part. ``options`` are what the values depend on (recorded in every part and
    compared on a rerun and at the merge)."""

    def __init__(self, shard: Shard, options: dict, block_lines: int):
        self.shard, self.block_lines = shard, block_lines
        self.options = dict(options, block_lines=block_lines)
        self.written = []  # (track prefix, split prefix, dtype)
        self.complete = []  # track prefixes this process wrote whole (one shard, or the merge)
        self.warnings = []  #: one line per degenerate track written (:func:`~..data.side_info.degenerate_track`)
        self.locks = []  # this process's locks on what it writes (:mod:`..common.locks`), released by finish()

    def lines(self, n_lines: int) -> range:
        from ..data.track_shards import shard_lines

        return shard_lines(n_lines, self.shard.num_shards, self.shard.shard_id, self.block_lines)

    def blocks(self, n_lines: int):
        """This shard's lines, block by block: a producer forms its batches within one."""
        from ..data.track_shards import blocks_of

        return blocks_of(self.lines(n_lines), self.block_lines)

    def already_written(self, prefix: str, split_prefix: str, n_lines: int, dtype: str) -> bool:
        """Lock what this process writes of the track ``prefix`` of ``split_prefix`` (the track, or this shard's
        part: one writer, until :meth:`finish`), note the track for the merge, and say whether this shard's part
        of it is written already (a rerun; a part made otherwise is refused)."""
        from ..common.locks import lock_output
        from ..data.track_shards import part_done, part_prefix

        target = prefix if self.shard.num_shards == 1 else part_prefix(prefix, *self.shard[:2])
        self.locks.append(lock_output(target, os.path.basename(sys.argv[0]) or "a producer"))  # one writer
        if self.shard.num_shards == 1:
            return False
        self.written.append((prefix, split_prefix, dtype))
        return part_done(prefix, split_prefix, self.lines(n_lines), *self.shard[:2], self.options)

    def write(self, prefix: str, split_prefix: str, n_lines: int, rows, dtype: str) -> str:
        """Write this shard's rows; returns what was written, for the command's report."""
        from ..data import write_side_info
        from ..data.track_shards import write_part

        lines = self.lines(n_lines)
        rows = rows_as_long_as_lines(rows, line_lengths(split_prefix, None, lines), prefix, lines)
        if self.shard.num_shards == 1:
            write_side_info(prefix, rows, dtype, tokens_prefix=split_prefix)
            self.complete.append(prefix)
            return f"{prefix}.bin/.idx"
        write_part(prefix, rows, dtype, split_prefix, lines, *self.shard[:2], self.options)
        return shard_lines_text(self.shard, lines)

    def finish(self, token_sizes, data: str) -> list:
        """After the barrier of a launch, the merging rank writes every track from its parts
        (``token_sizes(split_prefix)``: the split's line lengths); returns what it reports. ``data``:
        the directory of the parts, for the merge command a job of independent shards is told (the other
        ranks of a launch, whose rank 0 merges, are told nothing). A track written whole that is degenerate
        (:func:`~..data.side_info.degenerate_track`) is warned about in the log and kept in :attr:`warnings`."""
        from ..data.track_shards import merge_parts

        wait_for_every_shard(self.shard)
        reports = []
        if self.shard.num_shards > 1 and self.shard.launch is None:
            reports = [f"when every shard is written: fairseq-maskplug-merge-shards {data}"]
        elif self.shard.num_shards > 1 and self.shard.merges:
            for prefix, split_prefix, dtype in self.written:
                merge_parts(prefix, split_prefix, token_sizes(split_prefix), self.shard.num_shards, dtype)
                self.complete.append(prefix)
            reports = [f"merged {self.shard.num_shards} shards into {prefix}.bin/.idx" for prefix, _, _ in self.written]
        self.warnings += warn_if_degenerate(self.complete)
        for lock in self.locks:
            lock.release()
        return reports


def rows_as_long_as_lines(rows, lengths, prefix: str, lines: range):
    """``rows``, one per line of ``lines`` (``lengths``: theirs), each checked to hold one value per token of its
    line: a producer's rows that do not stop the write, naming the line (nothing is written)."""
    rows = iter(rows)
    count = 0
    for count, (length, row) in enumerate(zip(lengths, rows), 1):
        if len(row) != length:
            raise ValueError(f"{prefix}: line {lines[count - 1] + 1} has {length} tokens but {len(row)} values; "
                             "nothing was written")
        yield row
    if count < len(lengths) or next(rows, None) is not None:
        raise ValueError(f"{prefix}: the producer gave {'fewer' if count < len(lengths) else 'more'} rows of values "
                         f"than the {len(lengths)} lines; nothing was written")


def shard_lines_text(shard: Shard, lines: range, unit: str = "lines") -> str:
    """``shard I of N (lines A to B)`` for a report, or that the shard has none (fewer blocks than shards);
    ``unit``: what is sharded, where it is not lines in blocks (``select``'s documents, one at a time)."""
    where = f"shard {shard.shard_id} of {shard.num_shards}"
    if not len(lines):
        why = "the split has fewer blocks of --shard-block-lines" if unit == "lines" else f"there are fewer {unit}"
        return f"{where} (no {unit}: {why} than shards)"
    return f"{where} ({unit} {lines.start + 1} to {lines.stop})"


def warn_if_degenerate(prefixes) -> list:
    """One warning line, also logged, for each track of ``prefixes`` whose values cannot tell tokens apart
    (:func:`~..data.side_info.degenerate_track`)."""
    from ..data.side_info import degenerate_track

    return [warn(warning) for warning in map(degenerate_track, prefixes) if warning]


def warn_if_all_or_none(prefix: str, share: float, what: str, near: float = 0.01) -> str:
    """A warning (logged and returned; "" if none) when ``share`` of the tokens of the track ``prefix`` that
    the producer decided on are ``what`` ("important"), or none of them is, within ``near``: a selective policy
    reading the track then masks all or nothing of them."""
    if near < share < 1 - near:
        return ""
    return warn(f"{prefix}.bin: {share:.1%} of the tokens decided on are {what}: a policy reading it masks as if "
                "it had no information; check the producer's input and options")


def warn(line: str) -> str:
    """Log ``line`` as a producer's warning about its output (the recipes collect these: ``recipes/lib.sh``), or
    as information where the user said such output is expected (``MASKPLUG_EXPECT_DEGENERATE=1``:
    :func:`~..data.side_info.degenerate_expected`); returns it (the summary lists it either way)."""
    import logging

    from ..data.side_info import EXPECT_DEGENERATE, degenerate_expected

    logger = logging.getLogger("fairseq_maskplug.producers")
    if degenerate_expected():
        logger.info("expected: %s (%s is set)", line, EXPECT_DEGENERATE)
    else:
        logger.warning("warning: %s (expected at toy size? set %s=1)", line, EXPECT_DEGENERATE)
    return line
