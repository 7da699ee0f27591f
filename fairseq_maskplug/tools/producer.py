"""The command of every producer of per-token tracks of binarized splits (issue 54): :class:`TokenProducer`, a
producer declared by its options and a function from a block of lines of a split to its values. ``score-pll``,
``annotate-importance``, ``score-spans``, ``score-importance``, ``informask``, ``difference``, ``pmi-units``,
``pos-tags``, ``salient-spans``, ``span-labels`` and a producer of your own are declared on it.

It checks the inputs and outputs before any work, takes its shard (:func:`~.sharding.start_producer`) and the
options its values depend on (:class:`~.sharding.ShardedTrack`), then runs :func:`write_tracks`, the one loop:
for each split, the tracks locked and a shard whose parts are written already skipped; else the function
computes this shard's rows (whole blocks of lines, :meth:`~.sharding.ShardedTrack.lines`), which are written as
this shard's part (one shard: the track); then, once every shard is written, the merge, and the warnings about
degenerate tracks.
"""

import contextlib
import dataclasses
import json
import os
from typing import Callable, ContextManager, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from ..common.option_ranges import option
from .cli import add_version, split_name


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


def data_dictionary(flag: str, path: str):
    """The dictionary of the fairseq-preprocess output ``path`` (given as ``flag``), checked."""
    from ..data.dictionaries import read_dictionary

    if not os.path.isfile(os.path.join(path, "dict.txt")):
        raise ValueError(f"{flag} {path}: no dict.txt (give a fairseq-preprocess output directory)")
    return read_dictionary(os.path.join(path, "dict.txt"))


def load_split(data, split, dictionary):
    """``(prefix, tokens)`` of the binarized ``split`` of ``data``: its .bin/.idx pair and token ids checked."""
    from fairseq.data import data_utils

    from ..data.dictionaries import check_token_ids
    from ..data.indexed_files import RECOPY, check_indexed_pair

    prefix = os.path.join(data, split)
    check_indexed_pair(prefix, RECOPY)
    tokens = data_utils.load_indexed_dataset(prefix, dictionary)
    if tokens is None:
        raise ValueError(f"--data {data}: no split {split!r} ({prefix}.bin/.idx, as fairseq-preprocess writes)")
    check_token_ids(tokens, prefix, dictionary)
    return prefix, tokens


@dataclasses.dataclass
class CountingOptions:
    """The option of a producer that counts over a split first (:func:`counted_split`, :func:`counts_removed`):
    ``--count-split``. Its own options extend it."""

    count_split: str = option("train", "the split counted first: its statistics give the values of every split",
                              parse=split_name)


class CountedSplit:
    """The split a counting producer counts first (:func:`counted_split`): ``prefix``, ``tokens`` and their
    ``fingerprint`` (read once), and its passes (:meth:`shared`)."""

    def __init__(self, command: str, split: str, inputs):
        from ..data.side_info import token_fingerprint

        self.command, self.split, self.inputs = command, split, inputs
        self.prefix, self.tokens = load_split(inputs.data, split, inputs.dictionary)
        self.fingerprint = token_fingerprint(self.prefix)

    def shared(self, kind: str, count: Callable, merge: Callable, what: str, second_run: str, recorded: dict = None,
               save: Callable = None, load: Callable = None, n_lines: int = None):
        """One pass of the count, merge, apply protocol (issue 54): ``count(lines)`` over this shard's lines of the
        split (whole blocks of ``--shard-block-lines``; ``n_lines``: of another split of that length instead). One
        process: that value. In shards: each shard's value is a part ``kind`` in the counts directory
        (:func:`~.pass_parts.shard_pass`; ``save``/``load``: default a dict of numpy arrays) and the result is
        ``merge(every shard's value, in shard order)``, or None when independent jobs must be run again (``what``
        and ``second_run`` say so). ``recorded``: what the values depend on besides the split's tokens and the
        block size, compared between the shards' parts."""
        from ..data.track_shards import shard_lines
        from .pass_parts import PassParts, counts_directory, load_arrays, make_parts_directory, save_arrays, shard_pass

        inputs, shard = self.inputs, self.inputs.shard
        n_lines = len(self.tokens) if n_lines is None else n_lines
        lines = shard_lines(n_lines, shard.num_shards, shard.shard_id, inputs.block_lines)
        if shard.num_shards == 1:
            return count(lines)
        parts_dir = counts_directory(inputs.data, self.split, inputs.names[0])
        make_parts_directory(parts_dir, self.command)
        recorded = {"tokens": self.fingerprint, **(recorded or {}), "block_lines": inputs.block_lines}
        parts = PassParts(parts_dir, kind, shard.num_shards, recorded, save or save_arrays, load or load_arrays)
        every = shard_pass(parts, shard, lines, n_lines, count, what, second_run)
        return None if every is None else merge(every)


def counted_split(command: str, split: str, inputs) -> CountedSplit:
    """The split a counting producer's ``values`` counts (``inputs``: a :class:`TokenProducer`'s), checked; its
    fingerprint recorded in the tracks' parts, and the directory where the shards exchange their counts
    (:func:`~.pass_parts.counts_directory`) checked before any counting."""
    from .pass_parts import check_parts_directory, counts_directory

    counted = CountedSplit(command, split, inputs)
    inputs.recorded["count_tokens"] = counted.fingerprint
    if inputs.shard.num_shards > 1:
        check_parts_directory(counts_directory(inputs.data, split, inputs.names[0]), command)
    return counted


def summed_arrays(every: list) -> dict:
    """The ``merge`` of parts that are dicts of numpy arrays: each array summed over the parts (float64 sums of
    whole numbers below 2**53 are exact)."""
    import numpy as np

    return {name: np.sum([part[name] for part in every], axis=0) for name in every[0]}


def vocabulary_lookup(table):
    """The function of a block whose values are one per vocabulary entry: each token's entry of ``table``."""
    return lambda lines: [table[line] for line in lines]


def write_besides(path, inputs, text: Callable[[], str]) -> None:
    """A file a producer writes besides its tracks (``path``: its ``output=True`` option; None: none), by shard 0
    (every shard computes the same): ``text()``, written atomically."""
    from ..common.atomic import write_text

    if path is not None and inputs.shard.shard_id == 0:
        write_text(path, text())


def counts_removed(command: str):
    """The ``finish`` of a counting producer of ``command`` whose options have ``count_split``: once the tracks are
    merged, the merging process removes the counts' parts of :func:`counted_split` (only a directory ``command``
    made: none where it counted nothing)."""
    def finish(options, inputs) -> None:
        from .pass_parts import counts_directory, remove_parts_directory

        if inputs.shard.merges:
            remove_parts_directory(counts_directory(inputs.data, options.count_split, inputs.names[0]), command)
    return finish


class Opened(NamedTuple):
    """What a :class:`TokenProducer`'s reader opened, before any work."""

    shard: object  #: this process's shard (:class:`~.sharding.Shard`)
    inputs: dict  #: what ``values`` gets besides the dictionary, e.g. ``model``, ``task``, ``device``
    recorded: dict  #: what the values also depend on, recorded in the parts (a checkpoint's identity)
    computing: Callable[[], ContextManager]  #: around each block's values (a model's inference mode)


class ReadsTokens:
    """The reader of a producer whose values need nothing but the tokens and the dictionary (a model producer's:
    :class:`~..scoring.model_tracks.ReadsCheckpoint`)."""

    def add_options(self, parser) -> None:
        pass

    def open(self, args, data: str, dictionary) -> Opened:
        from .sharding import start_producer

        return Opened(start_producer(args, data), {}, {}, contextlib.nullcontext)


#: the splits a :class:`TokenProducer` writes by default
SPLITS = ("train", "valid")


class Track(NamedTuple):
    """A track a :class:`TokenProducer` writes, for each split: ``DATA/SPLIT.NAME``."""

    name: str  #: the default name
    read_by: str  #: the policy option that reads it, e.g. ``--flagged-track``
    flag: str = "--name"  #: the option that renames it


class Lines(list):
    """A block of lines a :class:`TokenProducer`'s function gets: a list of token arrays (one per line, in order),
    which also says where they are: ``split`` and ``numbers``, the lines' numbers in the split (a ``range``)."""

    def __init__(self, arrays, split: str, numbers: range):
        super().__init__(arrays)
        self.split, self.numbers = split, numbers


class SplitDone(NamedTuple):
    """What a :class:`TokenProducer`'s ``report`` gets of a split it wrote (this shard's part of it)."""

    tracks: SplitTracks  #: the split and its track prefixes
    lines: List  #: this shard's lines (token arrays)
    rows: List[list]  #: for each track, one row per line
    seconds: float  #: the values' computation
    wrote: List[str]  #: what each track's write wrote


#: ``values(options, inputs) -> of_block``, once per run (``inputs``: what the run has, as attributes: ``dictionary``,
#: ``data`` (its directory), ``splits`` (written, in order), ``shard``, ``block_lines`` (``--shard-block-lines``),
#: ``names`` (each track's name), what the reader opened, and two dicts it may add to: ``summary``, the summary's
#: first entries (a split's entry, a dict, is completed with what was written), and ``recorded``, what the values
#: depend on besides the options, recorded in the parts, e.g. the fingerprint of a split it counts):
#: ``of_block(lines)`` gives for a block of lines (:class:`Lines`: token arrays of one split, in order) one row of
#: values per line, one value per token; for several tracks, one such list of rows per track. A producer that
#: counts over every line makes its passes here (:meth:`CountedSplit.shared`) and returns None where
#: independent jobs must be run again (nothing more is done: the summary is printed, exit status 0).
TokenValues = Callable[[object, object], Optional[Callable[[List], Sequence]]]


@dataclasses.dataclass(frozen=True)
class TokenProducer:
    """A producer of tracks whose values are a function of each line's tokens (given the dictionary, what
    ``reads`` opens, as a checkpoint's model, and what ``values`` counts first): what it declares; :meth:`main` is
    the whole command.

    The command's options are ``--data`` (a sentence_prediction root: its ``input0/``), ``--splits`` (space- or
    comma-separated), the reader's (a checkpoint's: ``--checkpoint``, ``--fp16``/``--bf16``, ...), the fields of
    ``options`` (each an :func:`~..common.option_ranges.option`: help, range, where its default comes from; its
    ``__post_init__`` may refuse a combination), each track's name option (``--name``) and the shard options.
    Before any work: the options, the dictionary, every split's .bin/.idx and token ids, every track's path and
    every option whose metadata says ``output=True`` (a file the producer also writes), then the shard and what
    the reader opens (a checkpoint checked against the dictionary). Then ``values`` (its own checks and counting
    passes first) and :func:`write_tracks`: its function gets this shard's lines block by block
    (``--shard-block-lines``; a block's values do not depend on the shards; a progress bar of lines), the rows
    are checked against the lines (:func:`~.sharding.rows_as_long_as_lines`), the tracks are fingerprinted
    against the tokens and written atomically, in shards as parts that record ``options`` (but a field whose
    metadata says ``recorded=False``, as a preview's length) and ``inputs.recorded``, and are merged (a rerun
    skips a part written already). ``report``'s line is printed for each split written; then ``finish``. An
    error is one line and exit status 2. Prints a JSON summary: ``inputs.summary``, what was written, the merges
    and warnings."""

    command: str  #: its command name, for ``--help`` and its errors
    description: str  #: its ``--help`` text (the module's docstring)
    options: type  #: a dataclass of its own options
    tracks: Sequence[Track]  #: what it writes for each split
    dtype: str  #: of the values written, e.g. ``float64``
    values: TokenValues
    #: ``report(options, inputs, done) -> str``: the line printed for a split written (``done``: a
    #: :class:`SplitDone`; it may write more, as a preview), None: none. With a report, a split's rows are kept
    #: until it is written.
    report: Optional[Callable[[object, object, SplitDone], str]] = None
    #: ``finish(options, inputs)``: once every track is written (and merged), what the producer still does (remove
    #: its counts' parts: :func:`counts_removed`; add counts made as the rows were written to the summary), None:
    #: nothing
    finish: Optional[Callable[[object, object], None]] = None
    reads: object = ReadsTokens()  #: what it reads besides the tokens: ``add_options(parser)``, ``open(...)``
    splits: Sequence[str] = SPLITS  #: written by default

    def parser(self):
        import argparse

        from .cli import HelpFormatter, add_dataclass_options, add_splits, track_name
        from .sharding import add_shard_options

        parser = argparse.ArgumentParser(prog=self.command, description=self.description,
                                         formatter_class=HelpFormatter)
        add_version(parser)
        parser.add_argument("--data", required=True, help="fairseq-preprocess output directory (holds dict.txt; a "
                            "sentence_prediction root: its input0/)")
        add_splits(parser, self.splits, "write the tracks for")
        self.reads.add_options(parser)
        add_dataclass_options(parser, self.options)
        for track in self.tracks:
            parser.add_argument(track.flag, type=track_name, default=track.name,
                                help=f"track name (the policy's {track.read_by})")
        add_shard_options(parser)
        return parser

    def main(self, argv=None) -> int:
        """The command: ``argv`` (default: the command line) parsed, checked and run; returns the exit status (a
        missing optional dependency, as spaCy, is a one-line error too)."""
        from ..common.extras import MissingExtra
        from .cli import command_main

        return command_main(self.parser().parse_args, self.write, (OSError, ValueError, MissingExtra))(argv)

    def write(self, args) -> int:
        """The command's work on the parsed ``args``: everything checked, then the tracks; returns 0."""
        import time
        from types import SimpleNamespace

        from ..common.atomic import check_writable
        from ..common.progress import progress_bar
        from ..data.layout import token_data_dir
        from ..data.track_shards import blocks_of
        from .cli import track_outputs
        from .sharding import ShardedTrack

        args.data = token_data_dir(args.data)
        fields = dataclasses.fields(self.options)
        options = self.options(**{field.name: getattr(args, field.name) for field in fields})
        dictionary = data_dictionary("--data", args.data)
        loaded = {split: load_split(args.data, split, dictionary) for split in args.splits}
        names = [getattr(args, track.flag[2:].replace("-", "_")) for track in self.tracks]
        outputs = track_outputs(args.data, args.splits, [(track.flag, name) for track, name in zip(self.tracks, names)])
        for field in fields:
            if field.metadata.get("output") and getattr(options, field.name) is not None:
                check_writable(getattr(options, field.name))
        opened = self.reads.open(args, args.data, dictionary)
        inputs = SimpleNamespace(dictionary=dictionary, data=args.data, splits=args.splits, shard=opened.shard,
                                 names=names, block_lines=args.shard_block_lines, summary={},
                                 recorded=dict(opened.recorded), **opened.inputs)
        of_block, summary = self.values(options, inputs), inputs.summary
        if of_block is None:  # independent jobs, each to be run again
            print(json.dumps(summary))
            return 0
        several = len(self.tracks) > 1

        def blocks(out, lines):  # (block's lines, its rows of each track), a progress bar of lines
            tokens = loaded[out.split][1]
            with progress_bar(total=len(lines), desc=f"{out.prefixes[0].rsplit('.', 1)[1]} of {out.split}",
                              unit="line") as bar:
                for block in blocks_of(lines, args.shard_block_lines):
                    block_lines = Lines([tokens[i].numpy() for i in block], out.split, block)
                    with opened.computing():
                        columns = of_block(block_lines) if several else [of_block(block_lines)]
                    for column in columns:
                        if len(column) != len(block_lines):
                            raise ValueError(f"{self.command}: {len(column)} rows of values for "
                                             f"{len(block_lines)} lines")
                    bar.update(len(block_lines))
                    yield block_lines, columns

        def of_split(out, lines):
            if not (several or self.report):  # one track, nothing reported: written as it is computed
                return [(row for _, (rows,) in blocks(out, lines) for row in rows)], lambda wrote: {"wrote": wrote[0]}
            began, kept, columns = time.perf_counter(), [], [[] for _ in self.tracks]
            for block_lines, block_columns in blocks(out, lines):
                kept += block_lines
                for column, rows in zip(columns, block_columns):
                    column += rows
            seconds = time.perf_counter() - began

            def done(wrote):
                if self.report:
                    print(self.report(options, inputs, SplitDone(out, kept, columns, seconds, wrote)), flush=True)
                return {"wrote": wrote if several else wrote[0]}
            return columns, done

        recorded = {field.name: getattr(options, field.name) for field in fields
                    if field.metadata.get("recorded", True)}
        track = ShardedTrack(opened.shard, {**recorded, **inputs.recorded}, args.shard_block_lines)
        tracks = [SplitTracks(split, prefix, len(loaded[split][1]), prefixes)
                  for split, (prefix, prefixes) in outputs.items()]
        written = write_tracks(track, tracks, of_split, self.dtype, args.data, dictionary)
        warnings = summary.pop("warnings", []) + written.pop("warnings", [])
        for split in args.splits:  # a split's entry the function began, completed
            if isinstance(summary.get(split), dict) and split in written:
                written[split] = {**summary[split], **written[split]}
        summary.update(written, **({"warnings": warnings} if warnings else {}))
        if self.finish:
            self.finish(options, inputs)
        print(json.dumps(summary))
        return 0
