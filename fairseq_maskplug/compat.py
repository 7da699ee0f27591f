"""What this stack's fairseq needs to train as the plugin's users expect (installed by :mod:`.plugin`).

- Checkpoints under torch >= 2.6 (``weights_only=True`` by default): fairseq checkpoints
  pickle ``argparse.Namespace`` and its distributed broadcast pickles
  ``_TensorPlaceholder``; both are allow-listed, so resuming keeps the safe loader.
- Data parallelism on CPUs with fairseq's default ``--ddp-backend pytorch_ddp``: fairseq
  passes ``device_ids=[device_id]`` to torch's ``DistributedDataParallel``, which torch
  rejects for a module on the CPU; the wrapper fairseq builds here leaves them out there.
- Launchers: ``torchrun`` and ``srun`` form one data-parallel run (see :mod:`.launch`).
"""

import argparse
import os

import torch
from torch.nn.parallel import DistributedDataParallel

from .launch import configure_launch


def allow_fairseq_checkpoint_globals() -> None:
    """Allow-list the classes fairseq checkpoints contain for torch's safe loader."""
    if not hasattr(torch.serialization, "add_safe_globals"):  # torch < 2.4: nothing to do
        return
    from fairseq.distributed.utils import _TensorPlaceholder

    torch.serialization.add_safe_globals([argparse.Namespace, _TensorPlaceholder])


class DeviceAwareDistributedDataParallel(DistributedDataParallel):
    """torch's ``DistributedDataParallel``; for a module on the CPU without ``device_ids`` and
    ``output_device`` (torch: "only work with single-device/multiple-device GPU modules")."""

    def __init__(self, module, device_ids=None, output_device=None, **kwargs):
        if all(p.device.type == "cpu" for p in module.parameters()):
            device_ids = output_device = None
        super().__init__(module, device_ids=device_ids, output_device=output_device, **kwargs)


def _infer_init_method_with_launchers(original):
    def infer_init_method(cfg, force_distributed=False):
        if configure_launch(cfg, os.environ, cpu=not torch.cuda.is_available()) is None:
            original(cfg, force_distributed)

    infer_init_method.maskplug_original = original
    return infer_init_method


def install() -> None:
    """Apply every item of the module docstring (idempotent)."""
    from fairseq.distributed import utils as distributed_utils
    from fairseq.models import distributed_fairseq_model

    allow_fairseq_checkpoint_globals()
    distributed_fairseq_model.DistributedDataParallel = DeviceAwareDistributedDataParallel
    if not hasattr(distributed_utils.infer_init_method, "maskplug_original"):
        distributed_utils.infer_init_method = _infer_init_method_with_launchers(distributed_utils.infer_init_method)
