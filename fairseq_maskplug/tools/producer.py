"""The one loop of every producer that writes per-token tracks of binarized splits (issue 54): a producer gives
only a function from this shard's lines of a split to its values.

Every producer of tracks (``pos-tags``, ``salient-spans``, ``score-pll``, ``annotate-importance``, ``score-spans``,
``score-importance``, ``informask``, ``difference``, ``pmi-units`` and a producer of your own) checks its inputs
and outputs before any work, takes its shard (:func:`~.sharding.start_producer`) and the options its values
depend on (:class:`~.sharding.ShardedTrack`), then calls :func:`write_tracks`: for each split, the tracks locked
and a shard whose parts are written already skipped; else ``values`` computes this shard's rows (whole blocks of
lines, :meth:`~.sharding.ShardedTrack.lines`), which are written as this shard's part (one shard: the track);
then, once every shard is written, the merge, and the warnings about degenerate tracks.
"""

from typing import Callable, Iterable, List, NamedTuple, Sequence, Tuple


class SplitTracks(NamedTuple):
    """The tracks a producer writes for one split."""

    split: str  #: its name, e.g. ``train``
    split_prefix: str  #: of the binarized split (``DATA/train``): the tokens the tracks are fingerprinted against
    n_lines: int  #: of the split (every shard's, not this shard's)
    prefixes: Sequence[str]  #: one per track written, e.g. ``DATA/train.pos``


#: ``values(split, lines) -> (rows, done)``: for each track of ``split`` (a :class:`SplitTracks`), one row per line
#: of ``lines`` (this shard's: a ``range``), lazy for a single track (lists where there are several, as each track
#: is written in turn); ``done(wrote)``, called once they are written (``wrote``: what each write wrote), gives the
#: split's entry of the summary (counts made on the way included).
Values = Callable[[SplitTracks, range], Tuple[Sequence[Iterable], Callable[[List[str]], object]]]


def named_tracks(loaded: dict, splits, name: str) -> list:
    """The :class:`SplitTracks` of one track ``name`` (``DATA/SPLIT.NAME``) for each of ``splits``, from ``loaded``:
    ``{split: (split prefix, tokens)}``."""
    return [SplitTracks(split, loaded[split][0], len(loaded[split][1]), [f"{loaded[split][0]}.{name}"])
            for split in splits]


def write_tracks(track, outputs: Sequence[SplitTracks], values: Values, dtype: str, data: str, dictionary=None) -> dict:
    """Every split of ``outputs`` computed by ``values`` and written through ``track`` (a
    :class:`~.sharding.ShardedTrack`) with values of ``dtype``; then the merge. Returns the summary: each split's
    ``done`` entry (none for a split skipped), ``merges`` (what the merge wrote, or the merge command a job of
    independent shards is told: ``data`` is the directory of the parts) and, if any, ``warnings``.
    ``dictionary``: of the splits (None: the split's lengths are read without one)."""
    from .sharding import line_lengths

    shard, summary = track.shard, {}
    for out in outputs:
        if all([track.already_written(prefix, out.split_prefix, out.n_lines, dtype) for prefix in out.prefixes]):
            print(f"{out.split}: shard {shard.shard_id} of {shard.num_shards} of {out.prefixes[0]} is already "
                  "written: skipped", flush=True)
            continue
        rows, done = values(out, track.lines(out.n_lines))
        if len(rows) != len(out.prefixes):
            raise ValueError(f"a producer gave {len(rows)} tracks for {len(out.prefixes)}")
        summary[out.split] = done([track.write(prefix, out.split_prefix, out.n_lines, column, dtype)
                                   for prefix, column in zip(out.prefixes, rows)])
    summary["merges"] = track.finish(lambda split_prefix: line_lengths(split_prefix, dictionary), data)
    if track.warnings:
        summary["warnings"] = track.warnings
    return summary
