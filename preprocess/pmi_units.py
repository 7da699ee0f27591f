"""Write PMI-Masking's unit track (Levine et al., ICLR 2021) for binarized splits: build the n-gram
lexicon from a split (or read a published one) and cut every line into units, a lexicon n-gram else
one whole word (``fairseq_maskplug.scoring.pmi_lexicon`` says how, step by step).

Example (the demo's in-domain data; then ``--mask-policy pmi``)::

    fairseq-maskplug-pmi-units --data work/data/indomain --splits train,valid --min-count 5

Writes ``DATA/SPLIT.pmi_units.bin/.idx/.json`` for each split (1 on a unit's first token, 0 elsewhere;
fingerprinted against the tokens, written atomically) and, with ``--write-lexicon``, the lexicon as
``n-gram<TAB>score`` lines, best first per length (the authors' list format plus the score). Prints
a JSON summary: the lexicon's size per length, units per line, the share of words inside an n-gram
unit, and the count threshold of the bounded counting (0: exact counts).

In shards (``--num-shards N --shard-id I``, or the ranks of a torchrun/srun launch), each shard takes whole
blocks of lines: pass 1 writes the n-gram counts of its lines of ``--count-split`` to
``DATA/COUNT_SPLIT.NAME.counts.shards/``; with every shard's counts summed (the one-process counts where no
shard reached ``--max-ngrams``; otherwise lossy counting's bounds, the thresholds added) every shard builds
the same lexicon and writes the units of its lines as a part, merged by rank 0 or by
``fairseq-maskplug-merge-shards DATA`` (which also removes the counts). Independent jobs run every shard
twice: the first run counts and stops. A line's choice among overlapping n-grams is seeded by its number,
so the track does not depend on the shards. With ``--lexicon`` there is no pass 1.
"""

import sys
from dataclasses import dataclass

from fairseq_maskplug.common.option_ranges import option
from fairseq_maskplug.data.word_boundaries import BOUNDARIES
from fairseq_maskplug.scoring.pmi_lexicon import SCORES
from fairseq_maskplug.tools.producer import (CountingOptions, TokenProducer, Track, counted_split, counts_removed,
                                             write_besides)

COMMAND = "fairseq-maskplug-pmi-units"


@dataclass
class PMIOptions(CountingOptions):
    lexicon: str = option(None, "read this lexicon instead of building one: one n-gram per line, words separated by "
                          "spaces (the authors' published lists); anything after a tab is ignored", recorded=False)
    write_lexicon: str = option(None, "also write the lexicon used here to this file", output=True, recorded=False)
    lexicon_size: int = option(800_000, "n-grams in a built lexicon, 50%% bigrams, 25%% trigrams, 12.5%% each 4- and "
                               "5-grams (the paper's and the authors' list: 800K)", range="[1, inf)", source="paper")
    min_count: int = option(10, "a lexicon n-gram occurs more than this many times", range="[0, inf)",
                            source="authors' code")
    score: str = option("paper", "paper: Eq. 3's PMI_n; authors: PMI_n + log p(n-gram), the score of their "
                        "published lists", choices=list(SCORES))
    max_ngrams: int = option(10_000_000, "n-grams held in memory while counting, counted in batches of this / 5 "
                             "words; beyond it, after a batch, the rarest are dropped (lossy counting; the summary's "
                             "count_threshold bounds the error)", range="[1, inf)", source="ours")
    word_boundaries: str = option("auto", "where words start (as --mask-unit word reads them): auto reads dict.txt",
                                  choices=list(BOUNDARIES))
    gpt2_encoder_json: str = option(None, "GPT-2 BPE encoder.json (GPT-2 BPE data)")
    seed: int = option(0, "seed of the choice between overlapping n-grams (per line)", range="[0, inf)",
                       source="ours")


def speller(dictionary, boundaries, encoder_json):
    """``spell(token ids) -> text`` of a word."""
    import json as json_module

    from fairseq_maskplug.scoring.alignment import TokenSurfaces

    if boundaries == "whitespace":
        return lambda ids: " ".join(dictionary.symbols[int(i)] for i in ids)
    encoder = None
    if boundaries == "gpt2":
        with open(encoder_json, encoding="utf-8") as f:
            encoder = json_module.load(f)
    surfaces = TokenSurfaces(dictionary.symbols, (), dictionary.unk(), boundaries, encoder)
    return lambda ids: b"".join(b"<unk>" if s is None else s
                                for s in surfaces.token_bytes(ids, unknown_ok=True)).decode("utf-8", "replace")


def line_words(lines, dictionary, starts_table, spell):
    """For each line of ``lines`` (token arrays): ``(words, first token of each word, line length)``."""
    import numpy as np

    from fairseq_maskplug.masking import maskable_positions
    from fairseq_maskplug.masking.words import word_starts
    from fairseq_maskplug.scoring.pmi_lexicon import spell_words

    special = (dictionary.bos(), dictionary.eos(), dictionary.pad())
    for line in lines:
        maskable = maskable_positions(line, special)
        words, firsts = spell_words(line, word_starts(line, maskable, starts_table), maskable, spell)
        yield words, np.asarray(firsts), len(line)


def count_ngrams(options: PMIOptions, counted, words_of):
    """Pass 1: the n-gram counts of the count split (``counted``: its :class:`~fairseq_maskplug.tools.producer.
    CountedSplit`); in shards, every shard sums all shards' counts (exact where no shard reached
    ``--max-ngrams``: :func:`~fairseq_maskplug.scoring.pmi_lexicon.merge_counts`). Returns None when independent
    jobs must be run again (another shard has not counted yet)."""
    from fairseq_maskplug.common.progress import progress_bar
    from fairseq_maskplug.scoring.pmi_lexicon import NGramCounts, merge_counts

    def count(lines):
        counts = NGramCounts(5, options.max_ngrams)
        desc = f"counting n-grams of {options.count_split}"
        arrays = (counted.tokens[i].numpy() for i in lines)
        for words, _, _ in progress_bar(words_of(arrays), total=len(lines), desc=desc, unit="line"):
            counts.add(words)
        return counts

    recorded = {"max_ngrams": options.max_ngrams, "format": "sorted-npz", "word_boundaries": options.word_boundaries}
    return counted.shared("counts", count, merge_counts, "n-gram counts", "each skips its counts and writes its units",
                          recorded, save_counts, load_counts)


def save_counts(counts, f) -> None:
    """A shard's n-gram counts as numpy arrays (``NGramCounts.to_arrays``; uncompressed ``.npz`` bytes)."""
    import numpy as np

    np.savez(f, **counts.to_arrays())


def load_counts(f):
    import numpy as np

    from fairseq_maskplug.scoring.pmi_lexicon import NGramCounts

    with np.load(f, allow_pickle=False) as arrays:
        return NGramCounts.from_arrays(arrays)


def unit_rows(split_index: int, seed: int, lines: range, words, lexicon, stats: dict):
    """Pass 2: each line's unit-start track; a line's choice among overlapping n-grams is seeded by
    ``(seed, split, line)``, so a line's units do not depend on the shards."""
    import numpy as np

    from fairseq_maskplug.scoring.pmi_lexicon import segment, unit_start_track

    for line, (line_words_, firsts, length) in zip(lines, words):
        unit_starts = segment(line_words_, lexicon, 5, np.random.default_rng((seed, split_index, line)))
        stats["lines"] += 1
        stats["words"] += len(line_words_)
        stats["units"] += len(unit_starts)
        stats["words_in_ngrams"] += len(line_words_) - len(unit_starts) + sum(
            1 for a, b in zip(unit_starts, unit_starts[1:] + [len(line_words_)]) if b - a > 1)
        yield unit_start_track(length, firsts, unit_starts)


def unit_shares(stats: dict) -> dict:
    """A split's units per line and share of words inside an n-gram unit, from :func:`unit_rows`' ``stats``."""
    return {"units_per_line": round(stats["units"] / max(stats["lines"], 1), 3),
            "share_of_words_in_ngrams": round(stats["words_in_ngrams"] / max(stats["words"], 1), 4)}


def pmi_units(options: PMIOptions, inputs):
    """Each line's unit starts, from the lexicon read (``--lexicon``) or built from the counts of the count split
    (``--write-lexicon``: shard 0 writes it first); each split's entry of the summary counts its units."""
    from fairseq_maskplug.data.word_boundaries import word_start_symbols
    from fairseq_maskplug.scoring.pmi_lexicon import build_lexicon, read_lexicon
    from fairseq_maskplug.tools.sharding import file_identity

    dictionary, summary = inputs.dictionary, inputs.summary
    starts_table, boundaries = word_start_symbols(dictionary, options.word_boundaries, options.gpt2_encoder_json)
    lexicon = None
    if options.lexicon is not None:
        with open(options.lexicon, encoding="utf-8") as f:
            lexicon = read_lexicon(f, options.lexicon)
        if not lexicon:
            raise ValueError(f"--lexicon {options.lexicon}: no n-gram in it")
        inputs.recorded.update(file_identity(options.lexicon, "lexicon"))
    else:
        counted = counted_split(COMMAND, options.count_split, inputs)
    spell = speller(dictionary, boundaries, options.gpt2_encoder_json)

    def words_of(arrays):
        return line_words(arrays, dictionary, starts_table, spell)

    summary.update(word_boundaries=boundaries, count_threshold=0)
    if lexicon is None:
        counts = count_ngrams(options, counted, words_of)
        if counts is None:
            return None
        lexicon = build_lexicon(counts, options.lexicon_size, options.min_count, options.score)
        summary.update(count_threshold=counts.threshold, counted_ngrams=len(counts), score=options.score,
                       min_count=options.min_count)
    summary["lexicon"] = {str(n): sum(len(g) == n for g in lexicon) for n in range(2, 6)}

    def lexicon_text():  # best first per length
        ranked = sorted(lexicon.items(), key=lambda item: (len(item[0]), -item[1], item[0]))
        return "".join(f"{' '.join(g)}\t{v:.6g}\n" for g, v in ranked)
    write_besides(options.write_lexicon, inputs, lexicon_text)
    inputs.recorded.update(splits=inputs.splits, word_boundaries=boundaries)  # a line's seed holds its split's place

    def of_block(lines):
        stats = summary.setdefault(lines.split, {"lines": 0, "words": 0, "units": 0, "words_in_ngrams": 0})
        rows = list(unit_rows(inputs.splits.index(lines.split), options.seed, lines.numbers, words_of(lines),
                              lexicon, stats))
        stats.update(unit_shares(stats))
        return rows
    return of_block


PRODUCER = TokenProducer(COMMAND, __doc__, PMIOptions, [Track("pmi_units", "--pmi-track")], "uint8", pmi_units,
                         finish=counts_removed(COMMAND))
main = PRODUCER.main


if __name__ == "__main__":
    sys.exit(main())
