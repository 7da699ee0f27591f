"""Score a fairseq ``sentence_prediction`` checkpoint on splits: accuracy and macro-F1.

    fairseq-maskplug-evaluate --checkpoint ck/checkpoint_best.pt --data data-bin/mr --split test

prints one JSON object per split (and writes it atomically to ``--output`` if given):

- ``split``, ``n`` (its sentences), ``accuracy`` and ``macro_f1`` in percent (``"units": "percent"``), as fairseq
  logs ``accuracy``;
- ``classes_predicted``: how many classes the predictions use; 1 is a constant predictor (its accuracy is that
  class's share of the split, ``majority_share`` at best), also said in a ``note:`` line on stderr;
- ``majority_share``: the share of the split's most frequent class (a constant predictor's best accuracy);
- ``correct``: one character per sentence in the split's order, ``1`` where the prediction is right, ``0``
  where it is wrong: what the paired comparisons of two models over the same sentences read;
- ``fairseq_maskplug_version``: the version that wrote it.

Several splits (``--split valid,test``) are scored by one process, the model loaded once; ``--output`` then
names each split's file with ``{split}``.
"""

import argparse
import json
import sys

from ..tools.cli import quiet_fairseq_import

quiet_fairseq_import()  # before fairseq is imported (below): no tensorboardX hint ahead of the JSON

import numpy as np  # noqa: E402
import torch  # noqa: E402

from ..common.atomic import check_distinct_files, write_text  # noqa: E402
from ..tools.checkpoints import check_writable  # noqa: E402
from ..tools.cli import (HelpFormatter, add_user_dir, add_version, configure_tool_output,  # noqa: E402
                         import_user_dir, split_names)
from ..common.metrics import macro_f1  # noqa: E402
from ..common.option_ranges import number  # noqa: E402
from .._version import RECORD_KEY, __version__  # noqa: E402


def load_classifier(checkpoint: str, data: str, trust_dictionary: bool = False):
    """``(model on the GPU if there is one, its task, its classification head's name, the task's number of
    classes)`` of a classifier checkpoint: ``sentence_prediction``, ``joint_mlm_classification`` or ``tlm``."""
    from fairseq import checkpoint_utils

    from ..tools.checkpoints import CLASSIFIER_TASKS, load_checked_state

    state = load_checked_state(checkpoint, data, trust_dictionary, tasks=CLASSIFIER_TASKS,
                               wanted="a classifier (sentence_prediction, joint_mlm_classification or tlm)")
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], state=state)
    model = models[0].eval()
    head = (getattr(cfg.criterion, "classification_head_name", None)
            or getattr(cfg.task, "classification_head_name", "sentence_classification_head"))
    if head not in getattr(model, "classification_heads", {}):
        raise ValueError(f"{checkpoint} has no classification head {head!r}: not a classifier checkpoint")
    model.to(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    return model, task, head, cfg.task.num_classes


def read_split(classifier, data: str, split: str):
    """``(token tensors, classes)`` of ``DATA/{input0,label}/SPLIT`` in a :func:`load_classifier` classifier's
    dictionaries, every line checked. Only the texts and labels are read (not the training task's datasets,
    so a joint model's MLM side information is not needed)."""
    from ..data.classification import load_classification_split

    _, task, _, num_classes = classifier
    return load_classification_split(data, split, task.source_dictionary, task.label_dictionary, num_classes)


@torch.no_grad()
def score_split(classifier, texts, split: str, batch_size: int = 64) -> dict:
    """Accuracy and macro-F1 of a :func:`load_classifier` classifier on a split's ``texts`` (:func:`read_split`).
    Each input is ``<s>`` + line, cut to the model's positions as ``--shorten-method truncate`` does."""
    from fairseq.data import data_utils

    model, task, head, num_classes = classifier
    device = next(model.parameters()).device
    d = task.source_dictionary
    tokens, classes = texts
    longest = model.max_positions()
    predictions = []
    for start in range(0, len(tokens), batch_size):
        rows = [torch.cat([torch.tensor([d.bos()]), tokens[i]])[:longest]
                for i in range(start, min(start + batch_size, len(tokens)))]
        batch = data_utils.collate_tokens(rows, d.pad()).to(device)
        logits, _ = model(batch, features_only=True, classification_head_name=head)
        predictions.append(logits.argmax(dim=-1).cpu().numpy())
    predictions = np.concatenate(predictions)
    return {"split": split, "n": int(classes.size),
            "accuracy": 100.0 * float((predictions == classes).mean()),
            "macro_f1": 100.0 * macro_f1(predictions, classes, num_classes), "units": "percent",
            # what a table needs to recognise a constant predictor and chance level
            "classes_predicted": int(np.unique(predictions).size),
            "majority_share": 100.0 * float(np.bincount(classes).max() / classes.size),
            # one character per sentence, in the split's order: 1 where the prediction is right (the paired
            # test over test sentences of benchmarks/science_stats.py pairs two models' characters)
            "correct": "".join("1" if right else "0" for right in (predictions == classes)),
            RECORD_KEY: __version__}


def evaluate(checkpoint: str, data: str, split: str, batch_size: int = 64, trust_dictionary: bool = False) -> dict:
    """:func:`score_split` of the checkpoint's classifier on one split."""
    classifier = load_classifier(checkpoint, data, trust_dictionary)
    return score_split(classifier, read_split(classifier, data, split), split, batch_size)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fairseq-maskplug-evaluate", description=__doc__,
                                     formatter_class=HelpFormatter)
    add_version(parser)
    parser.add_argument("--checkpoint", required=True,
                        help="classifier checkpoint (sentence_prediction, joint_mlm_classification or tlm)")
    parser.add_argument("--data", required=True,
                        help="sentence_prediction data root (input0/, label/; its input0/ is accepted too)")
    parser.add_argument("--split", type=split_names, default="test",
                        help="split to score, or comma-separated splits (one process, the model loaded once)")
    parser.add_argument("--batch-size", type=number("[1, inf)", int), default=64, help="sentences per forward")
    parser.add_argument("--output", help="also write the JSON object to this file ({split} in it: each split's "
                                         "name; needed with several splits)")
    parser.add_argument("--trust-dictionary", action="store_true",
                        help="skip the dictionary check where the checkpoint records no dictionary and its "
                             "training data is not found")
    add_user_dir(parser)
    args = parser.parse_args(argv)
    configure_tool_output()
    from ..data.layout import sentence_prediction_dir

    args.data = sentence_prediction_dir(args.data)
    if args.output and len(args.split) > 1 and "{split}" not in args.output:
        parser.error(f"--output {args.output}: with several splits, name each split's file with {{split}}")
    outputs = {split: args.output.replace("{split}", split) if args.output else None for split in args.split}
    try:
        import_user_dir(args.user_dir)
        for output in filter(None, outputs.values()):
            check_distinct_files([("--checkpoint", args.checkpoint), ("--output", output)])
            check_writable(output)
        classifier = load_classifier(args.checkpoint, args.data, args.trust_dictionary)
        texts = {split: read_split(classifier, args.data, split) for split in outputs}  # all checked first
        for split, output in outputs.items():
            scores = score_split(classifier, texts[split], split, args.batch_size)
            if scores["classes_predicted"] == 1:
                print(f"note: {split}: the classifier predicted one class for every sentence (a constant predictor): "
                      f"its accuracy is that class's share, {scores['majority_share']:.1f}% at most", file=sys.stderr)
            line = json.dumps(scores)
            if output:
                write_text(output, line + "\n")
            print(line, flush=True)
    except (FileNotFoundError, ValueError, PermissionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
