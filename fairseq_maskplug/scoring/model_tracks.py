"""The loop of every producer that scores binarized splits with a model and writes per-token tracks in
shards (``score-pll``, ``annotate-importance``, ``score-spans``; issue 54): a producer supplies only
what it computes from a block of lines and what it reports.

For each split, on the loop of every track producer (:func:`~..tools.producer.write_tracks`), this shard's
lines (:meth:`~..tools.sharding.ShardedTrack.lines`, whole blocks) go through ``score_block`` block by block,
never a batch across two blocks, so a line's values do not depend on the shards; the rows are written as this
shard's part of each track (one shard: the track); a shard whose parts are written already is skipped. Then the
merge (:meth:`~..tools.sharding.ShardedTrack.finish`), under the model's number format and device
(:func:`.precision.inference`). A producer of your own that scores with a model declares a
:class:`~..tools.producer.TokenProducer` reading :class:`ReadsCheckpoint` instead.
"""

import time
from typing import Callable, List, Sequence

import numpy as np

#: ``score_block(lines)``: the token arrays of one block -> for each track, one row per line
ScoreBlock = Callable[[List[np.ndarray]], Sequence[list]]
#: ``report(split, lines, rows, seconds, wrote)`` -> the line printed for a split: ``rows`` one list per
#: track, ``wrote`` what each track's write wrote
Report = Callable[[str, List[np.ndarray], List[list], float, List[str]], str]


def add_model_options(parser, max_tokens: int = 4096, max_tokens_help: str = "padded tokens per forward",
                      preview: bool = True) -> None:
    """The options every model producer ends with: ``--max-tokens``, ``--preview-lines`` (where it writes a
    preview), the checkpoint's (:func:`~..tools.cli.add_checkpoint_options`) and the shards'."""
    from ..common.option_ranges import number
    from ..tools.cli import add_checkpoint_options
    from ..tools.sharding import add_shard_options

    parser.add_argument("--max-tokens", type=number("[1, inf)", int), default=max_tokens, help=max_tokens_help)
    if preview:
        parser.add_argument("--preview-lines", type=number("[0, inf)", int), default=200,
                            help="lines shown in the preview file")
    add_checkpoint_options(parser)
    add_shard_options(parser)


def start_model_tracks(args, tracks):
    """What a model producer does first, before any work: its ``--user-dir`` imported, its outputs checked
    (:func:`~..tools.cli.track_outputs` of ``tracks``, ``(option, name)`` pairs, for ``args.splits`` of
    ``args.data``), its shard, its rank's device and number format
    (:func:`.precision.start_model_producer`). Returns ``(outputs, shard, precision, device)``."""
    from ..tools.cli import import_user_dir, track_outputs
    from .precision import start_model_producer

    import_user_dir(args.user_dir)
    outputs = track_outputs(args.data, dict.fromkeys(args.splits), tracks)
    return (outputs, *start_model_producer(args, args.data))


def model_track(args, shard, precision: str, **depends_on):
    """The :class:`~..tools.sharding.ShardedTrack` of a model producer: its parts record the checkpoint, what
    else the values depend on (``depends_on``), ``--max-tokens`` and the number format."""
    from ..tools.sharding import ShardedTrack, checkpoint_identity

    options = {**checkpoint_identity(args.checkpoint), **depends_on, "max_tokens": args.max_tokens,
               "precision": precision}
    return ShardedTrack(shard, options, args.shard_block_lines)


def write_model_tracks(track, outputs: dict, dictionary, score_block: ScoreBlock, report: Report, precision: str,
                       device, data: str, dtype: str = "float64") -> None:
    """Every split of ``outputs`` (:func:`~..tools.cli.track_outputs`: ``{split: (split prefix, [track
    prefixes])}``) scored by ``score_block`` and written through ``track`` (a
    :class:`~..tools.sharding.ShardedTrack`), ``report``'s line printed per split; then the merge's lines.
    ``data``: the directory of the parts (named to independent jobs for the merge command)."""
    from fairseq.data import data_utils

    from ..data.track_shards import blocks_of
    from ..tools.producer import SplitTracks, write_tracks
    from .precision import inference

    tokens = {split: data_utils.load_indexed_dataset(split_prefix, dictionary)
              for split, (split_prefix, _) in outputs.items()}

    def scored(out, shard_lines):  # by block: a batch never crosses a block, so values do not depend on the shards
        lines, rows = [], [[] for _ in out.prefixes]
        began = time.perf_counter()
        with inference(precision, device):
            for block in blocks_of(shard_lines, track.block_lines):
                block_lines = [tokens[out.split][i].numpy() for i in block]
                lines += block_lines
                for column, values in zip(rows, score_block(block_lines), strict=True):  # a track each
                    column += values
        seconds = time.perf_counter() - began
        return rows, lambda wrote: print(report(out.split, lines, rows, seconds, wrote))

    splits = [SplitTracks(split, split_prefix, len(tokens[split]), prefixes)
              for split, (split_prefix, prefixes) in outputs.items()]
    for line in write_tracks(track, splits, scored, dtype, data, dictionary)["merges"]:
        print(line)


class ReadsCheckpoint:
    """What a :class:`~..tools.producer.TokenProducer` that scores with a model reads: ``--checkpoint`` and the
    scoring options (``--fp16``/``--bf16``, ``--trust-dictionary``, ``--user-dir``). Opened before any work: the
    user directory imported, the shard on its rank's device with its number format checked
    (:func:`.precision.start_model_producer`), the checkpoint checked against the data's dictionary and its
    model loaded in eval mode; ``values`` gets ``model``, ``task`` and ``device``, each block is computed under
    :func:`.precision.inference`, and the parts record the checkpoint's identity and the number format."""

    def __init__(self, wanted: str, refuse=None):
        from ..tools.checkpoints import CLASSIFIER_TASKS

        self.wanted = wanted  #: what kind of checkpoint, for ``--help`` and a refusal
        self.refuse = CLASSIFIER_TASKS + ("token_importance",) if refuse is None else tuple(refuse)  #: tasks refused

    def add_options(self, parser) -> None:
        from ..tools.cli import add_checkpoint_options

        parser.add_argument("--checkpoint", required=True, help=self.wanted)
        add_checkpoint_options(parser)

    def open(self, args, data: str, dictionary):
        from ..tools.checkpoints import load_checked_model
        from ..tools.cli import import_user_dir
        from ..tools.producer import Opened
        from ..tools.sharding import checkpoint_identity
        from .precision import inference, start_model_producer

        import_user_dir(args.user_dir)
        shard, precision, device = start_model_producer(args, data)
        model, task, _ = load_checked_model(args.checkpoint, data, args.trust_dictionary, refuse=self.refuse,
                                            wanted=self.wanted)
        model.eval()
        return Opened(shard, {"model": model, "task": task, "device": device},
                      {**checkpoint_identity(args.checkpoint), "precision": precision},
                      lambda: inference(precision, device))
