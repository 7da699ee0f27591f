"""In-domain Mask (Gu et al. 2020, §2.3): write the tagger's importance scores for a corpus.

    python -m preprocess.annotate_importance --checkpoint tagger/checkpoint_best.pt \\
        --data data-bin/indomain --splits train valid --name importance

For each split writes atomically ``DATA/SPLIT.NAME.bin/.idx/.json`` (one float per token:
P(important); ``</s>`` = 0), the track ``--task selective_mlm`` masks from, and a
preview ``DATA/SPLIT.NAME.preview.txt`` of the first lines with the tokens the
selective policy would select (score >= 0.5) in ``[...]``. The corpus must use the
tagger's dictionary.

In shards (``--num-shards N --shard-id I`` and ``fairseq-maskplug-merge-shards DATA``, or the ranks
of ``torchrun``/``srun``) as ``score-pll``: batches within blocks of ``--shard-block-lines`` lines,
so the merged track is the one a single process writes; the preview is shard 0's.
"""

import sys
from dataclasses import dataclass

import numpy as np

from fairseq_maskplug.common.option_ranges import option
from fairseq_maskplug.scoring.model_tracks import PreviewedScoringOptions, ReadsCheckpoint
from fairseq_maskplug.tools.producer import TokenProducer, Track


@dataclass
class AnnotateOptions(PreviewedScoringOptions):
    gpt2_bpe: str = option(None, "GPT-2 BPE directory (encoder.json) of GPT-2 BPE data: the preview shows text, not "
                           "labels", recorded=False)


def tagger_scores(options: AnnotateOptions, inputs):
    """Each line's P(important) from the tagger's head."""
    from fairseq_maskplug.scoring.tagger import TokenTagger

    d = inputs.task.source_dictionary
    tagger = TokenTagger(inputs.model, inputs.task.cfg.tagger_head_name, d.bos(), d.eos(), d.pad())
    return lambda lines: tagger.score(lines, options.max_tokens)


def report(options: AnnotateOptions, inputs, done) -> str:
    """The split's line; shard 0 writes the preview of its first lines (with shards: of shard 0's range)."""
    from fairseq_maskplug.scoring.preview import preview_symbols, render_marked, throughput, write_preview
    from fairseq_maskplug.tools.sharding import warn_if_all_or_none

    scores, (prefix,), wrote = done.rows[0], done.tracks.prefixes, done.wrote[0]
    if inputs.shard.shard_id == 0:
        symbols, preview = preview_symbols(inputs.dictionary, options.gpt2_bpe), prefix + ".preview.txt"
        write_preview(preview, (render_marked([symbols[t] for t in line[:-1]], score[:-1] >= 0.5)
                                for line, score in zip(done.lines[:options.preview_lines], scores)))
        wrote = f"{wrote} and {preview}"
    words = np.concatenate([s[:-1] for s in scores]) if scores else np.zeros(0)
    share = f"{np.mean(words >= 0.5):.1%}" if words.size else "-"
    if words.size:
        warn_if_all_or_none(prefix, float(np.mean(words >= 0.5)), "scored >= 0.5")
    return (f"{done.tracks.split}: {throughput('tagged', len(done.lines), words.size, done.seconds)}; {share} of the "
            f"tokens scored >= 0.5; {inputs.precision}; wrote {wrote}")


PRODUCER = TokenProducer("fairseq-maskplug-annotate-importance", __doc__, AnnotateOptions,
                         [Track("importance", "--selective-track")], "float64",
                         tagger_scores, report=report,
                         reads=ReadsCheckpoint("the tagger (a token_importance checkpoint)",
                                               tasks=("token_importance",)))
main = PRODUCER.main


if __name__ == "__main__":
    sys.exit(main())
