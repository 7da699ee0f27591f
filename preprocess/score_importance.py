"""Downstream Mask (Gu et al. 2020, §2.2): label task-important tokens with a fine-tuned classifier.

    python -m preprocess.score_importance --checkpoint mr-finetuned/checkpoint_best.pt \\
        --data data-bin/mr --split train --name importance

reads the sentence_prediction layout (``DATA/input0``, ``DATA/label``), runs the buffer
algorithm (``S(w_i) = P(y|s) - P(y|s'_{i-1} w_i) < delta``) on every sentence the
classifier gets right, and writes atomically

- ``DATA/input0/SPLIT.NAME.bin/.idx/.json``: one 0/1 label per token (``</s>`` = 0),
  the training data of ``--task token_importance``;
- ``DATA/input0/SPLIT.NAME.preview.txt``: each sentence with its important subwords in
  ``[...]`` (misclassified sentences are shown as not scored).

In shards (``--num-shards N --shard-id I``, or the ranks of a torchrun/srun launch) as every
producer: the buffer runs block by block (``--shard-block-lines``), so the labels do not depend on
the shards; ``fairseq-maskplug-merge-shards DATA`` or rank 0 writes the track; the preview is shard
0's lines (docs/scale.md).
"""

import sys
from dataclasses import dataclass

import numpy as np

from fairseq_maskplug.common.option_ranges import option
from fairseq_maskplug.scoring.model_tracks import ReadsCheckpoint
from fairseq_maskplug.tools.producer import TokenProducer, Track


@dataclass
class BufferOptions:
    delta: float = option(0.05, "a token is important when S(w_i) < delta (the authors' scripts: 0.01)",
                          range="(0, 1]", source="paper")
    batch_size: int = option(256, "sentences scored together, advanced one buffer position at a time (1: one at a "
                             "time)", range="[1, inf)", source="ours")
    max_tokens: int = option(2048, "padded tokens per forward (inputs of the batch sorted by length; raise it on "
                             "GPUs)", range="[1, inf)", source="ours")
    classification_head_name: str = option("sentence_classification_head", "the classifier's head")
    preview: str = option(None, "preview file of a single split (default DATA/input0/SPLIT.NAME.preview.txt)",
                          output=True, recorded=False)
    gpt2_bpe: str = option(None, "GPT-2 BPE directory (encoder.json) of GPT-2 BPE data: the preview shows text, not "
                           "labels", recorded=False)


def load_classifier(args, data: str):
    """The classifier fine-tuned on the task (its head checked), every split's sentence_prediction layout checked;
    its inputs add the data's root and its number of classes."""
    from fairseq_maskplug.data.layout import sentence_prediction_dir
    from fairseq_maskplug.scoring.loading import load_classifier as load

    root = sentence_prediction_dir(data)
    model, task, num_classes = load(args.checkpoint, root, args.classification_head_name, args.trust_dictionary,
                                    args.splits)
    return model, task, {"root": root, "num_classes": num_classes}


def buffer_labels(options: BufferOptions, inputs):
    """Each line's 0/1 labels by the buffer (Gu et al. 2020, Eq. 1-2), its pools within a block, so the labels do
    not depend on the shards; a line longer than the model is scored in its first part. What the report needs
    (each line's class and whether it was classified correctly) is kept per split in ``inputs.buffer``."""
    from fairseq_maskplug.common.atomic import check_distinct_files
    from fairseq_maskplug.scoring.buffer import SentenceClassifier, buffer_importance
    from fairseq_maskplug.scoring.loading import load_split

    if options.preview and len(inputs.splits) > 1:
        raise ValueError(f"--preview names one file, for one split; {len(inputs.splits)} splits were given")
    for split in inputs.splits:
        prefix = f"{inputs.data}/{split}.{inputs.names[0]}"
        check_distinct_files([("the track", prefix + ".bin"), ("the track's index", prefix + ".idx"),
                              ("the track's fingerprint", prefix + ".json"),
                              ("--preview", options.preview or prefix + ".preview.txt"),
                              ("the split", f"{inputs.data}/{split}.bin"),
                              ("the split's index", f"{inputs.data}/{split}.idx"),
                              ("--checkpoint", inputs.checkpoint)])
    classes = {split: load_split(inputs.root, split, inputs.task, inputs.num_classes)[1] for split in inputs.splits}
    d = inputs.task.source_dictionary
    classifier = SentenceClassifier(inputs.model, options.classification_head_name, d.bos(), d.eos(), d.pad())
    longest = inputs.model.max_positions() - 2  # besides <s> and </s>
    inputs.buffer, inputs.longest, inputs.classifier = {}, longest, classifier

    def of_block(lines):
        split = inputs.buffer.setdefault(lines.split, {"classes": [], "scored": [], "calls": classifier.calls})
        sentences = [line[:-1][:longest] for line in lines]  # </s> dropped; the rest of a longer line: 0
        block_classes = [classes[lines.split][i] for i in lines.numbers]
        marks, scored = buffer_importance(sentences, block_classes, classifier, options.delta, options.batch_size,
                                          options.max_tokens)
        split["classes"] += block_classes
        split["scored"].append(scored)
        rows = [np.zeros(len(line), dtype=np.uint8) for line in lines]
        for row, line_marks in zip(rows, marks):
            row[:len(line_marks)] = line_marks
        return rows
    return of_block


def report(options: BufferOptions, inputs, done) -> str:
    """The split's line; shard 0 writes the preview of its lines: each with its important subwords in [...]."""
    from fairseq_maskplug.scoring.preview import preview_symbols, render_marked, write_preview
    from fairseq_maskplug.tools.sharding import warn_if_all_or_none

    kept = inputs.buffer.get(done.tracks.split, {"classes": [], "scored": [], "calls": inputs.classifier.calls})
    rows, prefix, wrote = done.rows[0], done.tracks.prefixes[0], done.wrote[0]
    scored = np.concatenate([np.zeros(0, dtype=bool), *kept["scored"]])
    if inputs.shard.shard_id == 0:  # with shards: shard 0's lines
        symbols, preview = preview_symbols(inputs.task.source_dictionary, options.gpt2_bpe), \
            options.preview or prefix + ".preview.txt"

        def preview_line(line, row, ok, label):
            text = render_marked([symbols[t] for t in line[:-1]], row[:-1])
            return f"{label}\t{text}" if ok else f"{label}\t(misclassified, not scored)\t{text}"
        write_preview(preview, (preview_line(*line) for line in zip(done.lines, rows, scored, kept["classes"])))
        wrote += f" and {preview}"
    n_tokens = sum(min(len(line) - 1, inputs.longest) for line, ok in zip(done.lines, scored) if ok)
    n_important = sum(int(row.sum()) for row in rows)
    truncated = sum(len(line) - 1 > inputs.longest for line in done.lines)
    share = f"{scored.mean():.1%}" if scored.size else "-"
    if n_tokens:
        warn_if_all_or_none(prefix, n_important / n_tokens, "important (of the sentences scored)")
    seconds, n = done.seconds, len(done.lines)
    return (f"scored {n} sentences in {seconds:.1f} s ({n / max(seconds, 1e-9):.1f} sentences/s, "
            f"{inputs.classifier.calls - kept['calls']} forwards); {share} classified correctly and scored; "
            f"{n_important} of their {n_tokens} tokens important ({n_important / max(n_tokens, 1):.1%})"
            + (f"; {truncated} sentences longer than {inputs.longest} tokens scored in part" if truncated else "")
            + f"; wrote {wrote}")


PRODUCER = TokenProducer("fairseq-maskplug-score-importance", __doc__, BufferOptions,
                         [Track("importance", "--label-track of --task token_importance")], "uint8", buffer_labels,
                         report=report, splits=("train",),
                         reads=ReadsCheckpoint("sentence_prediction checkpoint fine-tuned on the task",
                                               load=load_classifier))
main = PRODUCER.main


if __name__ == "__main__":
    sys.exit(main())
