"""Print the first items of a split exactly as training builds them: see what a policy does.

Takes fairseq-train's arguments (DATA, --task, --mask-policy and its options, --seed,
--tokens-per-sample, ...) and prints, for items 0..n-1 of the split at the given epoch,
every input and target the task feeds the model, decoded. Items are built by the task's
own dataset with the same (seed, epoch, index) generator as in training, so what is shown
is what the model sees. In masked-LM targets ``_`` marks a position not predicted; for
``--task span_policy`` the target is the answer's first and last token position, shown with
the tokens it spans.

With ``--format html`` the same items become one HTML page on stdout: every masked-LM row is the
original text with the chosen positions coloured (one colour per fully-explored view, the input the
model saw there in the tooltip), every text-to-text row its tokens with ``<mask>`` coloured.

Example::

    fairseq-maskplug-show-examples work/bart/data/news --task guided_denoising \\
        --mask-policy salient_span --target-format masked -n 3 --post-process sentencepiece
    fairseq-maskplug-show-examples work/data/indomain --task fe_mlm --fe-views 4 -n 3 --format html > fe.html
"""

import argparse
import sys

from fairseq_maskplug.common.option_ranges import number

from . import HelpFormatter, add_version, configure_tool_output, split_name


def own_parser():
    # no abbreviations: "--task" (fairseq's) must not be read as our "--task-state"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter, add_help=False,
                                     allow_abbrev=False, usage="%(prog)s DATA --task TASK [fairseq-train options] [-n N] [--split S]")
    add_version(parser)
    parser.add_argument("-h", "--help", action="store_true", help="show this help (fairseq-maskplug-train --task "
                                                                   "TASK --help lists the task's options)")
    parser.add_argument("-n", type=number("[1, inf)", int), default=5, help="items to show")
    parser.add_argument("--split", type=split_name, default="train", help="split to read")
    parser.add_argument("--epoch", type=number("[1, inf)", int),
                        default=1, help="training epoch whose masks are shown (from 1)")
    parser.add_argument("--post-process", default="none", choices=["none", "sentencepiece"],
                        help="sentencepiece: join pieces into words (▁ -> space)")
    parser.add_argument("--format", default="text", choices=["text", "html"],
                        help="html: one page on stdout, the chosen positions coloured")
    parser.add_argument("--task-state", default=None, metavar="CHECKPOINT",
                        help="read the task state a training run saved in CHECKPOINT: a policy that learns from "
                             "training (ptw) then draws with that run's statistics (--epoch E: as epoch E of it)")
    return parser


def main(argv=None) -> int:
    configure_tool_output()
    parser = own_parser()
    own, rest = parser.parse_known_args(argv)
    if own.help or not rest:
        parser.print_help()
        return 0 if own.help else 2
    from fairseq_maskplug.evaluation.examples import show

    return show(own, rest)


if __name__ == "__main__":
    sys.exit(main())
