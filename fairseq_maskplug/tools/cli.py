"""``fairseq-maskplug-dir`` (print the directory to pass to ``fairseq-train --user-dir``) and
what the package's command-line tools share. Kept free of fairseq and torch, so that
``fairseq-maskplug-dir`` answers at once and prints nothing else.
"""

import argparse
import functools
import logging
import os
import sys
import warnings


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """The package's command-line tools: the module docstring as written, every option's default in ``--help``."""


def console_command(name: str) -> str:
    """The console command ``name`` of this environment (beside its Python), else the one on PATH."""
    import shutil

    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.access(beside, os.X_OK) else (shutil.which(name) or name)


def track_name(text: str) -> str:
    """argparse type of a side-information track name (a file-name part, never a path)."""
    from ..masking.values import check_track_name

    try:
        return check_track_name(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def one_line_on_write_failure(main):
    """A command's ``main``, where a write the disk refuses during the work (an
    :class:`~fairseq_maskplug.common.atomic.OutputWriteError`, after the checks made before any work)
    is one ``error:`` line and exit status 2, as bad input is."""
    @functools.wraps(main)
    def wrapped(*args, **kwargs):
        from ..common.atomic import OutputWriteError

        try:
            return main(*args, **kwargs)
        except OutputWriteError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    return wrapped


def run_with_one_line_errors(work, args, errors=(OSError, ValueError)) -> int:
    """``work(args)``, a command's work; an error of ``errors`` (raised by its checks before any work, or by a
    shard part made otherwise) is one line on standard error (a KeyError's without its quotes) and exit
    status 2."""
    try:
        return work(args)
    except errors as error:
        print(f"error: {str(error).strip(chr(39)) if isinstance(error, KeyError) else error}", file=sys.stderr)
        return 2


def command_main(parse_args, work, errors=(OSError, ValueError)):
    """A command's ``main(argv=None)``: the tools' output set up (:func:`configure_tool_output`), ``argv``
    parsed by ``parse_args``, then ``work(args)`` (returning the exit status); an error of ``errors`` or a
    write the disk refuses is one ``error:`` line and exit status 2."""
    @one_line_on_write_failure
    def main(argv=None) -> int:
        configure_tool_output()
        return run_with_one_line_errors(work, parse_args(argv), errors)
    main.__doc__ = f"The command: {parse_args.__module__}'s work, {work.__name__}."
    return main


def split_name(text: str) -> str:
    """argparse type of a split name (a file-name part, never a path)."""
    from ..masking.values import check_split_name

    try:
        return check_split_name(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def split_names(text: str) -> list:
    """argparse type of comma-separated split names (``train,valid``)."""
    names = [name for name in text.split(",") if name]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names no split")
    return [split_name(name) for name in names]


def add_dataclass_options(parser: argparse.ArgumentParser, options: type) -> None:
    """One option per field of the dataclass ``options`` (``min_length`` -> ``--min-length``), each declared with
    :func:`~..common.option_ranges.option`: its help, where its default comes from (shown after the help) and, for
    a number, its range, and ``choices=[...]`` or ``parse=`` (an argparse type, e.g. :func:`split_name`) where
    given (refused in argparse's one line); ``required=True`` where given. A bool field is ``--NAME``/``--no-NAME``."""
    import dataclasses
    import typing

    from ..common.option_ranges import flag, number

    types = typing.get_type_hints(options)  # also where annotations are postponed (strings)
    for field in dataclasses.fields(options):
        kind = types[field.name]
        if kind not in (int, float, str, bool):
            raise TypeError(f"{options.__name__}.{field.name}: an option is an int, float, str or bool, not {kind}")
        source = field.metadata.get("source")
        help = field.metadata["help"] + (f" ({source})" if source else "")
        if kind is bool:
            parser.add_argument(flag(field.name), action=argparse.BooleanOptionalAction, default=field.default,
                                help=help)
            continue
        parse = field.metadata.get("parse", kind)
        if "range" in field.metadata:
            parse = number(field.metadata["range"], kind)
        parser.add_argument(flag(field.name), type=parse, choices=field.metadata.get("choices"), default=field.default,
                            help=help, required=field.metadata.get("required", False))


def add_user_dir(parser: argparse.ArgumentParser) -> None:
    """``--user-dir``, as fairseq-train's: a tool loading a checkpoint trained with a user's
    policy, task or model needs that module (see :func:`import_user_dir`)."""
    parser.add_argument("--user-dir", default=None, metavar="DIR",
                        help="module with your own policies, tasks or models (as fairseq-train --user-dir): "
                             "needed to load a checkpoint trained with them")


def add_checkpoint_options(parser: argparse.ArgumentParser) -> None:
    """What every scoring command (a frozen model's forwards) takes: ``--trust-dictionary``,
    ``--user-dir`` and ``--fp16``/``--bf16`` (read with :func:`precision_of`)."""
    parser.add_argument("--trust-dictionary", action="store_true",
                        help="skip the dictionary check where the checkpoint records no dictionary and its "
                             "training data is not found")
    add_user_dir(parser)
    precision = parser.add_mutually_exclusive_group()
    precision.add_argument("--fp16", action="store_true",
                           help="forwards under autocast to float16 (a CUDA GPU only); scores differ from fp32 by "
                                "half precision's rounding")
    precision.add_argument("--bf16", action="store_true",
                           help="forwards under autocast to bfloat16 (a GPU that supports it, or the CPU); scores "
                                "differ from fp32 by its rounding")


def precision_of(args) -> str:
    """``fp16``, ``bf16`` or ``fp32``: the number format :func:`add_checkpoint_options`' flags chose."""
    return "fp16" if args.fp16 else "bf16" if args.bf16 else "fp32"


class _Splits(argparse.Action):
    """``--splits``' action: its items (each comma-separated) as one list, each split once, in order."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, list(dict.fromkeys(split for group in values for split in group)))


def add_splits(parser: argparse.ArgumentParser, default, what: str) -> None:
    """``--splits A B ...`` or ``--splits A,B`` (``--split`` is the same option): the splits a command works on,
    as one list (``args.splits``); required where ``default`` is empty."""
    parser.add_argument("--splits", "--split", nargs="+", dest="splits", default=list(default), type=split_names,
                        action=_Splits, required=not default, help=f"splits to {what}, space- or comma-separated: "
                        "train valid, or train,valid (--split is the same option)")


def check_spacy_lengths(nlp, texts, args) -> None:
    """Set the pipeline's ``max_length`` to ``--spacy-max-length`` and refuse, before any work, a line longer than
    it (spaCy's own error, E088, comes mid-run and names no line)."""
    nlp.max_length = args.spacy_max_length
    for number, text in enumerate(texts, start=1):
        if len(text) > args.spacy_max_length:
            raise ValueError(f"--text {args.text}: line {number} has {len(text):,} characters, more than "
                             f"--spacy-max-length {args.spacy_max_length:,}: raise it (spaCy needs about 1 GB of "
                             "memory per 100,000 characters), or split the line")


def track_outputs(data: str, splits, tracks):
    """``{split: (split prefix, [track prefix of each of tracks])}`` for a command writing
    side-information tracks of binarized splits, every split found and every track distinct from
    the others and from the split, and writable, before any work. ``tracks`` are
    ``(option, track name)`` pairs, the option named in the errors."""
    from ..common.atomic import check_distinct_files, check_writable
    from ..data.side_info import side_info_prefix

    outputs = {}
    for split in splits:
        split_prefix = os.path.join(data, split)
        if not all(os.path.exists(split_prefix + suffix) for suffix in (".idx", ".bin")):
            raise FileNotFoundError(f"binarized split not found: {split_prefix}.bin/.idx")
        prefixes = [side_info_prefix(split_prefix, name) for _, name in tracks]
        check_distinct_files([(f"{option} track", prefix + ".bin") for (option, _), prefix in zip(tracks, prefixes)]
                             + [("the split", split_prefix + ".bin")])
        for prefix in prefixes:
            check_writable(prefix + ".bin")
        outputs[split] = (split_prefix, prefixes)
    return outputs


def import_user_dir(path) -> None:
    """Load the package's plugin and the user's ``--user-dir`` module (None: the plugin only)."""
    import fairseq_maskplug.plugin  # noqa: F401

    if path is None:
        return
    if not os.path.exists(path):
        raise FileNotFoundError(f"--user-dir not found: {path}")
    from fairseq import utils

    utils.import_user_module(argparse.Namespace(user_dir=path))


def package_dir() -> str:
    """The installed package directory, the value for ``fairseq-train --user-dir``."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this file is in tools/


def version_line(prog: str) -> str:
    """What every command's ``--version`` prints: ``PROG VERSION`` (the one version, ``fairseq_maskplug._version``)."""
    from .._version import __version__
    return f"{prog} (fairseq-maskplug) {__version__}"


def add_version(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``--version``: print :func:`version_line` and exit 0, as every ``fairseq-maskplug-*`` command does."""
    parser.add_argument("--version", action="version", version=version_line(parser.prog),
                        help="print the package's version and exit")
    return parser


def print_user_dir(argv=None) -> None:
    """``fairseq-maskplug-dir``: the directory ``fairseq-train --user-dir`` takes (``--version``: the version)."""
    parser = add_version(argparse.ArgumentParser(prog="fairseq-maskplug-dir", description=print_user_dir.__doc__))
    parser.parse_args(sys.argv[1:] if argv is None else argv)
    print(package_dir())


def quiet_fairseq_import() -> None:
    """Hide the tensorboardX hint fairseq logs on import (``fairseq.tasks.text_to_speech``):
    it concerns a task this package does not use. Call before importing fairseq."""
    logging.getLogger("fairseq.tasks.text_to_speech").setLevel(logging.WARNING)


def configure_tool_output() -> None:
    """The tools print their results on stdout; on stderr go this package's INFO logs (which
    directory was read, what was loaded) and warnings, without fairseq's INFO logs or the
    warnings fairseq's own checkpoint loading raises on every call (hydra's deprecations,
    ``pin_memory`` without an accelerator); torch's threads a share of the cores unless ``OMP_NUM_THREADS``
    is set (:mod:`.threads`). Call before importing fairseq."""
    quiet_fairseq_import()
    logging.basicConfig(format="%(name)s | %(message)s", level=logging.WARNING, force=True)
    logging.getLogger("fairseq_maskplug").setLevel(logging.INFO)
    logging.getLogger("preprocess").setLevel(logging.INFO)
    quiet_third_party()
    from .threads import choose_threads

    choose_threads()  # one share of the cores unless OMP_NUM_THREADS is set (:mod:`.threads`)


#: what every fairseq run or checkpoint load warns about (hydra 1.1+ deprecations), or a CPU data loader
_LIBRARY_WARNINGS = ("is no longer experimental", "version_base parameter is not specified",
                     "deprecated keyword in package header", "is validated against ConfigStore schema",
                     "strict flag in the compose API is deprecated",
                     "'pin_memory' argument is set as true but no accelerator")
#: fairseq's training step on every call (torch deprecated the spelling it uses)
_LIBRARY_FUTURE_WARNINGS = (r"`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated",)
#: fairseq's log lines that say nothing to the user of this package
_LIBRARY_LOG_LINES = ("has already been imported",)  # --user-dir, when fairseq-maskplug-train loaded the plugin


class _DropLines(logging.Filter):
    def filter(self, record):
        return not any(text in record.getMessage() for text in _LIBRARY_LOG_LINES)


def quiet_third_party() -> None:
    """Hide the known third-party warnings and log lines of every run, each matched by its
    message (the package's own lines and any other warning stay); ``MASKPLUG_VERBOSE=1``
    shows everything. Applies to this process (fairseq's spawned workers warn on their own)."""
    if os.environ.get("MASKPLUG_VERBOSE"):
        return
    for message in _LIBRARY_WARNINGS:
        warnings.filterwarnings("ignore", message="(?s).*" + message, category=UserWarning)
    for message in _LIBRARY_FUTURE_WARNINGS:
        warnings.filterwarnings("ignore", message="(?s).*" + message, category=FutureWarning)
    logging.getLogger("fairseq.utils").addFilter(_DropLines())
