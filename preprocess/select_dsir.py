"""Select task-relevant documents from a general corpus with DSIR (Xie et al., NeurIPS 2023).

Importance resampling over hashed n-grams (``fairseq_maskplug.retrieval.dsir``): the task's texts
(``--target``) and the corpus (``--corpus``, one document per line) are each fitted as a
distribution over 10,000 hashed unigram and bigram buckets; every document gets the log importance
weight sum over its n-grams of log p_target - log p_corpus, and ``--num-docs`` documents are drawn
without replacement with probabilities proportional to the weights (``--top`` keeps the largest
instead). No index, no queries: two streaming passes over the corpus.

Example (as many documents as BM25 retrieved, for the TLM recipe)::

    fairseq-maskplug-select --corpus general.txt --target task.train.txt --num-docs 15786 --out selected/

Output in ``--out``, the layout of ``fairseq-maskplug-retrieve`` so that ``--task tlm`` and the
recipes take either (a new or empty directory, or this command's earlier output, replaced
atomically): ``retrieved.txt`` (the documents, in corpus order), ``retrieved.ids`` (their 0-based
corpus line numbers), ``provenance.tsv`` (``draw doc log_weight``: the order drawn, the line, its
log importance weight) and ``summary.json`` (counts, settings, timings, the weights' spread).

In shards (``--num-shards N --shard-id I``, or the ranks of a torchrun/srun launch), each shard takes a
contiguous range of the documents (:mod:`fairseq_maskplug.tools.pass_parts`): pass 1 writes its bucket
counts to ``OUT.shards/``; with every shard's counts (their sum is the corpus distribution of one process,
exactly: integer counts), pass 2 writes its documents' weights; rank 0, or ``fairseq-maskplug-merge-shards
OUT`` after independent jobs, draws the documents from all the weights with ``--seed`` and writes ``--out``:
the files of one process (the summary's seconds aside). Independent jobs run every shard twice: the first
run writes the counts and stops, the second weighs (docs/scale.md).
"""

import argparse
import sys

from fairseq_maskplug.common.option_ranges import number
from fairseq_maskplug.retrieval.select_command import COMMAND, run
from fairseq_maskplug.tools.sharding import add_shard_options

from . import HelpFormatter, add_version, command_main


def parse_args(argv=None):
    from fairseq_maskplug.retrieval.dsir import BUCKETS, NGRAMS

    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__, formatter_class=HelpFormatter)
    add_version(parser)
    parser.add_argument("--corpus", required=True, help="general corpus: UTF-8, one document per line")
    parser.add_argument("--target", required=True, help="the task's texts: UTF-8, one per line")
    parser.add_argument("--num-docs", required=True, type=number("[1, inf)", int),
                        help="documents to select (at most the corpus's documents with an n-gram)")
    parser.add_argument("--out", required=True, help="output directory: new or empty, or this command's earlier "
                                                     "output, which is replaced atomically")
    parser.add_argument("--buckets", type=number("[1, inf)", int), default=BUCKETS,
                        help="hash buckets of the n-gram features (the paper's and authors' code: 10,000)")
    parser.add_argument("--ngrams", type=number("[1, inf)", int), default=NGRAMS,
                        help="longest n-gram: 2 = unigrams and bigrams (the paper's and authors' code)")
    parser.add_argument("--min-words", type=number("[0, inf)", int), default=0,
                        help="documents of fewer words are never selected (ours: 0; the authors' package: 100, "
                             "for Pile documents)")
    parser.add_argument("--top", action="store_true",
                        help="keep the --num-docs largest weights instead of resampling (deterministic; the "
                             "paper resamples)")
    parser.add_argument("--seed", type=number("[0, inf)", int), default=0, help="seed of the resampling")
    add_shard_options(parser, unit="documents")
    return parser.parse_args(argv)


main = command_main(parse_args, run)


if __name__ == "__main__":
    sys.exit(main())
