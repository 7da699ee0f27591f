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

import argparse
import sys

import numpy as np

from fairseq_maskplug.scoring.model_tracks import add_model_options

from . import HelpFormatter, add_splits, command_main, import_user_dir, track_name, track_outputs


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="roberta masked-LM checkpoint (frozen)")
    parser.add_argument("--data", required=True,
                        help="binarized token data with dict.txt (a sentence_prediction root: its input0/)")
    add_splits(parser, ["train"], "score")
    parser.add_argument("--name", type=track_name, default="plt", help="side-information track name")
    parser.add_argument("--metric", default="word_l2r", choices=["word_l2r", "original", "unmasked"],
                        help="word_l2r: mask the token and the later subwords of its word (paper); "
                             "original: mask the token only (Salazar et al.); unmasked: nothing masked, "
                             "P(token) at its own position (Self-Evolution's self-questioning pass, for "
                             "--mask-policy self_evolution)")
    parser.add_argument("--word-starts", default="sentencepiece", choices=["sentencepiece", "gpt2", "token"],
                        help="how word starts are known: sentencepiece '\u2581' prefix, GPT-2 BPE (needs "
                             "--gpt2-encoder-json and --gpt2-vocab-bpe), or every token a word")
    parser.add_argument("--gpt2-encoder-json", help="GPT-2 BPE encoder.json the data was encoded with")
    parser.add_argument("--gpt2-vocab-bpe", help="GPT-2 BPE vocab.bpe the data was encoded with")
    add_model_options(parser, 2048, "padded tokens per forward (2048 was fastest on 2 CPU cores; raise it on GPUs)",
                      preview=False)
    args = parser.parse_args(argv)
    if args.word_starts == "gpt2" and not (args.gpt2_encoder_json and args.gpt2_vocab_bpe):
        parser.error("--word-starts gpt2 needs --gpt2-encoder-json and --gpt2-vocab-bpe")
    return args


def score(args) -> int:
    """The command's work: the user directory imported, every input and output checked before any work, then
    the PLT tracks written."""
    import_user_dir(args.user_dir)
    from fairseq_maskplug.tools.checkpoints import CLASSIFIER_TASKS, load_checked_model
    from fairseq_maskplug.scoring.pll import PLTScorer, score_in_windows, word_starts_gpt2, word_starts_sentencepiece
    from fairseq_maskplug.scoring.model_tracks import model_track, write_model_tracks
    from fairseq_maskplug.scoring.preview import throughput

    from fairseq_maskplug.data.layout import token_data_dir
    from fairseq_maskplug.scoring.precision import start_model_producer

    data = token_data_dir(args.data)
    outputs = track_outputs(data, dict.fromkeys(args.splits), [("--name", args.name)])  # before any work
    shard, precision, device = start_model_producer(args, data)
    model, task, _ = load_checked_model(args.checkpoint, data, args.trust_dictionary,
                                        refuse=CLASSIFIER_TASKS + ("token_importance",),
                                        wanted="a masked-LM checkpoint (guided_mlm, masked_lm, ...)")
    d = task.source_dictionary
    if args.word_starts == "sentencepiece":
        word_starts = word_starts_sentencepiece(d)
        if not word_starts[d.nspecial:].any():
            raise ValueError(f"{data}/dict.txt has no sentencepiece word starts ('\u2581'): each line would be one "
                             "word; use --word-starts token (every token a word) or --word-starts gpt2")
    elif args.word_starts == "gpt2":
        word_starts = word_starts_gpt2(d, args.gpt2_encoder_json, args.gpt2_vocab_bpe)
    else:
        word_starts = np.ones(len(d), dtype=bool)
    scorer = PLTScorer(model, task.mask_idx, d.pad(), word_starts, args.metric)
    track = model_track(args, shard, precision, metric=args.metric, word_starts=args.word_starts)
    special = (d.bos(), d.eos(), d.pad())

    def score_block(lines):  # each line with <s> before it, as the model was trained; its value dropped
        plts = score_in_windows(scorer, [np.concatenate([[d.bos()], line]) for line in lines], special,
                                model.max_positions(), args.max_tokens)
        return [[plt[1:] for plt in plts]]

    def report(split, lines, rows, seconds, wrote):
        scored = np.concatenate([plt[:-1] for plt in rows[0]] or [np.zeros(0)])  # without </s>
        mean = f"{scored.mean():.4g}" if scored.size else "-"
        return f"{throughput('scored', len(lines), scored.size, seconds)}; mean PLT {mean}; {precision}; wrote {wrote[0]}"

    write_model_tracks(track, outputs, d, score_block, report, precision, device, data)
    return 0


main = command_main(parse_args, score)


if __name__ == "__main__":
    sys.exit(main())
