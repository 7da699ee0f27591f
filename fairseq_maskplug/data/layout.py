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

``fairseq-hydra-train`` runs the job in hydra's output directory, where a relative
``task.data=data/bin`` means another directory (and fairseq itself reads ``task.data`` as
given): it is refused in one line naming the absolute path, as is a missing ``task.data``
(:func:`required_data`).
"""

import logging
import os
import sys

from fairseq import utils
from omegaconf.errors import MissingMandatoryValue

logger = logging.getLogger(__name__)


def _under_hydra() -> bool:
    if "hydra" not in sys.modules:
        return False
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.initialized()


def _refuse(message: str):
    """A ValueError; under ``fairseq-hydra-train``, which turns exceptions into tracebacks, one
    line on stderr and exit status 2."""
    if _under_hydra():
        print(f"fairseq-hydra-train: error: {message}", file=sys.stderr, flush=True)
        raise SystemExit(2)
    raise ValueError(message)


def check_hydra_path(path: str, key: str) -> str:
    """``path``; a relative one is refused under ``fairseq-hydra-train`` when hydra runs the job in
    another directory (its output directory, by default), where the path means something else."""
    if not path or os.path.isabs(path) or not _under_hydra():
        return path
    from hydra.utils import get_original_cwd

    started = get_original_cwd()
    if os.path.realpath(started) != os.path.realpath(os.getcwd()):
        _refuse(f"{key}={path} is relative, and fairseq-hydra-train runs the job in {os.getcwd()}: give "
                f"{key}={os.path.join(started, path)}, or add hydra.job.chdir=False")
    return path


def required_data(cfg) -> str:
    """The task's ``--data`` (``task.data``), refused in one line when missing, or relative under a
    ``fairseq-hydra-train`` job that runs in another directory (:func:`check_hydra_path`)."""
    try:
        value = cfg.data
    except MissingMandatoryValue:
        value = None
    if not value or value == "???":
        _refuse("--data is required: the fairseq-preprocess output directory (fairseq-hydra-train: task.data=DIR)")
    for path in utils.split_paths(value):
        check_hydra_path(path, "task.data")
    return value


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
