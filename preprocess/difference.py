"""Write Difference-Masking's token scores (Wilf et al., Findings of EMNLP 2023) as a track of binarized splits.

Anchors are the ``--anchors`` vocabulary entries of highest TF-ICF: frequent in ``--count-split`` of the target
domain (``--data``), rare across the lines of ``--general`` (the corpus the model was pretrained on, binarized
with the same dict.txt). Each entry's score is its largest cosine similarity to an anchor, from the input
embeddings of ``--checkpoint`` (the model to be continued), clipped at 0
(``fairseq_maskplug.scoring.difference`` says how). Every token of every split in ``--splits`` gets its entry's
score, written as ``DATA/SPLIT.difference_score.bin/.idx/.json`` (0 at special tokens), fingerprinted and
written atomically; ``--write-anchors`` lists the anchors with their TF-ICF. Then ``--mask-policy difference``.

Example (the demo: the reviews against the general news corpus, the general model's embeddings)::

    fairseq-maskplug-difference --data work/data/indomain --general work/data/general \\
        --checkpoint work/general/checkpoint_last.pt

Prints a JSON summary: the anchors (their symbols), the mean score over the count split's tokens. One process.
"""

import argparse
import json
import os
import sys

from fairseq_maskplug.common.option_ranges import number

from . import HelpFormatter, configure_tool_output, one_line_on_write_failure, split_name, split_names, track_name


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--data", required=True, help="the target domain's fairseq-preprocess output (holds dict.txt)")
    parser.add_argument("--splits", type=split_names, default="train,valid", help="comma-separated splits to write "
                        "the track for")
    parser.add_argument("--count-split", type=split_name, default="train",
                        help="the target-domain split whose token counts give the TF")
    parser.add_argument("--general", required=True, help="the general corpus's fairseq-preprocess output, "
                        "binarized with the same dict.txt")
    parser.add_argument("--general-split", type=split_name, default="train",
                        help="the general split whose lines give the ICF")
    parser.add_argument("--checkpoint", required=True, help="the checkpoint whose input embeddings give the "
                        "similarities (the model to be continued)")
    parser.add_argument("--anchors", type=number("[1, inf)", int), default=5,
                        help="how many anchors (5: the authors' code, scripts/autoaux.py)")
    parser.add_argument("--name", type=track_name, default="difference_score",
                        help="track name (the difference policy's --difference-track)")
    parser.add_argument("--write-anchors", default=None, help="also write the anchors here (symbol<TAB>TF-ICF)")
    return parser.parse_args(argv)


@one_line_on_write_failure
def main(argv=None) -> int:
    configure_tool_output()
    args = parse_args(argv)
    from .vocabulary_tracks import run_with_locks

    return run_with_locks(write_scores, args, (OSError, ValueError, KeyError))  # every input and output checked before any work


def input_embeddings(checkpoint: str, data: str, rows: int):
    """The first ``rows`` rows of the checkpoint's encoder input embeddings (its dictionary checked against
    ``data``'s)."""
    from fairseq_maskplug.tools.checkpoints import load_checked_state

    state = load_checked_state(checkpoint, data, wanted="a masked-LM or BART checkpoint")
    keys = sorted(k for k in state["model"] if k.endswith("embed_tokens.weight"))
    keys = [k for k in keys if "encoder" in k] or keys
    if not keys:
        raise ValueError(f"{checkpoint}: no token embeddings (a parameter named ...embed_tokens.weight)")
    weights = state["model"][keys[0]].float().numpy()
    if weights.shape[0] < rows:
        raise ValueError(f"{checkpoint}: {weights.shape[0]} embeddings for a dictionary of {rows}")
    return weights[:rows]


def write_scores(args, locks) -> int:
    import numpy as np

    from fairseq_maskplug.common.atomic import check_writable, write_text
    from fairseq_maskplug.data.dictionaries import dictionary_sha256
    from fairseq_maskplug.data.side_info import token_fingerprint
    from fairseq_maskplug.scoring.difference import anchor_similarity, anchors, tf_icf
    from fairseq_maskplug.tools.sharding import warn

    from .vocabulary_tracks import data_dictionary, load_checked_splits, load_split, write_lookup_tracks

    dictionary = data_dictionary("--data", args.data)
    if dictionary_sha256(dictionary) != dictionary_sha256(data_dictionary("--general", args.general)):
        raise ValueError(f"--general {args.general}: its dict.txt differs from --data {args.data}'s (token ids "
                         "must mean the same in both)")
    loaded = load_checked_splits(args.data, args.splits, [args.count_split], dictionary, args.name, locks)
    _, general_tokens = load_split(args.general, args.general_split, dictionary)
    if args.write_anchors:
        check_writable(args.write_anchors)
    embeddings = input_embeddings(args.checkpoint, args.data, len(dictionary))

    size, nspecial = len(dictionary), dictionary.nspecial
    _, count_tokens = loaded[args.count_split]
    domain_counts = np.zeros(size)
    for i in range(len(count_tokens)):
        np.add.at(domain_counts, count_tokens[i].numpy(), 1.0)
    general_lines = np.zeros(size)
    for i in range(len(general_tokens)):
        general_lines[np.unique(general_tokens[i].numpy())] += 1.0
    domain_counts[:nspecial] = 0.0
    scores = tf_icf(domain_counts, general_lines, len(general_tokens))
    chosen = anchors(scores, args.anchors, domain_counts > 0)  # none with a positive TF-ICF: refused, nothing written
    warnings = []
    if len(chosen) < args.anchors:
        warnings.append(warn(f"--anchors {args.anchors}: only {len(chosen)} entries of {args.data} have a positive "
                             "TF-ICF against the general corpus; those are the anchors"))
    if token_fingerprint(os.path.join(args.general, args.general_split)) == \
            token_fingerprint(os.path.join(args.data, args.count_split)):
        warnings.append(warn(f"--general {args.general} split {args.general_split} holds the same tokens as the "
                             f"target's {args.count_split}: the anchors are the target's own rarest words, not "
                             "what sets it apart from a general corpus"))
    similarity = anchor_similarity(embeddings, chosen)
    similarity[:nspecial] = 0.0
    summary = {"anchors": [dictionary[i] for i in chosen], "general_lines": len(general_tokens)}
    occurring = np.concatenate([count_tokens[i].numpy() for i in range(len(count_tokens))])
    summary["mean_score_over_tokens"] = round(float(similarity[occurring].mean()), 4)
    summary.update(write_lookup_tracks(loaded, args.splits, args.name, similarity))
    if warnings:
        summary["warnings"] = warnings + summary.get("warnings", [])
    if args.write_anchors:
        write_text(args.write_anchors, "".join(f"{dictionary[i]}\t{scores[i]:.6g}\n" for i in chosen))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
