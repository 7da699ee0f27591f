"""Score a fairseq ``sentence_prediction`` checkpoint on a split: accuracy and macro-F1.

    python -m fairseq_maskplug.evaluate --checkpoint ck/checkpoint_best.pt \\
        --data data-bin/mr --split test

prints one JSON object ``{"split", "n", "accuracy", "macro_f1"}`` (and writes it
atomically to ``--output`` if given).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch


def f1_from_counts(tp, fp, fn) -> float:
    """F1 = 2PR/(P+R) = 2 tp / (2 tp + fp + fn); 0 for a class never predicted nor present."""
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def macro_f1(predictions: np.ndarray, targets: np.ndarray, num_classes: int) -> float:
    """Unweighted mean over classes of :func:`f1_from_counts`."""
    return float(np.mean([f1_from_counts(np.sum((predictions == c) & (targets == c)),
                                         np.sum((predictions == c) & (targets != c)),
                                         np.sum((predictions != c) & (targets == c)))
                          for c in range(num_classes)]))


@torch.no_grad()
def evaluate(checkpoint: str, data: str, split: str, batch_size: int = 64) -> dict:
    import fairseq_maskplug  # noqa: F401  (safe globals, registrations)
    from fairseq import checkpoint_utils, utils

    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], arg_overrides={"data": data})
    model = models[0].eval()
    head = (getattr(cfg.criterion, "classification_head_name", None)
            or getattr(cfg.task, "classification_head_name", "sentence_classification_head"))
    if torch.cuda.is_available():
        model = model.cuda()
    task.load_dataset(split)
    batches = task.get_batch_iterator(dataset=task.dataset(split), max_sentences=batch_size,
                                      ignore_invalid_inputs=False).next_epoch_itr(shuffle=False)
    predictions, targets = [], []
    for sample in batches:
        if torch.cuda.is_available():
            sample = utils.move_to_cuda(sample)
        logits, _ = model(**sample["net_input"], features_only=True, classification_head_name=head)
        predictions.append(logits.argmax(dim=-1).cpu().numpy())
        targets.append(sample["target"].view(-1).cpu().numpy())
    predictions, targets = np.concatenate(predictions), np.concatenate(targets)
    return {"split": split, "n": int(targets.size),
            "accuracy": float((predictions == targets).mean()),
            "macro_f1": macro_f1(predictions, targets, cfg.task.num_classes)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="sentence_prediction checkpoint")
    parser.add_argument("--data", required=True, help="data directory with input0/ and label/")
    parser.add_argument("--split", default="test", help="split to score")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--output", help="also write the JSON object to this file")
    args = parser.parse_args(argv)
    line = json.dumps(evaluate(args.checkpoint, args.data, args.split, args.batch_size))
    if args.output:
        tmp = f"{args.output}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(line + "\n")
        os.replace(tmp, args.output)
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
