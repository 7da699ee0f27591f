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
"""

import argparse
import os
import sys
import time

import numpy as np

from fairseq_maskplug.option_ranges import number

from . import HelpFormatter, add_user_dir, configure_tool_output, import_user_dir, track_name


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="sentence_prediction checkpoint fine-tuned on the task")
    parser.add_argument("--data", required=True, help="sentence_prediction data root (input0/, label/; its "
                        "input0/ is accepted too)")
    parser.add_argument("--split", default="train", help="split to label")
    parser.add_argument("--name", type=track_name, default="importance", help="side-information track name")
    parser.add_argument("--delta", type=number("(0, 1]", float), default=0.05,
                        help="a token is important when S(w_i) < delta (paper: 0.05; authors' scripts: 0.01)")
    parser.add_argument("--batch-size", type=number("[1, inf)", int), default=256,
                        help="sentences scored together, advanced one buffer position at a time (1: one at a time)")
    parser.add_argument("--max-tokens", type=number("[1, inf)", int), default=2048,
                        help="padded tokens per forward (inputs of the batch sorted by length; raise it on GPUs)")
    parser.add_argument("--classification-head-name", default="sentence_classification_head")
    parser.add_argument("--preview", default=None, help="preview file (default DATA/input0/SPLIT.NAME.preview.txt)")
    parser.add_argument("--gpt2-bpe", default=None,
                        help="GPT-2 BPE directory (encoder.json) of GPT-2 BPE data: the preview shows text, not labels")
    parser.add_argument("--trust-dictionary", action="store_true",
                        help="skip the dictionary check where the checkpoint records no dictionary and its "
                             "training data is not found")
    add_user_dir(parser)
    return parser.parse_args(argv)


def load_task_split(checkpoint, data, split, head, trust_dictionary=False):
    """Classifier model, dictionary, token lines and class indices of ``split``; bad input raises
    ``FileNotFoundError``/``ValueError`` with a message naming the file."""
    import torch
    from fairseq import checkpoint_utils
    from fairseq_maskplug.checkpoints import load_checked_state
    from fairseq_maskplug.data.classification import load_classification_split

    for sub in ("input0", "label"):
        if not os.path.exists(os.path.join(data, sub, f"{split}.idx")):
            raise FileNotFoundError(f"{os.path.join(data, sub, split)}.bin/.idx not found: --data needs the "
                                    "sentence_prediction layout (input0/, label/)")
    state = load_checked_state(checkpoint, data, trust_dictionary)
    if not any(k.startswith(f"classification_heads.{head}.") for k in state["model"]):
        raise ValueError(f"{checkpoint} is a {state['cfg']['task']['_name']} checkpoint without a classification "
                         f"head {head!r}; the classifier fine-tuned on the task (sentence_prediction) is needed")
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], state=state)
    model = models[0].cuda() if torch.cuda.is_available() else models[0]
    d = task.source_dictionary
    tokens, classes = load_classification_split(data, split, d, task.label_dictionary,
                                                state["cfg"]["task"]["num_classes"])
    return model, d, tokens, classes


def main(argv=None) -> int:
    args = parse_args(argv)
    configure_tool_output()
    from fairseq_maskplug.atomic import check_distinct_files, temporary_name
    from fairseq_maskplug.data.layout import sentence_prediction_dir
    from fairseq_maskplug.checkpoints import check_writable
    from fairseq_maskplug.data import side_info_prefix, write_side_info

    args.data = sentence_prediction_dir(args.data)
    split_prefix = os.path.join(args.data, "input0", args.split)
    prefix = side_info_prefix(split_prefix, args.name)
    preview = args.preview or prefix + ".preview.txt"
    try:
        import_user_dir(args.user_dir)
        check_distinct_files([("the track", prefix + ".bin"), ("the track's index", prefix + ".idx"),
                              ("the track's fingerprint", prefix + ".json"), ("--preview", preview),
                              ("the split", split_prefix + ".bin"), ("the split's index", split_prefix + ".idx"),
                              ("--checkpoint", args.checkpoint)])
        for path in (prefix + ".bin", preview):  # outputs checked before any work
            check_writable(path)
        model, d, tokens, classes = load_task_split(args.checkpoint, args.data, args.split,
                                                   args.classification_head_name, args.trust_dictionary)
        from fairseq_maskplug.scoring.preview import preview_symbols
        symbols = preview_symbols(d, args.gpt2_bpe)
    except (FileNotFoundError, ValueError, PermissionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    from fairseq_maskplug.scoring.buffer import SentenceClassifier, buffer_importance
    from fairseq_maskplug.scoring.preview import render_marked

    try:
        classifier = SentenceClassifier(model, args.classification_head_name, d.bos(), d.eos(), d.pad())
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    longest = model.max_positions() - 2  # room for <s> and </s>
    lines = [tokens[i].numpy() for i in range(len(tokens))]
    sentences = [line[:-1][:longest] for line in lines]  # drop </s>; longer lines: the rest stays 0
    start = time.perf_counter()
    importance, scored = buffer_importance(sentences, classes, classifier, args.delta, args.batch_size,
                                          args.max_tokens)
    seconds = time.perf_counter() - start
    rows = []
    for line, marks in zip(lines, importance):
        row = np.zeros(len(line), dtype=np.uint8)
        row[:len(marks)] = marks
        rows.append(row)
    write_side_info(prefix, rows, "uint8", tokens_prefix=split_prefix)
    tmp = temporary_name(preview)
    with open(tmp, "w", encoding="utf-8") as f:
        for line, row, ok, label in zip(lines, rows, scored, classes):
            text = render_marked([symbols[t] for t in line[:-1]], row[:-1])
            f.write(f"{label}\t{text}\n" if ok else f"{label}\t(misclassified, not scored)\t{text}\n")
    os.replace(tmp, preview)
    n_tokens = sum(len(s) for s, ok in zip(sentences, scored) if ok)
    n_important = sum(int(m.sum()) for m in importance)
    truncated = sum(len(line) - 1 > longest for line in lines)
    print(f"scored {len(lines)} sentences in {seconds:.1f} s ({len(lines) / seconds:.1f} sentences/s, "
          f"{classifier.calls} forwards); {scored.mean():.1%} classified correctly and scored; "
          f"{n_important} of their {n_tokens} tokens important ({n_important / max(n_tokens, 1):.1%})"
          + (f"; {truncated} sentences longer than {longest} tokens scored in part" if truncated else ""))
    print(f"wrote {prefix}.bin/.idx and {preview}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
