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
frequent entries.

In shards (``--num-shards N --shard-id I``, or the ranks of a torchrun/srun launch) each shard takes whole
blocks of ``--shard-block-lines`` lines and makes two passes over its lines of the count split, each
exchanged through parts in ``DATA/COUNT_SPLIT.NAME.counts.shards/`` (:mod:`fairseq_maskplug.tools.pass_parts`):
its pair counts (summed over the shards: the one-process counts), then its lines' covered and seen
occurrences (each line's masks drawn from its own number, so they do not depend on the shards; summed: the
one-process rates); then it writes its lines of each track as a part, merged by rank 0 of a launch or by
``fairseq-maskplug-merge-shards DATA`` (which also removes the parts). Independent jobs run every shard three
times (counts, occurrences, tracks): a run says what is missing. The tracks are the one process's, byte for byte
(tested).
"""

import json
import sys

import numpy as np

from fairseq_maskplug.common.option_ranges import number

from . import command_main

COMMAND = "fairseq-maskplug-informask"


def parse_args(argv=None):
    from .vocabulary_tracks import add_output_options, lookup_parser

    parser = lookup_parser(__doc__, "fairseq-preprocess output directory (holds dict.txt)",
                           "the split whose lines give the PMI and the rates")
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
    add_output_options(parser, "informask_rate", "--informask-track", "--write-table",
                       "also write the rate table here ({token id: rate} JSON)")
    return parser.parse_args(argv)


def content_lines(tokens, nspecial: int, lines: range = None):
    """Each line's token ids without the special ones (``<s>``, ``<pad>``, ``</s>``, ``<unk>``), of ``lines``
    (default all)."""
    for i in lines if lines is not None else range(len(tokens)):
        line = tokens[i].numpy()
        yield line[line >= nspecial]


def shared_rates(args, shard, count_prefix: str, count_tokens, nspecial: int, vocab_size: int):
    """``(counts, rates)`` of the count split: one process counts and samples every line; shards make each pass
    over their own lines and sum every shard's part (the module docstring). None when independent jobs must be
    run again."""
    from fairseq_maskplug.common.progress import progress_bar
    from fairseq_maskplug.data.side_info import token_fingerprint
    from fairseq_maskplug.data.track_shards import shard_lines
    from fairseq_maskplug.scoring.informask import CooccurrencePMI, covered_occurrences, rates_of
    from fairseq_maskplug.tools.pass_parts import PassParts, load_arrays, make_parts_directory, save_arrays, shard_pass

    from .vocabulary_tracks import counts_directory

    lines = shard_lines(len(count_tokens), shard.num_shards, shard.shard_id, args.shard_block_lines)

    def count(lines):
        desc = f"pair counts of {args.count_split}"
        own = progress_bar(content_lines(count_tokens, nspecial, lines), total=len(lines), desc=desc, unit="line")
        return CooccurrencePMI(own, vocab_size, window=args.window)

    def cover(counts):
        def occurrences(lines):
            own = progress_bar(content_lines(count_tokens, nspecial, lines), total=len(lines),
                               desc="sample and score", unit="line")
            masked, seen = covered_occurrences(own, counts, args.rate, args.candidates, args.seed, args.window,
                                               first_line=lines.start)
            return {"masked": masked, "seen": seen}
        return occurrences

    if shard.num_shards == 1:
        counts = count(lines)
        covered = cover(counts)(lines)
        return counts, rates_of(covered["masked"], covered["seen"], args.rate)
    parts_dir = counts_directory(args)
    make_parts_directory(parts_dir, COMMAND)
    options = {"tokens": token_fingerprint(count_prefix), "window": args.window, "block_lines": args.shard_block_lines}
    pairs = PassParts(parts_dir, "pairs", shard.num_shards, options,
                      lambda counts, f: save_arrays(counts.to_arrays(), f), load_arrays)
    every = shard_pass(pairs, shard, lines, len(count_tokens), count, "pair counts",
                       "each skips its counts and samples its lines")
    if every is None:
        return None
    counts = CooccurrencePMI.merged(every)
    options = dict(options, rate=args.rate, candidates=args.candidates, seed=args.seed)
    occurrences = PassParts(parts_dir, "occurrences", shard.num_shards, options, save_arrays, load_arrays)
    every = shard_pass(occurrences, shard, lines, len(count_tokens), cover(counts), "covered occurrences",
                       "each skips its counts and occurrences and writes its lines of the tracks")
    if every is None:
        return None
    masked = np.sum([part["masked"] for part in every], axis=0)  # float64 sums of whole numbers: exact
    return counts, rates_of(masked, np.sum([part["seen"] for part in every], axis=0), args.rate)


def write_rates(args) -> int:
    from fairseq_maskplug.common.atomic import write_text
    from fairseq_maskplug.data.side_info import token_fingerprint

    from fairseq_maskplug.tools.producer import data_dictionary

    from .vocabulary_tracks import load_lookup_inputs, write_lookup_tracks

    dictionary = data_dictionary("--data", args.data)
    loaded, shard = load_lookup_inputs(args, dictionary, COMMAND, [args.write_table])  # before any work
    count_prefix, count_tokens = loaded[args.count_split]
    nspecial = dictionary.nspecial
    shared = shared_rates(args, shard, count_prefix, count_tokens, nspecial, len(dictionary))
    if shared is None:
        return 0
    counts, rates = shared
    rates[:nspecial] = 0.0
    summary = {"lines": len(count_tokens), "candidates": args.candidates, "rate": args.rate}
    occurring = np.concatenate(list(content_lines(count_tokens, nspecial)) or [np.zeros(0, dtype=np.int64)])
    summary["mean_rate_over_tokens"] = round(float(rates[occurring].mean()), 4) if occurring.size else None
    frequent = np.argsort(-counts.token_lines, kind="stable")[:10]
    summary["rates_of_frequent_entries"] = {dictionary[i]: round(float(rates[i]), 4) for i in frequent
                                            if counts.token_lines[i] > 0}
    options = {"count_tokens": token_fingerprint(count_prefix), "rate": args.rate, "candidates": args.candidates,
               "seed": args.seed, "window": args.window, "count_split": args.count_split, "splits": args.splits}
    write_lookup_tracks(args, shard, loaded, dictionary, rates, options, summary, COMMAND)
    if args.write_table and shard.shard_id == 0:
        write_text(args.write_table, json.dumps({str(i): float(r) for i, r in enumerate(rates) if i >= nspecial},
                                                indent=1) + "\n")
    print(json.dumps(summary))
    return 0


# every input and output checked before any work; a shard part made otherwise refused in one line too
main = command_main(parse_args, write_rates)


if __name__ == "__main__":
    sys.exit(main())
