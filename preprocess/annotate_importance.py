"""In-domain Mask (Gu et al. 2020, §2.3): write the tagger's importance scores for a corpus.

    python -m preprocess.annotate_importance --checkpoint tagger/checkpoint_best.pt \\
        --data data-bin/indomain --splits train valid --name importance

For each split writes atomically ``DATA/SPLIT.NAME.bin/.idx/.json`` (one float per token:
P(important); ``</s>`` = 0), the track ``--task selective_mlm`` masks from, and a
preview ``DATA/SPLIT.NAME.preview.txt`` of the first lines with the tokens the
selective policy would select (score >= 0.5) in ``[...]``. The corpus must use the
tagger's dictionary.
"""

import argparse
import sys
import time

import numpy as np

from fairseq_maskplug.common.option_ranges import number

from . import (HelpFormatter, add_checkpoint_options, add_splits, configure_tool_output, import_user_dir,
               one_line_on_write_failure, track_name, track_outputs)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="token_importance checkpoint (the tagger)")
    parser.add_argument("--data", required=True, help="binarized corpus directory (dict.txt, SPLIT.bin/.idx; "
                        "a sentence_prediction root: its input0/)")
    add_splits(parser, ["train", "valid"], "annotate")
    parser.add_argument("--name", type=track_name, default="importance", help="side-information track name")
    parser.add_argument("--max-tokens", type=number("[1, inf)", int), default=4096, help="padded tokens per forward")
    parser.add_argument("--preview-lines", type=number("[0, inf)", int),
                        default=200, help="lines shown in the preview file")
    parser.add_argument("--gpt2-bpe", default=None,
                        help="GPT-2 BPE directory (encoder.json) of GPT-2 BPE data: the preview shows text, not labels")
    add_checkpoint_options(parser)
    return parser.parse_args(argv)


@one_line_on_write_failure
def main(argv=None) -> int:
    args = parse_args(argv)
    configure_tool_output()
    from fairseq_maskplug.scoring.loading import load_tagger
    from fairseq.data import data_utils
    from fairseq_maskplug.data.layout import token_data_dir
    from fairseq_maskplug.data import write_side_info
    from fairseq_maskplug.scoring.preview import preview_symbols, render_marked, throughput, write_preview
    from fairseq_maskplug.scoring.tagger import TokenTagger

    args.data = token_data_dir(args.data)
    try:
        import_user_dir(args.user_dir)
        outputs = track_outputs(args.data, args.splits, [("--name", args.name)])
        model, head, d = load_tagger(args.checkpoint, args.data, args.trust_dictionary)
        tagger = TokenTagger(model, head, d.bos(), d.eos(), d.pad())
        symbols = preview_symbols(d, args.gpt2_bpe)
    except (FileNotFoundError, ValueError, PermissionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for split, (split_prefix, (prefix,)) in outputs.items():
        tokens = data_utils.load_indexed_dataset(split_prefix, d)
        lines = [tokens[i].numpy() for i in range(len(tokens))]
        start = time.perf_counter()
        scores = tagger.score(lines, args.max_tokens)
        seconds = time.perf_counter() - start
        write_side_info(prefix, scores, "float64", tokens_prefix=split_prefix)
        preview = prefix + ".preview.txt"
        write_preview(preview, (render_marked([symbols[t] for t in line[:-1]], score[:-1] >= 0.5)
                                for line, score in zip(lines[:args.preview_lines], scores)))
        words = np.concatenate([s[:-1] for s in scores]) if scores else np.zeros(0)
        print(f"{split}: {throughput('tagged', len(lines), words.size, seconds)}; {np.mean(words >= 0.5):.1%} of "
              f"the tokens scored >= 0.5; wrote {prefix}.bin/.idx and {preview}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
