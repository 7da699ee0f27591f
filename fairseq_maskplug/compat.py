"""Loading fairseq checkpoints under torch >= 2.6 (``weights_only=True`` by default).

fairseq checkpoints pickle ``argparse.Namespace`` and its distributed broadcast
pickles ``_TensorPlaceholder``; both are allow-listed here so that resuming keeps the
safe loader instead of turning it off with ``weights_only=False``.
"""

import argparse

import torch


def allow_fairseq_checkpoint_globals() -> None:
    """Allow-list the classes fairseq checkpoints contain for torch's safe loader."""
    if not hasattr(torch.serialization, "add_safe_globals"):  # torch < 2.4: nothing to do
        return
    from fairseq.distributed.utils import _TensorPlaceholder

    torch.serialization.add_safe_globals([argparse.Namespace, _TensorPlaceholder])
