"""Which shard of a producer's work this process does, and the barrier before the merge.

fairseq's names: ``--num-shards N --shard-id I`` (independent jobs, e.g. a Slurm array: each
writes its part, then ``fairseq-maskplug-merge-shards DIR`` writes the track). Without them, a
``torchrun`` or ``srun`` launch (:func:`~..integration.launch.detect_launch`, as training reads
it) makes each rank a shard on GPU ``LOCAL_RANK`` when there are GPUs; rank 0 merges once every
rank has written its part (a ``torch.distributed`` barrier over gloo). A single process is shard
0 of 1 and writes the track itself. See :mod:`..data.track_shards` for the parts.
"""

import argparse
import datetime
import os
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


def add_shard_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--num-shards", type=number("[1, inf)", int), default=None,
                        help="split the lines into this many shards, one per job (fairseq's name); each job writes "
                             "its part, fairseq-maskplug-merge-shards writes the track (default: the ranks of a "
                             "torchrun/srun launch, else 1)")
    parser.add_argument("--shard-id", type=number("[0, inf)", int), default=None,
                        help="which shard this job computes, from 0 (with --num-shards)")
    parser.add_argument("--shard-block-lines", type=number("[1, inf)", int), default=BLOCK_LINES,
                        help="lines per block, the unit of sharding and of batching: batches never cross a block, "
                             "so the values do not depend on the shards (ours; every shard of a track must use the "
                             "same)")


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


def wait_for_every_shard(shard: Shard) -> None:
    """Under a launch: return once every rank has called this (every part written)."""
    if shard.launch is None:
        return
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=shard.launch.init_method, world_size=shard.launch.world_size,
                            rank=shard.launch.rank, timeout=BARRIER_TIMEOUT)
    try:
        dist.barrier()
    finally:
        dist.destroy_process_group()
