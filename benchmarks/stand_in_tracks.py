"""Every built-in policy's side-information tracks, filled with stand-in values, for a binarized split: what a
policy reads is there and aligned with the tokens, so that the policy builds and masks; what it masks is not
what a real producer's values would make it mask (tests of the policy-task matrix, benchmarks of speed, where a
draw's cost depends on the tracks' shape, not their values)."""

import numpy as np

from fairseq_maskplug.masking.salient import span_ids


def salient_spans(length: int, rng: np.random.Generator, every=None) -> np.ndarray:
    """One span of 1-2 tokens per ``every`` tokens of a line (None: the one span of tokens 1-2), none in lines of
    4 tokens or fewer."""
    if length <= 4:
        return span_ids(length, [])
    if every is None:
        return span_ids(length, [(1, 3)])
    starts = range(1, length - 3, max(every, 4))
    return span_ids(length, [(s, s + int(rng.integers(1, 3))) for s in starts])


def write_stand_in_tracks(directory, splits, rng: np.random.Generator, span_every=None) -> None:
    """Every built-in policy's tracks for ``splits`` of ``directory`` (``dict.txt`` and the binarized splits):
    ``plt`` (L3), ``importance`` (selective), ``salient_spans`` (one span per ``span_every`` tokens; by default
    tokens 1-2 of every line), ``span_start``/``span_end`` (learned_span), ``pmi_units``, ``pos`` (PTW),
    ``informask_rate``, ``token_likelihood`` (Self-Evolution) and ``difference_score``."""
    from fairseq.data import Dictionary, data_utils

    from fairseq_maskplug.data import write_side_info

    dictionary = Dictionary.load(str(directory / "dict.txt"))
    for split in splits:
        tokens = data_utils.load_indexed_dataset(str(directory / split), dictionary)
        sizes = np.array(tokens.sizes)  # a copy, taken while the dataset (its memory map) lives
        tracks = {"plt": ([rng.uniform(0.01, 1.0, n) for n in sizes], "float64"),
                  "importance": ([rng.random(n) for n in sizes], "float64"),
                  "salient_spans": ([salient_spans(n, rng, span_every) for n in sizes], "int64"),
                  "span_start": ([rng.normal(size=n) for n in sizes], "float64"),
                  "span_end": ([rng.normal(size=n) for n in sizes], "float64"),
                  "pmi_units": ([np.append((rng.random(n - 1) < 0.6) | (np.arange(n - 1) == 0), 0) for n in sizes],
                                "uint8"),
                  "pos": ([rng.integers(0, 17, n) for n in sizes], "uint8"),
                  "informask_rate": ([rng.uniform(0.0, 0.3, n) for n in sizes], "float64"),
                  "token_likelihood": ([rng.uniform(0.8, 1.0, n) for n in sizes], "float64"),
                  "difference_score": ([rng.random(n) for n in sizes], "float64")}
        for name, (rows, dtype) in tracks.items():
            write_side_info(str(directory / f"{split}.{name}"), rows, dtype, tokens_prefix=str(directory / split))
