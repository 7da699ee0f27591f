"""What a masked LM's features are worth before any fine-tuning (issue 100's diagnosis of a general model that
fine-tunes worse than a random one): anisotropy and a frozen linear probe.

    fairseq-maskplug-probe-features --checkpoint general/checkpoint_last.pt --data TASK [--random-init]

prints one JSON object:

- ``embedding_cosine``: the mean cosine between two different rows of the input embeddings (the dictionary's
  text symbols): near 0 for a random init; a large value means every token points one way (Ethayarajh 2019 calls
  this anisotropy; Gao et al. 2019, "Representation Degeneration", find tied embeddings of a language model drift
  there);
- per split, ``feature_cosine_cls`` / ``feature_cosine_mean``: the same mean cosine between the sentences' features
  (the ``<s>`` position the classification head reads, and the mean over the sentence's tokens);
- per split but train, ``probe_accuracy_cls`` / ``probe_accuracy_mean``: the accuracy (percent) of a logistic
  regression fitted on the train split's frozen features (:func:`linear_probe`): what the features say about the
  labels with no encoder update at all.

``--random-init`` scores a model of the checkpoint's architecture with fresh weights (``--seed``) instead: the start
a classifier from scratch has. Works on any checkpoint whose model returns features (RoBERTa-style encoders).
"""

import argparse
import json
import sys

import numpy as np
import torch

from ..common.atomic import write_text
from ..common.option_ranges import number
from ..tools.cli import HelpFormatter, add_user_dir, add_version, command_main, import_user_dir, split_names


def mean_pairwise_cosine(vectors) -> float:
    """The mean cosine similarity over all pairs of two different rows of ``vectors`` (n x d, n >= 2), in closed form:
    with unit rows u_i, sum over i != j of u_i . u_j = |sum u_i|^2 - n. A zero row is refused (it has no direction)."""
    x = torch.as_tensor(vectors, dtype=torch.float64)
    if x.dim() != 2 or x.shape[0] < 2:
        raise ValueError(f"need at least two vectors (n x d), got shape {tuple(x.shape)}")
    norms = x.norm(dim=1, keepdim=True)
    if bool((norms == 0).any()) or not bool(torch.isfinite(x).all()):
        raise ValueError("every vector must be finite and non-zero")
    u = x / norms
    n = x.shape[0]
    return float((u.sum(dim=0).pow(2).sum() - n) / (n * (n - 1)))


def linear_probe(train_x, train_y, test_x, l2: float = 1e-3, steps: int = 200) -> np.ndarray:
    """Predicted classes of ``test_x`` by a multinomial logistic regression fitted on ``(train_x, train_y)`` with L2
    weight ``l2`` (on the weights, not the bias), features standardised by the train split's mean and standard
    deviation, minimised with L-BFGS (``steps`` iterations at most): a convex fit, so the answer does not depend on a
    seed."""
    train_x = torch.as_tensor(train_x, dtype=torch.float64)
    test_x = torch.as_tensor(test_x, dtype=torch.float64)
    y = torch.as_tensor(np.asarray(train_y), dtype=torch.long)
    if train_x.dim() != 2 or test_x.dim() != 2 or train_x.shape[1] != test_x.shape[1] or y.numel() != train_x.shape[0]:
        raise ValueError("train_x (n x d), train_y (n) and test_x (m x d) must agree")
    if not (l2 >= 0 and np.isfinite(l2)):
        raise ValueError(f"l2 must be finite and >= 0, got {l2}")
    mean, std = train_x.mean(dim=0), train_x.std(dim=0).clamp_min(1e-12)
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std
    classes = int(y.max()) + 1
    weight = torch.zeros(train_x.shape[1], classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(classes, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], max_iter=steps, line_search_fn="strong_wolfe")

    def loss():
        optimizer.zero_grad()
        value = torch.nn.functional.cross_entropy(train_x @ weight + bias, y) + l2 * weight.pow(2).sum()
        value.backward()
        return value

    optimizer.step(loss)
    with torch.no_grad():
        return (test_x @ weight + bias).argmax(dim=1).numpy()


@torch.no_grad()
def sentence_features(model, tokens, bos: int, pad: int, batch_size: int = 64):
    """``(features at <s>, mean features over the tokens)`` of every line of ``tokens`` (each read as ``<s>`` + line,
    cut to the model's positions, as fine-tuning reads it): two n x d float64 tensors."""
    from fairseq.data import data_utils

    longest = model.max_positions()
    cls, mean = [], []
    for start in range(0, len(tokens), batch_size):
        rows = [torch.cat([torch.tensor([bos]), tokens[i]])[:longest]
                for i in range(start, min(start + batch_size, len(tokens)))]
        batch = data_utils.collate_tokens(rows, pad)
        features, _ = model(batch, features_only=True)
        keep = (batch != pad).unsqueeze(-1).to(features.dtype)
        cls.append(features[:, 0].double())
        mean.append(((features * keep).sum(dim=1) / keep.sum(dim=1)).double())
    return torch.cat(cls), torch.cat(mean)


def load_encoder(checkpoint: str, data: str, random_init: bool, seed: int):
    """``(model in eval mode on the CPU, its task)`` of a masked-LM checkpoint whose dictionary ``data`` (a labelled
    task's root) uses; with ``random_init`` a model of its architecture with fresh weights drawn after
    ``torch.manual_seed(seed)``."""
    from ..tools.checkpoints import CLASSIFIER_TASKS, load_checked_model

    model, task, state = load_checked_model(checkpoint, f"{data}/input0", refuse=CLASSIFIER_TASKS,
                                            wanted="a masked-LM checkpoint (an encoder before fine-tuning)")
    if random_init:
        torch.manual_seed(seed)
        model = task.build_model(state["cfg"].model)
    return model.cpu().eval(), task


def probe(checkpoint: str, data: str, splits, random_init: bool = False, seed: int = 1, l2: float = 1e-3) -> dict:
    """The module docstring's JSON object for ``checkpoint`` on the labelled task ``data`` (its ``train`` split fits
    the probe; every split of ``splits`` is scored)."""
    from fairseq.data import Dictionary

    from ..data.classification import label_names, load_classification_split

    model, task = load_encoder(checkpoint, data, random_init, seed)
    dictionary = task.source_dictionary
    labels = Dictionary.load(f"{data}/label/dict.txt")
    classes = len(label_names(labels))
    embeddings = model.encoder.sentence_encoder.embed_tokens.weight.detach()
    text = [i for i in range(dictionary.nspecial, len(dictionary)) if not dictionary[i].startswith("madeupword")
            and not (dictionary[i].startswith("<") and dictionary[i].endswith(">"))]
    result = {"checkpoint": checkpoint, "random_init": random_init, "seed": seed if random_init else None,
              "embedding_cosine": round(mean_pairwise_cosine(embeddings[text]), 4)}
    read = {}
    for split in ["train", *[s for s in splits if s != "train"]]:
        tokens, y = load_classification_split(data, split, dictionary, labels, classes)
        read[split] = (*sentence_features(model, tokens, dictionary.bos(), dictionary.pad()), y)
    for split in splits:
        cls, mean, y = read[split]
        entry = {"n": int(y.size), "feature_cosine_cls": round(mean_pairwise_cosine(cls), 4),
                 "feature_cosine_mean": round(mean_pairwise_cosine(mean), 4)}
        if split != "train":
            for name, index in (("cls", 0), ("mean", 1)):
                predicted = linear_probe(read["train"][index], read["train"][2], read[split][index], l2)
                entry[f"probe_accuracy_{name}"] = round(100.0 * float((predicted == y).mean()), 2)
        result[split] = entry
    return result


def diagnosis_parts(data: dict) -> dict:
    """The page parts of a stored general-model diagnosis (``"kind": "general_model_diagnosis"``: rows of a
    model's masked-LM loss beside the unigram's and its :func:`probe` figures on test): ``{"table": [heading,
    lines...]}``, as ``benchmarks/pages.py`` renders a stored result."""
    def cell(value, form="{:.3f}"):
        return "-" if value is None else form.format(value)

    lines = ["| start | masked-LM loss on MR valid (bits) | the news unigram's (bits) | embedding cosine | "
             "sentence-feature cosine (mean-pooled) | frozen probe, `<s>` / mean-pooled (%) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in data["rows"]:
        lines.append(f"| {row['model']} | {cell(row['mlm_loss_bits'])} | {cell(row['unigram_bits'])} | "
                     f"{row['embedding_cosine'] + 0.0:.2f} | {row['feature_cosine_mean_test']:.2f} | "
                     f"{row['probe_accuracy_cls_test']:.1f} / {row['probe_accuracy_mean_test']:.1f} |")
    return {"table": ["## each start's masked-LM loss, anisotropy and frozen probe on the test items", *lines]}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="fairseq-maskplug-probe-features", description=__doc__,
                                     formatter_class=HelpFormatter)
    add_version(parser)
    parser.add_argument("--checkpoint", required=True, help="a masked-LM checkpoint (an encoder before fine-tuning)")
    parser.add_argument("--data", required=True, help="the labelled task (input0/, label/): train fits the probe")
    parser.add_argument("--split", type=split_names, default=["train", "test"],
                        help="comma-separated splits to score (train: its cosines only)")
    parser.add_argument("--random-init", action="store_true",
                        help="score fresh weights of the checkpoint's architecture (a classifier from scratch's start)")
    parser.add_argument("--seed", type=number("[0, inf)", int), default=1, help="seed of --random-init's weights")
    parser.add_argument("--l2", type=number("[0, inf)"), default=1e-3,
                        help="the probe's L2 weight on standardised features (ours)")
    parser.add_argument("--output", help="also write the JSON object to this file")
    add_user_dir(parser)
    return parser.parse_args(argv)


def run(args) -> int:
    import_user_dir(args.user_dir)
    line = json.dumps(probe(args.checkpoint, args.data, args.split, args.random_init, args.seed, args.l2))
    if args.output:
        write_text(args.output, line + "\n")
    print(line, flush=True)
    return 0


main = command_main(parse_args, run)


if __name__ == "__main__":
    sys.exit(main())
