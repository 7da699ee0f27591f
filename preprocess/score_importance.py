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

import argparse
import os
import sys
import time

import numpy as np

from fairseq_maskplug.common.option_ranges import number
from fairseq_maskplug.tools.sharding import add_shard_options, warn_if_all_or_none

from . import (HelpFormatter, add_checkpoint_options, add_splits, configure_tool_output, import_user_dir,
               one_line_on_write_failure, track_name)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="sentence_prediction checkpoint fine-tuned on the task")
    parser.add_argument("--data", required=True, help="sentence_prediction data root (input0/, label/; its "
                        "input0/ is accepted too)")
    add_splits(parser, ["train"], "label")
    parser.add_argument("--name", type=track_name, default="importance", help="side-information track name")
    parser.add_argument("--delta", type=number("(0, 1]", float), default=0.05,
                        help="a token is important when S(w_i) < delta (paper: 0.05; authors' scripts: 0.01)")
    parser.add_argument("--batch-size", type=number("[1, inf)", int), default=256,
                        help="sentences scored together, advanced one buffer position at a time (1: one at a time)")
    parser.add_argument("--max-tokens", type=number("[1, inf)", int), default=2048,
                        help="padded tokens per forward (inputs of the batch sorted by length; raise it on GPUs)")
    parser.add_argument("--classification-head-name", default="sentence_classification_head")
    parser.add_argument("--preview", default=None,
                        help="preview file of a single split (default DATA/input0/SPLIT.NAME.preview.txt)")
    parser.add_argument("--gpt2-bpe", default=None,
                        help="GPT-2 BPE directory (encoder.json) of GPT-2 BPE data: the preview shows text, not labels")
    add_checkpoint_options(parser)
    add_shard_options(parser)
    args = parser.parse_args(argv)
    if args.preview and len(args.splits) > 1:
        parser.error(f"--preview names one file, for one split; {len(args.splits)} splits were given")
    return args


@one_line_on_write_failure
def main(argv=None) -> int:
    args = parse_args(argv)
    configure_tool_output()
    from fairseq_maskplug.scoring.loading import load_classifier, load_split
    from fairseq_maskplug.common.atomic import check_distinct_files
    from fairseq_maskplug.tools.checkpoints import check_writable
    from fairseq_maskplug.data import side_info_prefix
    from fairseq_maskplug.data.layout import sentence_prediction_dir
    from fairseq_maskplug.scoring.precision import inference
    from fairseq_maskplug.scoring.precision import start_model_producer
    from fairseq_maskplug.tools.producer import SplitTracks, write_tracks
    from fairseq_maskplug.tools.sharding import ShardedTrack, checkpoint_identity

    args.data = sentence_prediction_dir(args.data)
    outputs = {}
    try:
        import_user_dir(args.user_dir)
        for split in args.splits:  # every split and output checked before any work
            split_prefix = os.path.join(args.data, "input0", split)
            prefix = side_info_prefix(split_prefix, args.name)
            preview = args.preview or prefix + ".preview.txt"
            check_distinct_files([("the track", prefix + ".bin"), ("the track's index", prefix + ".idx"),
                                  ("the track's fingerprint", prefix + ".json"), ("--preview", preview),
                                  ("the split", split_prefix + ".bin"), ("the split's index", split_prefix + ".idx"),
                                  ("--checkpoint", args.checkpoint)])
            for path in (prefix + ".bin", preview):
                check_writable(path)
            outputs[split] = (split_prefix, prefix, preview)
        shard, precision, device = start_model_producer(args, os.path.join(args.data, "input0"))
        model, task, num_classes = load_classifier(args.checkpoint, args.data, args.classification_head_name,
                                                   args.trust_dictionary, args.splits)
        from fairseq_maskplug.scoring.buffer import SentenceClassifier
        from fairseq_maskplug.scoring.preview import preview_symbols

        d = task.source_dictionary
        symbols = preview_symbols(d, args.gpt2_bpe)
        classifier = SentenceClassifier(model, args.classification_head_name, d.bos(), d.eos(), d.pad())
        track = ShardedTrack(shard, {**checkpoint_identity(args.checkpoint), "delta": args.delta,
                                     "batch_size": args.batch_size, "max_tokens": args.max_tokens,
                                     "head": args.classification_head_name, "precision": precision},
                             args.shard_block_lines)
        loaded = {split: load_split(args.data, split, task, num_classes) for split in outputs}

        def labelled(out, lines):
            with inference(precision, device):
                return label_split(args, classifier, model.max_positions() - 2, *loaded[out.split], symbols, lines,
                                   track, out.prefixes[0], outputs[out.split][2])

        splits = [SplitTracks(split, split_prefix, len(loaded[split][0]), [prefix])
                  for split, (split_prefix, prefix, _) in outputs.items()]
        for line in write_tracks(track, splits, labelled, "uint8", os.path.join(args.data, "input0"), d)["merges"]:
            print(line)
    except (FileNotFoundError, ValueError, PermissionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def label_split(args, classifier, longest, tokens, classes, symbols, lines: range, track, prefix, preview):
    """This shard's ``lines`` of one split scored with the buffer (Gu et al. 2020, Eq. 1-2), block by block:
    ``(rows, done)`` for :func:`~fairseq_maskplug.tools.producer.write_tracks`, ``done`` writing the preview and
    printing the report once the track (or part) is written; ``longest`` tokens of a line fit the model besides
    <s> and </s>."""
    from fairseq_maskplug.data.track_shards import blocks_of
    from fairseq_maskplug.scoring.buffer import buffer_importance
    from fairseq_maskplug.scoring.preview import render_marked, write_preview

    texts, sentences, importance, scored = [], [], [], [np.zeros(0, dtype=bool)]
    calls = classifier.calls
    start = time.perf_counter()
    for block in blocks_of(lines, track.block_lines):  # pools within a block: labels that do not depend on the shards
        texts += [tokens[i].numpy() for i in block]
        sentences += [line[:-1][:longest] for line in texts[-len(block):]]  # drop </s>; the rest of longer lines: 0
        marks, ok = buffer_importance(sentences[-len(block):], [classes[i] for i in block], classifier, args.delta,
                                      args.batch_size, args.max_tokens)
        importance += marks
        scored.append(ok)
    scored = np.concatenate(scored)
    seconds = time.perf_counter() - start
    rows = []
    for line, marks in zip(texts, importance):
        row = np.zeros(len(line), dtype=np.uint8)
        row[:len(marks)] = marks
        rows.append(row)

    def preview_line(line, row, ok, label):
        text = render_marked([symbols[t] for t in line[:-1]], row[:-1])
        return f"{label}\t{text}" if ok else f"{label}\t(misclassified, not scored)\t{text}"

    def done(wrote):
        wrote = wrote[0]
        if track.shard.shard_id == 0:  # with shards: shard 0's lines
            labels = (classes[i] for i in lines)
            write_preview(preview, (preview_line(*row) for row in zip(texts, rows, scored, labels)))
            wrote += f" and {preview}"
        n_tokens = sum(len(s) for s, ok in zip(sentences, scored) if ok)
        n_important = sum(int(m.sum()) for m in importance)
        truncated = sum(len(line) - 1 > longest for line in texts)
        share = f"{scored.mean():.1%}" if scored.size else "-"
        print(f"scored {len(texts)} sentences in {seconds:.1f} s ({len(texts) / max(seconds, 1e-9):.1f} sentences/s, "
              f"{classifier.calls - calls} forwards); {share} classified correctly and scored; "
              f"{n_important} of their {n_tokens} tokens important ({n_important / max(n_tokens, 1):.1%})"
              + (f"; {truncated} sentences longer than {longest} tokens scored in part" if truncated else ""))
        print(f"wrote {wrote}")
        if n_tokens:
            warn_if_all_or_none(prefix, n_important / n_tokens, "important (of the sentences scored)")

    return [rows], done


if __name__ == "__main__":
    sys.exit(main())
