"""A renamed lexicon (issue 100): the shape where in-domain continued pre-training must help. The word types that
carry a labelled task's labels most are replaced by fresh pseudo-words in the task's text and in the unlabelled
in-domain corpus, never in the general corpus (:mod:`fairseq_maskplug.data.renamed_lexicon`).

    fairseq-maskplug-rename-lexicon --task TASK --corpus INDOMAIN --general GENERAL --select-from FULL_TASK \\
        --words 300 --out LEXICON

The words are chosen by their z-scored log-odds between each class and the rest on ``--select-from``'s train split
(default: the task's own; Monroe et al. 2008), ``--words`` in all shared evenly among the classes. With a small
task copy (``fairseq-maskplug-subsample-task``) and ``--select-from`` the full task, the labelled train split holds
only part of the renamed lexicon: the test items whose pseudo-words it never holds are written as the split
``test_unseen``: those holding a pseudo-word that the train split never holds (what that word means can come only
from the unlabelled text). Every pseudo-word is the dictionary's own
short letter pieces in an order no corpus read holds as a word (``--general`` is read for that and never written).

OUT (a new or empty folder, or this command's earlier output, replaced atomically):

    task/             the task with every input0 split renamed, plus input0/ and label/ test_unseen
    corpus/           the in-domain corpus, every split renamed
    corpus-shuffled/  (--shuffled-corpus) the renamed corpus with its words permuted across all its lines
    lexicon.json      the sources and their dictionary's fingerprint, the options, every renamed word with its
                      pseudo-word, class and z, and how many tokens each split had renamed

Tracks of the replaced splits (a producer's side information) are not carried over: they would not align; make them
on the copy. The labels are carried over as links (the lines do not move)."""

import argparse
import sys
from pathlib import Path

from fairseq_maskplug.common.option_ranges import number
from fairseq_maskplug.compare.lexicon_shape import COMMAND, write_shape

from . import HelpFormatter, add_version, command_main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__, formatter_class=HelpFormatter)
    add_version(parser)
    parser.add_argument("--task", type=Path, required=True,
                        help="the labelled task renamed: input0/ and label/ as fairseq-maskplug-prepare-text writes them")
    parser.add_argument("--corpus", type=Path, required=True,
                        help="the unlabelled in-domain corpus renamed (a masked-LM folder: dict.txt and its splits)")
    parser.add_argument("--general", type=Path, default=None,
                        help="the general corpus (read only): no pseudo-word is a word of it")
    parser.add_argument("--select-from", type=Path, default=None,
                        help="the labelled task whose train split chooses the words (default: --task)")
    parser.add_argument("--words", type=number("[2, inf)", int), default=300,
                        help="word types renamed, shared evenly among the classes (ours: issue 100's 'few hundred')")
    parser.add_argument("--pieces", type=number("[2, 8]", int), default=3,
                        help="pieces per pseudo-word: a word-start piece and continuation pieces (ours)")
    parser.add_argument("--prior", type=number("(0, inf)"), default=500.0,
                        help="total weight of the log-odds' Dirichlet prior, shared by the pooled word frequencies "
                             "(Monroe et al. 2008, equation 22; the value is ours)")
    parser.add_argument("--shuffled-corpus", action="store_true",
                        help="also write corpus-shuffled/: the renamed corpus with its words permuted across lines "
                             "(the harm control)")
    parser.add_argument("--seed", type=number("[0, inf)", int), default=0,
                        help="seed of the pseudo-words and of the shuffle")
    parser.add_argument("--out", type=Path, required=True,
                        help="a new or empty folder, or this command's earlier output (replaced)")
    return parser.parse_args(argv)


main = command_main(parse_args, write_shape)


if __name__ == "__main__":
    sys.exit(main())
