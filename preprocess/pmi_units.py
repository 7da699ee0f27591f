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
"""

import argparse
import json
import os
import sys

from fairseq_maskplug.common.option_ranges import number

from . import HelpFormatter, configure_tool_output, one_line_on_write_failure, split_name, split_names, track_name

COMMAND = "fairseq-maskplug-pmi-units"


def parse_args(argv=None):
    from fairseq_maskplug.data.word_boundaries import BOUNDARIES
    from fairseq_maskplug.scoring.pmi_lexicon import SCORES

    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--data", required=True, help="fairseq-preprocess output directory (holds dict.txt)")
    parser.add_argument("--splits", type=split_names, default="train,valid",
                        help="comma-separated splits to write the track for")
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
                        help="n-grams held in memory while counting; beyond it the rarest are dropped (lossy "
                             "counting; the summary's count_threshold bounds the error)")
    parser.add_argument("--word-boundaries", choices=BOUNDARIES, default="auto",
                        help="where words start (as --mask-unit word reads them): auto reads dict.txt")
    parser.add_argument("--gpt2-encoder-json", default=None, help="GPT-2 BPE encoder.json (GPT-2 BPE data)")
    parser.add_argument("--name", type=track_name, default="pmi_units", help="track name (the pmi policy's "
                                                                             "--pmi-track)")
    parser.add_argument("--seed", type=number("[0, inf)", int), default=0,
                        help="seed of the choice between overlapping n-grams (per line)")
    return parser.parse_args(argv)


def load_split(data, split, dictionary):
    from fairseq.data import data_utils
    from fairseq_maskplug.data.dictionaries import check_token_ids
    from fairseq_maskplug.data.indexed_files import RECOPY, check_indexed_pair

    prefix = os.path.join(data, split)
    check_indexed_pair(prefix, RECOPY)
    tokens = data_utils.load_indexed_dataset(prefix, dictionary)
    if tokens is None:
        raise ValueError(f"--data {data}: no split {split!r} ({prefix}.bin/.idx, as fairseq-preprocess writes)")
    check_token_ids(tokens, prefix, dictionary)
    return prefix, tokens


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


def line_words(tokens, dictionary, starts_table, spell):
    """For each line: ``(words, first token of each word, line length)``."""
    import numpy as np

    from fairseq_maskplug.masking import maskable_positions
    from fairseq_maskplug.masking.words import word_starts
    from fairseq_maskplug.scoring.pmi_lexicon import spell_words

    special = (dictionary.bos(), dictionary.eos(), dictionary.pad())
    for i in range(len(tokens)):
        line = tokens[i].numpy()
        maskable = maskable_positions(line, special)
        words, firsts = spell_words(line, word_starts(line, maskable, starts_table), maskable, spell)
        yield words, np.asarray(firsts), len(line)


@one_line_on_write_failure
def main(argv=None) -> int:
    configure_tool_output()
    args = parse_args(argv)
    import numpy as np
    from fairseq_maskplug.data.dictionaries import read_dictionary

    from fairseq_maskplug.common.atomic import check_writable
    from fairseq_maskplug.common.progress import progress_bar
    from fairseq_maskplug.data import write_side_info
    from fairseq_maskplug.data.word_boundaries import word_start_symbols
    from fairseq_maskplug.scoring.pmi_lexicon import (NGramCounts, build_lexicon, read_lexicon, segment,
                                                      unit_start_track)

    try:  # everything checked before any work
        dict_path = os.path.join(args.data, "dict.txt")
        if not os.path.isfile(dict_path):
            raise ValueError(f"--data {args.data}: no dict.txt (give a fairseq-preprocess output directory)")
        dictionary = read_dictionary(dict_path)
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
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    summary = {"word_boundaries": boundaries, "count_threshold": 0}
    if lexicon is None:
        counts = NGramCounts(5, args.max_ngrams)
        _, tokens = loaded[args.count_split]
        for words, _, _ in progress_bar(line_words(tokens, dictionary, starts_table, spell), total=len(tokens),
                                        desc=f"counting n-grams of {args.count_split}", unit="line"):
            counts.add(words)
        lexicon = build_lexicon(counts, args.lexicon_size, args.min_count, args.score)
        summary.update(count_threshold=counts.threshold, counted_ngrams=len(counts.counts), score=args.score,
                       min_count=args.min_count)
    summary["lexicon"] = {str(n): sum(len(g) == n for g in lexicon) for n in range(2, 6)}
    if args.write_lexicon:
        from fairseq_maskplug.common.atomic import write_text

        ranked = sorted(lexicon.items(), key=lambda item: (len(item[0]), -item[1], item[0]))
        write_text(args.write_lexicon, "".join(f"{' '.join(g)}\t{v:.6g}\n" for g, v in ranked))
    for split in splits:
        prefix, tokens = loaded[split]
        rng = np.random.default_rng((args.seed, splits.index(split)))
        stats = {"lines": 0, "words": 0, "units": 0, "words_in_ngrams": 0}

        def rows():
            for words, firsts, length in progress_bar(line_words(tokens, dictionary, starts_table, spell),
                                                      total=len(tokens), desc=f"units of {split}", unit="line"):
                unit_starts = segment(words, lexicon, 5, rng)
                stats["lines"] += 1
                stats["words"] += len(words)
                stats["units"] += len(unit_starts)
                stats["words_in_ngrams"] += len(words) - len(unit_starts) + sum(
                    1 for a, b in zip(unit_starts, unit_starts[1:] + [len(words)]) if b - a > 1)
                yield unit_start_track(length, firsts, unit_starts)

        write_side_info(f"{prefix}.{args.name}", rows(), "uint8", tokens_prefix=prefix)
        summary[split] = {**stats, "units_per_line": round(stats["units"] / max(stats["lines"], 1), 3),
                          "share_of_words_in_ngrams": round(stats["words_in_ngrams"] / max(stats["words"], 1), 4)}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
