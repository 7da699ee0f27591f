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

import argparse
import json
import sys

from fairseq_maskplug.common.option_ranges import number
from fairseq_maskplug.tools.sharding import add_shard_options

from . import HelpFormatter, add_splits, command_main, split_name, track_name

COMMAND = "fairseq-maskplug-pmi-units"


def parse_args(argv=None):
    from fairseq_maskplug.data.word_boundaries import BOUNDARIES
    from fairseq_maskplug.scoring.pmi_lexicon import SCORES

    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--data", required=True, help="fairseq-preprocess output directory (holds dict.txt)")
    add_splits(parser, ["train", "valid"], "write the track for")
    parser.add_argument("--count-split", type=split_name, default="train",
                        help="the split whose n-grams build the lexicon")
    parser.add_argument("--lexicon", default=None, help="read this lexicon instead of building one: one n-gram per "
                                                        "line, words separated by spaces (the authors' published "
                                                        "lists); anything after a tab is ignored")
    parser.add_argument("--write-lexicon", default=None, help="also write the lexicon used here to this file")
    parser.add_argument("--lexicon-size", type=number("[1, inf)", int), default=800_000,
                        help="n-grams in a built lexicon, 50%% bigrams, 25%% trigrams, 12.5%% each 4- and 5-grams "
                             "(the paper's and authors' list: 800K)")
    parser.add_argument("--min-count", type=number("[0, inf)", int), default=10,
                        help="a lexicon n-gram occurs more than this many times (authors: 10)")
    parser.add_argument("--score", choices=SCORES, default="paper",
                        help="paper: Eq. 3's PMI_n; authors: PMI_n + log p(n-gram), the score of their published "
                             "lists")
    parser.add_argument("--max-ngrams", type=number("[1, inf)", int), default=10_000_000,
                        help="n-grams held in memory while counting, counted in batches of this / 5 words; beyond "
                             "it, after a batch, the rarest are dropped (lossy counting; the summary's count_threshold "
                             "bounds the error)")
    parser.add_argument("--word-boundaries", choices=BOUNDARIES, default="auto",
                        help="where words start (as --mask-unit word reads them): auto reads dict.txt")
    parser.add_argument("--gpt2-encoder-json", default=None, help="GPT-2 BPE encoder.json (GPT-2 BPE data)")
    parser.add_argument("--name", type=track_name, default="pmi_units", help="track name (the pmi policy's "
                                                                             "--pmi-track)")
    parser.add_argument("--seed", type=number("[0, inf)", int), default=0,
                        help="seed of the choice between overlapping n-grams (per line)")
    add_shard_options(parser)
    return parser.parse_args(argv)


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


def line_words(tokens, dictionary, starts_table, spell, lines: range = None):
    """For each line of ``lines`` (default: all): ``(words, first token of each word, line length)``."""
    import numpy as np

    from fairseq_maskplug.masking import maskable_positions
    from fairseq_maskplug.masking.words import word_starts
    from fairseq_maskplug.scoring.pmi_lexicon import spell_words

    special = (dictionary.bos(), dictionary.eos(), dictionary.pad())
    for i in range(len(tokens)) if lines is None else lines:
        line = tokens[i].numpy()
        maskable = maskable_positions(line, special)
        words, firsts = spell_words(line, word_starts(line, maskable, starts_table), maskable, spell)
        yield words, np.asarray(firsts), len(line)


def count_ngrams(args, shard, tokens, count_prefix: str, words_of):
    """Pass 1: the n-gram counts of the count split; in shards, each shard's lines are counted into a part
    (:mod:`fairseq_maskplug.tools.pass_parts`) and every shard sums all parts (exact where no shard reached
    ``--max-ngrams``: :func:`~fairseq_maskplug.scoring.pmi_lexicon.merge_counts`). Returns None when
    independent jobs must be run again (another shard has not counted yet)."""
    from fairseq_maskplug.common.progress import progress_bar
    from fairseq_maskplug.data.side_info import token_fingerprint
    from fairseq_maskplug.data.track_shards import shard_lines
    from fairseq_maskplug.scoring.pmi_lexicon import NGramCounts, merge_counts
    from fairseq_maskplug.tools.pass_parts import PassParts, counts_directory, make_parts_directory, shard_pass

    def count(lines):
        counts = NGramCounts(5, args.max_ngrams)
        desc = f"counting n-grams of {args.count_split}"
        for words, _, _ in progress_bar(words_of(tokens, lines), total=len(lines), desc=desc, unit="line"):
            counts.add(words)
        return counts

    lines = shard_lines(len(tokens), shard.num_shards, shard.shard_id, args.shard_block_lines)
    if shard.num_shards == 1:
        return count(lines)
    parts_dir = counts_directory(args.data, args.count_split, args.name)
    options = {"tokens": token_fingerprint(count_prefix), "max_ngrams": args.max_ngrams, "format": "sorted-npz",
               "word_boundaries": args.word_boundaries, "block_lines": args.shard_block_lines}
    parts = PassParts(parts_dir, "counts", shard.num_shards, options, save=save_counts, load=load_counts)
    make_parts_directory(parts_dir, COMMAND)
    every = shard_pass(parts, shard, lines, len(tokens), count, "n-gram counts",
                       "each skips its counts and writes its units")
    return None if every is None else merge_counts(every)


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


def write_units(args) -> int:
    from fairseq_maskplug.common.atomic import check_writable
    from fairseq_maskplug.common.progress import progress_bar
    from fairseq_maskplug.data.word_boundaries import word_start_symbols
    from fairseq_maskplug.scoring.pmi_lexicon import build_lexicon, read_lexicon
    from fairseq_maskplug.tools.pass_parts import check_parts_directory, counts_directory, remove_parts_directory
    from fairseq_maskplug.tools.producer import data_dictionary, load_split, named_tracks, write_tracks
    from fairseq_maskplug.tools.sharding import ShardedTrack, file_identity, start_producer

    # everything checked before any work
    dictionary = data_dictionary("--data", args.data)
    starts_table, boundaries = word_start_symbols(dictionary, args.word_boundaries, args.gpt2_encoder_json)
    splits = args.splits
    loaded = {split: load_split(args.data, split, dictionary) for split in splits}
    if args.lexicon is None and args.count_split not in loaded:
        loaded[args.count_split] = load_split(args.data, args.count_split, dictionary)
    lexicon = None
    if args.lexicon is not None:
        with open(args.lexicon, encoding="utf-8") as f:
            lexicon = read_lexicon(f, args.lexicon)
        if not lexicon:
            raise ValueError(f"--lexicon {args.lexicon}: no n-gram in it")
    if args.write_lexicon:
        check_writable(args.write_lexicon)
    spell = speller(dictionary, boundaries, args.gpt2_encoder_json)
    shard = start_producer(args, args.data)
    if shard.num_shards > 1 and lexicon is None:
        check_parts_directory(counts_directory(args.data, args.count_split, args.name), COMMAND)

    def words_of(tokens, lines):
        return line_words(tokens, dictionary, starts_table, spell, lines)

    summary = {"word_boundaries": boundaries, "count_threshold": 0}
    if lexicon is None:
        count_prefix, count_tokens = loaded[args.count_split]
        counts = count_ngrams(args, shard, count_tokens, count_prefix, words_of)
        if counts is None:
            return 0
        lexicon = build_lexicon(counts, args.lexicon_size, args.min_count, args.score)
        summary.update(count_threshold=counts.threshold, counted_ngrams=len(counts), score=args.score,
                       min_count=args.min_count)
        source = {"count_split": args.count_split, "lexicon_size": args.lexicon_size, "min_count": args.min_count,
                  "score": args.score, "max_ngrams": args.max_ngrams}
    else:
        source = file_identity(args.lexicon, "lexicon")
    summary["lexicon"] = {str(n): sum(len(g) == n for g in lexicon) for n in range(2, 6)}
    if args.write_lexicon and shard.shard_id == 0:
        from fairseq_maskplug.common.atomic import write_text

        ranked = sorted(lexicon.items(), key=lambda item: (len(item[0]), -item[1], item[0]))
        write_text(args.write_lexicon, "".join(f"{' '.join(g)}\t{v:.6g}\n" for g, v in ranked))
    options = {**source, "seed": args.seed, "splits": splits, "word_boundaries": boundaries}

    def units(out, lines):
        stats = {"lines": 0, "words": 0, "units": 0, "words_in_ngrams": 0}
        words = progress_bar(words_of(loaded[out.split][1], lines), total=len(lines), desc=f"units of {out.split}",
                             unit="line")
        rows = unit_rows(splits.index(out.split), args.seed, lines, words, lexicon, stats)
        return [rows], lambda wrote: {**stats, **unit_shares(stats), "wrote": wrote[0]}

    summary.update(write_tracks(ShardedTrack(shard, options, args.shard_block_lines),
                                named_tracks(loaded, splits, args.name), units, "uint8", args.data, dictionary))
    if shard.merges and args.lexicon is None:
        remove_parts_directory(counts_directory(args.data, args.count_split, args.name), COMMAND)
    print(json.dumps(summary))
    return 0


# every input and output checked before any work; a shard part made otherwise refused in one line too
main = command_main(parse_args, write_units)


if __name__ == "__main__":
    sys.exit(main())
