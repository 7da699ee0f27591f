"""Score token pseudo-likelihoods (PLT) of a binarized split with a frozen roberta checkpoint.

    python -m preprocess.score_pll --checkpoint general/checkpoint_last.pt \\
        --data data-bin/mr/input0 --split train --name plt

writes ``DATA/SPLIT.NAME.bin/.idx`` (one PLT per token, ``</s>`` = 1) atomically, the
side information read by ``--mask-policy l3 --l3-track NAME``. The model must use the
data's dictionary (its ``dict.txt``).

Sharded (one rank per GPU, several nodes, or independent jobs)::

    torchrun --nproc-per-node 8 $(which fairseq-maskplug-score-pll) --checkpoint ... --data ...
    # or jobs I = 0..N-1, then the merge:
    fairseq-maskplug-score-pll ... --num-shards N --shard-id I
    fairseq-maskplug-merge-shards DATA

Each shard scores a contiguous range of whole blocks (``--shard-block-lines``), batching within a block, so
the merged track is the one a single process writes, byte for byte; a rerun skips finished shards.
"""

import sys
from dataclasses import dataclass

import numpy as np

from fairseq_maskplug.common.option_ranges import option
from fairseq_maskplug.scoring.model_tracks import ReadsCheckpoint, ScoringOptions
from fairseq_maskplug.tools.producer import TokenProducer, Track


@dataclass
class PLLOptions(ScoringOptions):
    max_tokens: int = option(2048, "padded tokens per forward (2048 was fastest on 2 CPU cores; raise it on GPUs)",
                             range="[1, inf)", source="ours")
    metric: str = option("word_l2r", "word_l2r: mask the token and the later subwords of its word (paper); "
                         "original: mask the token only (Salazar et al.); unmasked: nothing masked, P(token) at "
                         "its own position (Self-Evolution's self-questioning pass, for --mask-policy "
                         "self_evolution)", choices=["word_l2r", "original", "unmasked"])
    word_starts: str = option("sentencepiece", "how word starts are known: sentencepiece '\u2581' prefix, GPT-2 BPE "
                              "(needs --gpt2-encoder-json and --gpt2-vocab-bpe), or every token a word",
                              choices=["sentencepiece", "gpt2", "token"])
    gpt2_encoder_json: str = option(None, "GPT-2 BPE encoder.json the data was encoded with")
    gpt2_vocab_bpe: str = option(None, "GPT-2 BPE vocab.bpe the data was encoded with")

    def __post_init__(self):
        if self.word_starts == "gpt2" and not (self.gpt2_encoder_json and self.gpt2_vocab_bpe):
            raise ValueError("--word-starts gpt2 needs --gpt2-encoder-json and --gpt2-vocab-bpe")


def word_starts_of(options: PLLOptions, d, data: str) -> np.ndarray:
    """Whether each dictionary entry starts a word, as ``--word-starts`` says."""
    from fairseq_maskplug.scoring.pll import word_starts_gpt2, word_starts_sentencepiece

    if options.word_starts == "gpt2":
        return word_starts_gpt2(d, options.gpt2_encoder_json, options.gpt2_vocab_bpe)
    if options.word_starts == "token":
        return np.ones(len(d), dtype=bool)
    word_starts = word_starts_sentencepiece(d)
    if not word_starts[d.nspecial:].any():
        raise ValueError(f"{data}/dict.txt has no sentencepiece word starts ('\u2581'): each line would be one "
                         "word; use --word-starts token (every token a word) or --word-starts gpt2")
    return word_starts


def pll_values(options: PLLOptions, inputs):
    """Each line's PLTs, scored with ``<s>`` before it, as the model was trained (its value dropped)."""
    from fairseq_maskplug.scoring.pll import PLTScorer, score_in_windows

    model, d = inputs.model, inputs.task.source_dictionary
    scorer = PLTScorer(model, inputs.task.mask_idx, d.pad(), word_starts_of(options, d, inputs.data), options.metric)
    special = (d.bos(), d.eos(), d.pad())

    def of_block(lines):
        plts = score_in_windows(scorer, [np.concatenate([[d.bos()], line]) for line in lines], special,
                                model.max_positions(), options.max_tokens)
        return [plt[1:] for plt in plts]
    return of_block


def report(options: PLLOptions, inputs, done) -> str:
    from fairseq_maskplug.scoring.preview import throughput

    scored = np.concatenate([plt[:-1] for plt in done.rows[0]] or [np.zeros(0)])  # without </s>
    mean = f"{scored.mean():.4g}" if scored.size else "-"
    return (f"{throughput('scored', len(done.lines), scored.size, done.seconds)}; mean PLT {mean}; "
            f"{inputs.precision}; wrote {done.wrote[0]}")


PRODUCER = TokenProducer("fairseq-maskplug-score-pll", __doc__, PLLOptions, [Track("plt", "--l3-track")], "float64",
                         pll_values, report=report, splits=("train",),
                         reads=ReadsCheckpoint("a masked-LM checkpoint (guided_mlm, masked_lm, ...)"))
main = PRODUCER.main


if __name__ == "__main__":
    sys.exit(main())
