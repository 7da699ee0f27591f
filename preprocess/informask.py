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
from dataclasses import dataclass

import numpy as np

from fairseq_maskplug.common.option_ranges import option
from fairseq_maskplug.tools.producer import (CountingOptions, TokenProducer, Track, counted_split, counts_removed,
                                             vocabulary_lookup, write_besides)

COMMAND = "fairseq-maskplug-informask"


@dataclass
class InforMaskOptions(CountingOptions):
    rate: float = option(0.15, "the rate of every candidate mask (BERT's)", range="(0, 1]", source="paper")
    candidates: int = option(10, "random masks drawn per line, the best-scoring kept (the authors do not publish "
                             "theirs)", range="[1, inf)", source="ours")
    seed: int = option(1, "seed of the candidate masks", range="[0, inf)", source="ours")
    window: int = option(512, "a longer line is taken as pieces of at most this many tokens, for the counts and the "
                         "masks: the cost of a line grows with the square of its length (BERT's longest input; "
                         "the paper's lines are sentences)", range="[2, inf)", source="ours")
    write_table: str = option(None, "also write the rate table here ({token id: rate} JSON)", output=True,
                              recorded=False)


def content_lines(tokens, nspecial: int, lines: range = None):
    """Each line's token ids without the special ones (``<s>``, ``<pad>``, ``</s>``, ``<unk>``), of ``lines``
    (default all)."""
    for i in lines if lines is not None else range(len(tokens)):
        line = tokens[i].numpy()
        yield line[line >= nspecial]


def shared_rates(options: InforMaskOptions, inputs, counted):
    """``(counts, rates)`` of the count split (``counted``: its :class:`~fairseq_maskplug.tools.producer.
    CountedSplit`): one process counts and samples every line; shards make each pass over their own lines and
    sum every shard's part (the module docstring). None when independent jobs must be run again."""
    from fairseq_maskplug.common.progress import progress_bar
    from fairseq_maskplug.scoring.informask import CooccurrencePMI, covered_occurrences, rates_of
    from fairseq_maskplug.tools.pass_parts import save_arrays
    from fairseq_maskplug.tools.producer import summed_arrays

    nspecial = inputs.dictionary.nspecial

    def count(lines):
        desc = f"pair counts of {options.count_split}"
        own = progress_bar(content_lines(counted.tokens, nspecial, lines), total=len(lines), desc=desc, unit="line")
        return CooccurrencePMI(own, len(inputs.dictionary), window=options.window)

    def occurrences(lines):
        own = progress_bar(content_lines(counted.tokens, nspecial, lines), total=len(lines), desc="sample and score",
                           unit="line")
        masked, seen = covered_occurrences(own, counts, options.rate, options.candidates, options.seed,
                                           options.window, first_line=lines.start)
        return {"masked": masked, "seen": seen}

    recorded = {"window": options.window}
    counts = counted.shared("pairs", count, CooccurrencePMI.merged, "pair counts",
                            "each skips its counts and samples its lines", recorded,
                            save=lambda counts, f: save_arrays(counts.to_arrays(), f))
    if counts is None:
        return None
    recorded.update(rate=options.rate, candidates=options.candidates, seed=options.seed)
    covered = counted.shared("occurrences", occurrences, summed_arrays, "covered occurrences",
                             "each skips its counts and occurrences and writes its lines of the tracks", recorded)
    if covered is None:
        return None
    return counts, rates_of(covered["masked"], covered["seen"], options.rate)


def informask_rates(options: InforMaskOptions, inputs):
    """Every token's entry of the rate table (0 at the special ones), counted over the count split first
    (``--write-table``: shard 0 writes it then)."""
    d = inputs.dictionary
    counted = counted_split(COMMAND, options.count_split, inputs)
    shared = shared_rates(options, inputs, counted)
    if shared is None:
        return None
    counts, rates = shared
    rates[:d.nspecial] = 0.0
    occurring = np.concatenate(list(content_lines(counted.tokens, d.nspecial)) or [np.zeros(0, dtype=np.int64)])
    frequent = np.argsort(-counts.token_lines, kind="stable")[:10]
    inputs.summary.update({
        "lines": len(counted.tokens), "candidates": options.candidates, "rate": options.rate,
        "mean_rate_over_tokens": round(float(rates[occurring].mean()), 4) if occurring.size else None,
        "rates_of_frequent_entries": {d[i]: round(float(rates[i]), 4) for i in frequent if counts.token_lines[i] > 0}})
    write_besides(options.write_table, inputs, lambda: json.dumps(
        {str(i): float(r) for i, r in enumerate(rates) if i >= d.nspecial}, indent=1) + "\n")
    return vocabulary_lookup(rates)


PRODUCER = TokenProducer(COMMAND, __doc__, InforMaskOptions, [Track("informask_rate", "--informask-track")],
                         "float64", informask_rates, finish=counts_removed(COMMAND))
main = PRODUCER.main


if __name__ == "__main__":
    sys.exit(main())
