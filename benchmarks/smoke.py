"""``--smoke``, which every benchmark script takes: the same code path at tiny sizes, in seconds,
ending with the same last line (its ratio). The test suite runs each script this way
(``tests/test_benchmarks.py``) so that no benchmark can break unnoticed; the figures of a smoke
run measure nothing.
"""

import argparse

HELP = ("tiny sizes: run the same code path in seconds and print the same last line (the test suite "
        "does this so that the script cannot rot); the figures measure nothing")


def add_smoke_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--smoke", action="store_true", help=HELP)


def benchmark_parser(doc: str, repeats: str = None) -> argparse.ArgumentParser:
    """A benchmark script's parser: its docstring as the description, kept as written, and ``--smoke``; with
    ``repeats`` (its help), ``--repeats``, the timed repeats (5 by default in every benchmark that takes it)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_smoke_option(parser)
    if repeats:
        parser.add_argument("--repeats", type=int, default=5, help=repeats)
    return parser


def shrink(args: argparse.Namespace, **tiny) -> argparse.Namespace:
    """With ``--smoke``, set the options named in ``tiny`` to their tiny values and say so."""
    if args.smoke:
        for name, value in tiny.items():
            if not hasattr(args, name):
                raise AttributeError(f"--smoke sets an unknown option {name!r}")
            setattr(args, name, value)
        print("smoke run (--smoke): tiny sizes; the figures below check the code path and measure nothing",
              flush=True)
    return args
