"""What a producer that annotates a binarized split with a spaCy pipeline over its raw text declares on
:class:`~..tools.producer.TokenProducer` (``pos-tags``, ``salient-spans``; issue 54): the text and spaCy options
(:class:`SpacyTextOptions`) and its values (:func:`spacy_values`) from its pipeline, its own checks and what it
computes from its lines.

Before any work: spaCy imported, one split given (``--text`` is its text), ``--batch-size`` dividing
``--shard-block-lines``, every line of ``--text`` checked to spell what its tokens spell
(:func:`.alignment.spelled_split`), the pipeline loaded, the lines checked against its length limit
(:func:`~..tools.cli.check_spacy_lengths`), the producer's own checks. Then this shard's lines go through one
``nlp.pipe`` (one pool of ``--workers``), taken block by block: its batches, a divisor of the block, never cross
one, so a line's values do not depend on the shards. The summary gets the producer's counts of this shard's lines.
"""

from dataclasses import dataclass
from typing import Callable

from ..common.option_ranges import option


@dataclass
class SpacyTextOptions:
    """The options of a spaCy producer (its own add ``spacy_model``, with the help of what its component finds)."""

    text: str = option(None, "the raw text of the split, one line per binarized line", required=True,
                       recorded=False)
    bpe: str = option("sentencepiece", "how the binarized symbols spell text", choices=["sentencepiece", "gpt2"])
    gpt2_encoder_json: str = option(None, "GPT-2 BPE encoder.json (with --bpe gpt2)")
    workers: int = option(1, "spaCy worker processes (nlp.pipe n_process)", range="[1, inf)", source="ours",
                          recorded=False)
    batch_size: int = option(256, "lines per spaCy batch (a divisor of --shard-block-lines)", range="[1, inf)",
                             source="ours")
    spacy_max_length: int = option(1_000_000, "longest line in characters the pipeline takes (spaCy's max_length, "
                                   "its default: it needs about 1 GB of memory per 100,000 characters); a longer "
                                   "line is refused before any work", range="[1, inf)", source="ours",
                                   recorded=False)


def spacy_values(command: str, load: Callable, check: Callable, annotate: Callable):
    """The ``values`` of a spaCy producer (the module docstring): ``load(model name) -> nlp``; ``check(nlp,
    options) -> dict``, its own checks (raise ValueError) and what they add to the parts' record; ``annotate(nlp,
    texts, byte ranges, options) -> (rows, counts)``: a generator of the rows of these lines (without a progress
    bar: the driver shows one) and ``counts()``, called once they are written, the summary's entries. Its
    ``finish`` is :func:`add_counts`."""

    def values(options, inputs):
        from itertools import islice

        from ..common.extras import import_spacy
        from ..data.track_shards import shard_lines
        from ..tools.cli import check_spacy_lengths
        from ..tools.sharding import file_identity
        from .alignment import spelled_split

        spacy = import_spacy(command)
        if len(inputs.splits) != 1:
            raise ValueError(f"--text {options.text} is the text of one split: give one --split, not "
                             f"{' '.join(inputs.splits)}")
        if inputs.block_lines % options.batch_size:
            raise ValueError(f"--batch-size {options.batch_size} must divide --shard-block-lines "
                             f"{inputs.block_lines}: a spaCy batch never crosses a block, so the output does not "
                             "depend on the shards")
        split = inputs.splits[0]
        _, _, texts, ranges, _ = spelled_split(inputs.data, split, inputs.names[0], options.text, options.bpe,
                                               options.gpt2_encoder_json)
        nlp = load(options.spacy_model)
        check_spacy_lengths(nlp, texts, options)
        inputs.recorded.update(**file_identity(options.text, "text"), spacy=spacy.__version__,
                               spacy_model_version=nlp.meta.get("version"), **check(nlp, options))
        inputs.summary["spacy_model"] = options.spacy_model
        shard = inputs.shard
        annotated = inputs.spacy = {}  # its rows and counts, once this shard's first block comes
        stop = shard_lines(len(texts), shard.num_shards, shard.shard_id, inputs.block_lines).stop

        def of_block(lines):
            if not annotated:  # this shard's lines from here on, through one pipe
                start = lines.numbers.start
                annotated["rows"], annotated["counts"] = annotate(nlp, texts[start:stop], ranges[start:stop],
                                                                  options)
            return list(islice(annotated["rows"], len(lines)))
        return of_block
    return values


def add_counts(options, inputs) -> None:
    """A spaCy producer's ``finish``: the counts of the lines it annotated (none where its part was written
    already) into the summary."""
    if inputs.spacy:
        inputs.summary.update(inputs.spacy["counts"]())
