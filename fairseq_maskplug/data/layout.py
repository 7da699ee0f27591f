"""One ``--data`` convention for every task and tool: the directory ``fairseq-preprocess`` wrote.

Token data (``dict.txt``, ``SPLIT.bin/.idx``) is the masked-LM layout. Labelled data is
fairseq's sentence_prediction layout: a root holding ``input0/`` (the texts, token data)
and ``label/``. Whatever a task or tool reads, it takes either directory:

- a reader of **tokens** (the masked-LM tasks, ``token_importance``, ``score_pll``,
  ``annotate_importance``, ``evaluate_mlm``) given a sentence_prediction root reads its
  ``input0/``;
- a reader of **labels** (``joint_mlm_classification``, ``score_importance``,
  ``evaluate``) given an ``input0/`` directory whose parent holds ``label/`` reads that
  parent.

The directory used instead of the one given is logged, so a run says what it read.
"""

import logging
import os

logger = logging.getLogger(__name__)


def _is_token_dir(path: str) -> bool:
    return os.path.exists(os.path.join(path, "dict.txt"))


def token_data_dir(path: str) -> str:
    """``path``, or ``path/input0`` when ``path`` is a sentence_prediction root without its own ``dict.txt``."""
    if not _is_token_dir(path) and _is_token_dir(os.path.join(path, "input0")):
        used = os.path.join(path, "input0")
        logger.info("--data %s is a sentence_prediction root: reading its texts in %s", path, used)
        return used
    return path


def sentence_prediction_dir(path: str) -> str:
    """``path``, or its parent when ``path`` is the ``input0/`` of a sentence_prediction root."""
    parent = os.path.dirname(os.path.normpath(path))
    if (not os.path.isdir(os.path.join(path, "input0")) and os.path.basename(os.path.normpath(path)) == "input0"
            and os.path.isdir(os.path.join(parent, "label"))):
        logger.info("--data %s is the input0/ of a sentence_prediction root: reading %s", path, parent)
        return parent
    return path
