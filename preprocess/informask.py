"""Write InforMask's per-token masking rates (Sadeq, Xu, McAuley, EMNLP 2022) as a track of binarized splits.

From the lines of ``--count-split`` (a line: a sentence; special tokens left out): the PMI of every pair of
tokens that share a line; for each line, the best of ``--candidates`` random masks at ``--rate`` by its
informative score (the PMI between what it masks and what it leaves); each vocabulary entry's rate, the share
of its occurrences those masks cover (``fairseq_maskplug.scoring.informask`` says how, step by step). Every
token of every split in ``--splits`` then gets its entry's rate, written as
``DATA/SPLIT.informask_rate.bin/.idx/.json`` (float64, 0 at special tokens; an entry the count split never
holds gets ``--rate``), fingerprinted against the tokens and written atomically; ``--write-table`` also writes
the table as the authors' ``{"token id": rate}`` JSON. Then ``--mask-policy informask``.

Example (the demo's in-domain data)::

    fairseq-maskplug-informask --data work/data/indomain --splits train,valid

Prints a JSON summary: lines scored, the mean rate over the count split's tokens, the rates of the most
frequent entries. One process (the pair counts are one table; not sharded).
"""

import argparse
import json
import sys

from fairseq_maskplug.common.option_ranges import number

from . import HelpFormatter, configure_tool_output, one_line_on_write_failure, split_name, split_names, track_name


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--data", required=True, help="fairseq-preprocess output directory (holds dict.txt)")
    parser.add_argument("--splits", type=split_names, default="train,valid", help="comma-separated splits to write "
                        "the track for")
    parser.add_argument("--count-split", type=split_name, default="train",
                        help="the split whose lines give the PMI and the rates")
    parser.add_argument("--rate", type=number("(0, 1]", float), default=0.15,
                        help="the rate of every candidate mask (paper: BERT's 15%%)")
    parser.add_argument("--candidates", type=number("[1, inf)", int), default=10,
                        help="random masks drawn per line, the best-scoring kept (ours: the authors do not publish "
                             "theirs)")
    parser.add_argument("--seed", type=number("[0, inf)", int), default=1, help="seed of the candidate masks")
    parser.add_argument("--window", type=number("[2, inf)", int), default=512,
                        help="a longer line is taken as pieces of at most this many tokens, for the counts and the "
                             "masks: the cost of a line grows with the square of its length (ours: BERT's longest "
                             "input; the paper's lines are sentences)")
    parser.add_argument("--name", type=track_name, default="informask_rate",
                        help="track name (the informask policy's --informask-track)")
    parser.add_argument("--write-table", default=None, help="also write the rate table here ({token id: rate} JSON)")
    return parser.parse_args(argv)


@one_line_on_write_failure
def main(argv=None) -> int:
    configure_tool_output()
    args = parse_args(argv)
    from .vocabulary_tracks import run_with_locks

    return run_with_locks(write_rates, args)  # every input and output checked before any work


def content_lines(tokens, nspecial: int):
    """Each line's token ids without the special ones (``<s>``, ``<pad>``, ``</s>``, ``<unk>``)."""
    for i in range(len(tokens)):
        line = tokens[i].numpy()
        yield line[line >= nspecial]


def write_rates(args, locks) -> int:
    import numpy as np

    from fairseq_maskplug.common.atomic import check_writable, write_text
    from fairseq_maskplug.common.progress import progress_bar
    from fairseq_maskplug.scoring.informask import CooccurrencePMI, token_rates

    from .vocabulary_tracks import data_dictionary, load_checked_splits, write_lookup_tracks

    dictionary = data_dictionary("--data", args.data)
    loaded = load_checked_splits(args.data, args.splits, [args.count_split], dictionary, args.name, locks)
    if args.write_table:
        check_writable(args.write_table)
    _, count_tokens = loaded[args.count_split]
    nspecial = dictionary.nspecial
    lines = list(progress_bar(content_lines(count_tokens, nspecial), total=len(count_tokens),
                              desc=f"lines of {args.count_split}", unit="line"))
    counts = CooccurrencePMI(progress_bar(lines, desc="pair counts", unit="line"), len(dictionary),
                             window=args.window)
    rates = token_rates(progress_bar(lines, desc="sample and score", unit="line"), counts, args.rate,
                        args.candidates, args.seed, default=args.rate, window=args.window)
    rates[:nspecial] = 0.0
    summary = {"lines": len(lines), "candidates": args.candidates, "rate": args.rate}
    occurring = np.concatenate(lines) if lines else np.zeros(0, dtype=np.int64)
    summary["mean_rate_over_tokens"] = round(float(rates[occurring].mean()), 4) if occurring.size else None
    frequent = np.argsort(-counts.token_lines, kind="stable")[:10]
    summary["rates_of_frequent_entries"] = {dictionary[i]: round(float(rates[i]), 4) for i in frequent
                                            if counts.token_lines[i] > 0}
    summary.update(write_lookup_tracks(loaded, args.splits, args.name, rates))
    if args.write_table:
        write_text(args.write_table, json.dumps({str(i): float(r) for i, r in enumerate(rates) if i >= nspecial},
                                                indent=1) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
