"""``python -m preprocess.prepare_tlm_data corpus|external``: the TLM recipe's data (what it writes and its options:
:mod:`fairseq_maskplug.demo.tlm_data`, ``--help``)."""

import sys

from fairseq_maskplug.demo.tlm_data import main, task_queries  # noqa: F401

if __name__ == "__main__":
    sys.exit(main())
