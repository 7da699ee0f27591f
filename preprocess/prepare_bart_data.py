"""``python -m preprocess.prepare_bart_data``: the BART recipe's news with entity spans and its closed-book probe (what
it writes and its options: :mod:`fairseq_maskplug.demo.bart_data`, ``--help``)."""

import sys

from fairseq_maskplug.demo.bart_data import main

if __name__ == "__main__":
    sys.exit(main())
