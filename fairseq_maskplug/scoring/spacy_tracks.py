"""The steps of every producer that annotates a binarized split with a spaCy pipeline run over its raw text
(``pos-tags``, ``salient-spans``; issue 54): a producer supplies its pipeline, its own checks and what it
computes from its lines.

Before any work: spaCy imported, every line of ``--text`` checked to spell what its tokens spell
(:func:`.alignment.spelled_split`), the pipeline loaded, the lines checked against its length limit, the
producer's own checks, the shard (:func:`~..tools.sharding.start_producer`). Then the loop of every track
producer (:func:`~..tools.producer.write_tracks`): the output locked, this shard's lines (whole blocks: spaCy's
batches, a divisor of the block, never cross one, so a line's values do not depend on the shards) annotated and
written as its part (one shard: the track), the merge, and one JSON summary printed: the track, the model, what
was written, the producer's counts, the merges and warnings.
"""

import json
import sys
from typing import Callable, NamedTuple


class SpacyProducer(NamedTuple):
    """What one spaCy producer adds to the steps above."""

    command: str  #: its command name, for the errors of a missing spaCy
    dtype: str  #: of its track's values
    load: Callable  #: ``load(model name) -> nlp``
    check: Callable  #: ``check(nlp, args) -> dict``: its own checks (raise ValueError), the options they add
    #: ``annotate(nlp, texts, ranges, args) -> (rows, summary)`` of its lines: ``rows`` may be lazy, and
    #: ``summary()``, called once they are written, gives the summary's entries (counts made on the way)
    annotate: Callable


def write_spacy_track(producer: SpacyProducer, args) -> int:
    """Run ``producer`` on ``args`` (``--data``, ``--split``, ``--name``, ``--text``, the spaCy and shard
    options); returns the command's exit status (2: one line on standard error, before any work)."""
    from ..common.extras import import_spacy
    from ..tools.cli import check_spacy_lengths
    from ..tools.producer import SplitTracks, write_tracks
    from ..tools.sharding import ShardedTrack, file_identity, start_producer
    from .alignment import spelled_split

    try:
        spacy = import_spacy(producer.command)
        split_prefix, prefix, texts, ranges, _ = spelled_split(args.data, args.split, args.name, args.text, args.bpe,
                                                               args.gpt2_encoder_json)
        nlp = producer.load(args.spacy_model)
        check_spacy_lengths(nlp, texts, args)
        extra = producer.check(nlp, args)
        shard = start_producer(args, args.data)
        options = {**file_identity(args.text, "text"), "spacy": spacy.__version__, "spacy_model": args.spacy_model,
                   "spacy_model_version": nlp.meta.get("version"), **extra, "bpe": args.bpe,
                   "batch_size": args.batch_size}

        def annotated(out, lines):  # whole blocks, starting on one: spaCy's batches of a divisor never cross them
            rows, counts = producer.annotate(nlp, texts[lines.start:lines.stop], ranges[lines.start:lines.stop], args)
            return [rows], lambda wrote: {"wrote": wrote[0], **counts()}

        written = write_tracks(ShardedTrack(shard, options, args.shard_block_lines),
                               [SplitTracks(args.split, split_prefix, len(texts), [prefix])], annotated,
                               producer.dtype, args.data)
    except (ValueError, OSError, ImportError) as error:  # before any work; also a part made otherwise
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"track": prefix, "spacy_model": args.spacy_model, **written.pop(args.split, {}), **written}))
    return 0
