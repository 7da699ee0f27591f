"""The loop of every producer that scores binarized splits with a model and writes per-token tracks in
shards (``score-pll``, ``annotate-importance``, ``score-spans``; issue 54): a producer supplies only
what it computes from a block of lines and what it reports.

For each split, this shard's lines (:meth:`~..tools.sharding.ShardedTrack.lines`, whole blocks) go
through ``score_block`` block by block, never a batch across two blocks, so a line's values do not
depend on the shards; the rows are written as this shard's part of each track (one shard: the track);
a shard whose parts are written already is skipped. Then the merge
(:meth:`~..tools.sharding.ShardedTrack.finish`), under the model's number format and device
(:func:`.precision.inference`).
"""

import time
from typing import Callable, List, Sequence

import numpy as np

#: ``score_block(lines)``: the token arrays of one block -> for each track, one row per line
ScoreBlock = Callable[[List[np.ndarray]], Sequence[list]]
#: ``report(split, lines, rows, seconds, wrote)`` -> the line printed for a split: ``rows`` one list per
#: track, ``wrote`` what each track's write wrote
Report = Callable[[str, List[np.ndarray], List[list], float, List[str]], str]


def write_model_tracks(track, outputs: dict, dictionary, score_block: ScoreBlock, report: Report, precision: str,
                       device, data: str, dtype: str = "float64") -> None:
    """Every split of ``outputs`` (:func:`~..tools.cli.track_outputs`: ``{split: (split prefix, [track
    prefixes])}``) scored by ``score_block`` and written through ``track`` (a
    :class:`~..tools.sharding.ShardedTrack`), ``report``'s line printed per split; then the merge's lines.
    ``data``: the directory of the parts (named to independent jobs for the merge command)."""
    from fairseq.data import data_utils

    from ..tools.sharding import line_lengths
    from .precision import inference

    shard = track.shard
    for split, (split_prefix, prefixes) in outputs.items():
        tokens = data_utils.load_indexed_dataset(split_prefix, dictionary)
        if all([track.already_written(prefix, split_prefix, len(tokens), dtype) for prefix in prefixes]):
            print(f"{split}: shard {shard.shard_id} of {shard.num_shards} of {prefixes[0]} is already written: "
                  "skipped")
            continue
        lines, rows = [], [[] for _ in prefixes]
        began = time.perf_counter()
        with inference(precision, device):
            for block in track.blocks(len(tokens)):
                block_lines = [tokens[i].numpy() for i in block]
                lines += block_lines
                scored = score_block(block_lines)
                if len(scored) != len(prefixes):
                    raise ValueError(f"score_block gave {len(scored)} tracks for {len(prefixes)}")
                for column, values in zip(rows, scored):
                    column += values
        seconds = time.perf_counter() - began
        wrote = [track.write(prefix, split_prefix, len(tokens), column, dtype)
                 for prefix, column in zip(prefixes, rows)]
        print(report(split, lines, rows, seconds, wrote))
    for line in track.finish(lambda split_prefix: line_lengths(split_prefix, dictionary), data):
        print(line)
