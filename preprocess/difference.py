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

Prints a JSON summary: the anchors (their symbols), the mean score over the count split's tokens.

In shards (``--num-shards N --shard-id I``, or the ranks of a torchrun/srun launch) each shard counts its
blocks of ``--shard-block-lines`` lines of the count split (TF) and of the general split (line frequencies)
into a part in ``DATA/COUNT_SPLIT.NAME.counts.shards/`` (:mod:`fairseq_maskplug.tools.pass_parts`); every
shard sums all parts (whole numbers: the one-process counts), picks the same anchors and writes its lines of
each track as a part, merged by rank 0 of a launch or by ``fairseq-maskplug-merge-shards DATA`` (which also
removes the counts). Independent jobs run every shard twice. The tracks are the one process's, byte for byte
(tested).
"""

import sys
from dataclasses import dataclass

from fairseq_maskplug.common.option_ranges import option
from fairseq_maskplug.tools.cli import split_name
from fairseq_maskplug.tools.producer import (CountingOptions, TokenProducer, Track, counted_split, counts_removed,
                                             vocabulary_lookup, write_besides)

COMMAND = "fairseq-maskplug-difference"


@dataclass
class DifferenceOptions(CountingOptions):
    general: str = option(None, "the general corpus's fairseq-preprocess output, binarized with the same dict.txt",
                          required=True)
    general_split: str = option("train", "the general split whose lines give the ICF", parse=split_name)
    checkpoint: str = option(None, "the checkpoint whose input embeddings give the similarities (the model to be "
                             "continued)", required=True)
    anchors: int = option(5, "how many anchors", range="[1, inf)", source="authors' code (scripts/autoaux.py)")
    write_anchors: str = option(None, "also write the anchors here (symbol<TAB>TF-ICF)", output=True, recorded=False)


def input_embeddings(checkpoint: str, data: str, rows: int):
    """The first ``rows`` rows of the checkpoint's encoder input embeddings (its dictionary checked against
    ``data``'s)."""
    from fairseq_maskplug.tools.checkpoints import load_checked_state

    state = load_checked_state(checkpoint, data, wanted="a masked-LM or BART checkpoint")
    keys = sorted(k for k in state.get("model", {}) if k.endswith("embed_tokens.weight"))
    keys = [k for k in keys if "encoder" in k] or keys
    if not keys:
        raise ValueError(f"{checkpoint}: no token embeddings (a parameter named ...embed_tokens.weight)")
    weights = state["model"][keys[0]].float().numpy()
    if weights.shape[0] < rows:
        raise ValueError(f"{checkpoint}: {weights.shape[0]} embeddings for a dictionary of {rows}")
    return weights[:rows]


def token_counts(tokens, lines: range, size: int):
    """Each vocabulary entry's occurrences in ``lines`` of ``tokens`` (float64 whole numbers)."""
    import numpy as np

    counts = np.zeros(size)
    for i in lines:
        np.add.at(counts, tokens[i].numpy(), 1.0)
    return counts


def line_counts(tokens, lines: range, size: int):
    """How many of ``lines`` of ``tokens`` hold each vocabulary entry (float64 whole numbers)."""
    import numpy as np

    counts = np.zeros(size)
    for i in lines:
        counts[np.unique(tokens[i].numpy())] += 1.0
    return counts


def shared_counts(inputs, counted, general_fingerprint: str, general_tokens):
    """``{"domain": the target's TF, "general": the general split's line frequencies}``, over the count split
    (``counted``: its :class:`~fairseq_maskplug.tools.producer.CountedSplit`) and the general split (its fingerprint
    recorded in the parts), counted in one process or summed over every shard's part (the module docstring); None
    when independent jobs must be run again."""
    from fairseq_maskplug.data.track_shards import shard_lines
    from fairseq_maskplug.tools.producer import summed_arrays

    shard, size = inputs.shard, len(inputs.dictionary)

    def count(general_lines):
        domain_lines = shard_lines(len(counted.tokens), shard.num_shards, shard.shard_id, inputs.block_lines)
        return {"domain": token_counts(counted.tokens, domain_lines, size),
                "general": line_counts(general_tokens, general_lines, size)}

    return counted.shared("counts", count, summed_arrays, "token counts",
                          "each skips its counts and writes its lines of the tracks",
                          {"general": general_fingerprint}, n_lines=len(general_tokens))


def difference_scores(options: DifferenceOptions, inputs):
    """Every token's largest similarity to an anchor (0 at the special tokens), the anchors picked from the counts
    first (``--write-anchors``: shard 0 writes them then); the general corpus, its split and the checkpoint checked
    before any counting."""
    import numpy as np

    from fairseq_maskplug.data.dictionaries import dictionary_sha256
    from fairseq_maskplug.data.side_info import token_fingerprint
    from fairseq_maskplug.scoring.difference import anchor_similarity, anchors, tf_icf
    from fairseq_maskplug.tools.producer import data_dictionary, load_split
    from fairseq_maskplug.tools.sharding import checkpoint_identity, warn

    dictionary, data = inputs.dictionary, inputs.data
    if dictionary_sha256(dictionary) != dictionary_sha256(data_dictionary("--general", options.general)):
        raise ValueError(f"--general {options.general}: its dict.txt differs from --data {data}'s (token ids "
                         "must mean the same in both)")
    general_prefix, general_tokens = load_split(options.general, options.general_split, dictionary)
    embeddings = input_embeddings(options.checkpoint, data, len(dictionary))
    counted = counted_split(COMMAND, options.count_split, inputs)
    general_fingerprint = token_fingerprint(general_prefix)
    inputs.recorded.update(general=general_fingerprint, **checkpoint_identity(options.checkpoint))
    shared = shared_counts(inputs, counted, general_fingerprint, general_tokens)
    if shared is None:
        return None
    domain_counts, general_lines = shared["domain"], shared["general"]
    domain_counts[:dictionary.nspecial] = 0.0
    scores = tf_icf(domain_counts, general_lines, len(general_tokens))
    chosen = anchors(scores, options.anchors, domain_counts > 0)  # none with a positive TF-ICF: refused
    summary = inputs.summary
    summary.update(anchors=[dictionary[i] for i in chosen], general_lines=len(general_tokens), warnings=[])
    if len(chosen) < options.anchors:
        summary["warnings"].append(warn(f"--anchors {options.anchors}: only {len(chosen)} entries of {data} have "
                                        "a positive TF-ICF against the general corpus; those are the anchors"))
    if general_fingerprint == counted.fingerprint:
        summary["warnings"].append(warn(f"--general {options.general} split {options.general_split} holds the same "
                                        f"tokens as the target's {options.count_split}: the anchors are the target's "
                                        "own rarest words, not what sets it apart from a general corpus"))
    similarity = anchor_similarity(embeddings, chosen)
    similarity[:dictionary.nspecial] = 0.0
    occurring = np.concatenate([counted.tokens[i].numpy() for i in range(len(counted.tokens))])
    summary["mean_score_over_tokens"] = round(float(similarity[occurring].mean()), 4)
    write_besides(options.write_anchors, inputs, lambda: "".join(f"{dictionary[i]}\t{scores[i]:.6g}\n" for i in chosen))
    return vocabulary_lookup(similarity)


PRODUCER = TokenProducer(COMMAND, __doc__, DifferenceOptions, [Track("difference_score", "--difference-track")],
                         "float64", difference_scores, finish=counts_removed(COMMAND))
main = PRODUCER.main


if __name__ == "__main__":
    sys.exit(main())
