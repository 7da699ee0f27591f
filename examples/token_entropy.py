"""A model producer in one file: a track of how unsure a masked-LM checkpoint is of each token, the entropy of its
prediction at the token's position (nothing masked), divided by the log of the vocabulary size so that it lies in
[0, 1] (0 at ``</s>``, which nothing masks). ``--mask-policy difference --difference-track entropy`` then masks
in proportion to it: the tokens the model is least sure of ("Writing a producer" on docs/own-policy.md).

It declares its options and one function of the tokens and the model (:func:`token_entropy`); everything else
comes from :class:`fairseq_maskplug.tools.producer.TokenProducer` with a checkpoint reader
(:class:`fairseq_maskplug.scoring.model_tracks.ReadsCheckpoint`): ``--checkpoint`` checked against the data's
dictionary, ``--fp16``/``--bf16``, the shards (one rank per GPU under torchrun, or independent jobs and
``fairseq-maskplug-merge-shards``), the tracks fingerprinted and written atomically, one-line errors, a JSON
summary.

    python examples/token_entropy.py --checkpoint CHECKPOINT --data DATA --name entropy
"""

import math
import sys
from dataclasses import dataclass

import numpy as np

from fairseq_maskplug.common.option_ranges import option
from fairseq_maskplug.scoring.model_tracks import ReadsCheckpoint
from fairseq_maskplug.tools.producer import TokenProducer, Track


@dataclass
class EntropyOptions:
    window: int = option(0, "tokens per forward after <s> (0: as many as the model's positions allow); a longer "
                         "line is read in consecutive windows", range="[0, inf)", source="ours")


def token_entropy(options: EntropyOptions, inputs):
    """The values of a block of lines: one forward per window of a line, ``<s>`` before it; each position's
    entropy of the model's softmax over the vocabulary, over ``log |V|``."""
    import torch

    model, bos = inputs.model, inputs.dictionary.bos()
    width = options.window or model.max_positions() - 1

    def of_line(line):
        entropies = []
        for start in range(0, len(line), width):
            window = torch.as_tensor(np.concatenate([[bos], line[start:start + width]]), device=inputs.device)
            log_p = model(window[None])[0][0, 1:].float().log_softmax(-1)
            entropies.append(-(log_p.exp() * log_p).sum(-1) / math.log(log_p.shape[-1]))
        row = torch.cat(entropies).clamp(0, 1).double().cpu().numpy()
        row[-1] = 0.0  # </s>
        return row

    return lambda lines: [of_line(line) for line in lines]


PRODUCER = TokenProducer("examples/token_entropy.py", __doc__, EntropyOptions,
                         tracks=[Track("entropy", read_by="--difference-track")], dtype="float64", values=token_entropy,
                         reads=ReadsCheckpoint("a masked-LM checkpoint (guided_mlm, masked_lm, ...)"))
main = PRODUCER.main


if __name__ == "__main__":
    sys.exit(main())
