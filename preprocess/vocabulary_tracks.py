"""What the producers of one value per vocabulary entry (``informask``, ``difference``) share (their ``main`` and
one-line errors: ``tools.cli.command_main``): their common options, the splits loaded with every output checked
before any work, the shards' counts directory, and the tracks written by looking every token up, through
:func:`~fairseq_maskplug.tools.producer.write_tracks`, in shards or whole."""

import argparse
import os

from fairseq_maskplug.tools.producer import load_split


def lookup_parser(doc: str, data_help: str, count_help: str = None) -> argparse.ArgumentParser:
    """The parser of a vocabulary producer with its first options: ``--data``, ``--splits`` and, for a producer
    that counts a split (``count_help`` given), ``--count-split``; the producer adds its own, then
    :func:`add_output_options`."""
    from . import HelpFormatter, add_splits, split_name

    parser = argparse.ArgumentParser(description=doc, formatter_class=HelpFormatter)
    parser.add_argument("--data", required=True, help=data_help)
    add_splits(parser, ["train", "valid"], "write the track for")
    if count_help is not None:
        parser.add_argument("--count-split", type=split_name, default="train", help=count_help)
    return parser


def add_output_options(parser: argparse.ArgumentParser, name: str, policy_option: str, extra: str = None,
                       extra_help: str = None):
    """``--name`` (default ``name``, the policy's ``policy_option``), the producer's ``extra`` output (if any)
    and the shard options."""
    from fairseq_maskplug.tools.sharding import add_shard_options

    from . import track_name

    parser.add_argument("--name", type=track_name, default=name, help=f"track name (the policy's {policy_option})")
    if extra is not None:
        parser.add_argument(extra, default=None, help=extra_help)
    add_shard_options(parser)


def counts_directory(args):
    """Where the shards exchange their counting passes' parts, beside the tracks (None: the producer counts
    nothing)."""
    if getattr(args, "count_split", None) is None:
        return None
    return os.path.join(args.data, f"{args.count_split}.{args.name}.counts.shards")


def load_lookup_inputs(args, dictionary, command: str, outputs=()):
    """``(loaded, shard)``: ``{split: (prefix, tokens)}`` of ``--splits`` and ``--count-split``, each checked, and
    this process's shard; every track, the ``outputs`` given (None: not asked for) and the shards' counts
    directory checked writable, all before any work."""
    from fairseq_maskplug.common.atomic import check_writable
    from fairseq_maskplug.tools.pass_parts import check_parts_directory
    from fairseq_maskplug.tools.sharding import start_producer

    counted = [args.count_split] if counts_directory(args) else []
    loaded = {split: load_split(args.data, split, dictionary) for split in {*args.splits, *counted}}
    for path in [f"{loaded[split][0]}.{args.name}.bin" for split in args.splits] + [p for p in outputs if p]:
        check_writable(path)
    shard = start_producer(args, args.data)
    if shard.num_shards > 1 and counts_directory(args):
        check_parts_directory(counts_directory(args), command)
    return loaded, shard


def write_lookup_tracks(args, shard, loaded, dictionary, values, options: dict, summary: dict, command: str) -> None:
    """Each split's track: every token's entry of ``values`` (one float64 per vocabulary entry), this shard's
    lines as a part merged by rank 0 of a launch (or by ``fairseq-maskplug-merge-shards``), or whole; ``options``
    (what the values depend on) recorded in the parts. Adds what was written, the merges and the warnings to
    ``summary``; the merging process removes the counts directory."""
    from fairseq_maskplug.tools.pass_parts import remove_parts_directory
    from fairseq_maskplug.tools.producer import named_tracks, write_tracks
    from fairseq_maskplug.tools.sharding import ShardedTrack

    def looked_up(out, lines):
        tokens = loaded[out.split][1]
        return [(values[tokens[i].numpy()] for i in lines)], lambda wrote: {"wrote": wrote[0]}

    written = write_tracks(ShardedTrack(shard, options, args.shard_block_lines),
                           named_tracks(loaded, args.splits, args.name), looked_up, "float64", args.data, dictionary)
    warnings = summary.get("warnings", []) + written.pop("warnings", [])
    summary.update(written, **({"warnings": warnings} if warnings else {}))
    if shard.merges and counts_directory(args):
        remove_parts_directory(counts_directory(args), command)
