"""The number format of the scoring commands' forwards: fp32, or fp16/bf16 under autocast.

``--fp16``/``--bf16`` run a frozen model's forwards under :func:`torch.autocast` (matrix products
in half precision, softmax, layer norm and the scores in fp32: autocast's own lists), the way
fairseq's ``--fp16`` does not for inference and users of torch expect; fp16 only on a CUDA GPU
(CPU kernels for it are slow or missing), bf16 on a GPU that supports it and on the CPU. Every
forward also runs under :func:`torch.inference_mode`. Scores differ from fp32 by the rounding of
half precision: see ``docs/scale.md`` for the measured differences and the tests' tolerance.
"""

import contextlib
from typing import Iterator

import torch

PRECISIONS = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}


def precision_device() -> torch.device:
    """Where the scoring commands run their model: the current CUDA device when there is one (as
    :func:`~..tools.checkpoints.model_from_state` puts it), else the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def check_precision(precision: str, device: torch.device) -> None:
    """One line, before any work, when ``precision`` cannot run on ``device``."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
    if precision == "fp16" and device.type != "cuda":
        raise ValueError("--fp16 needs a CUDA GPU and none is visible: on the CPU use --bf16, or neither (fp32)")
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError(f"--bf16: GPU {torch.cuda.get_device_name(device)} does not support bfloat16; use --fp16")
    if precision == "bf16" and not torch.amp.is_autocast_available(device.type):
        raise ValueError(f"--bf16: this torch has no autocast on {device.type}; use neither (fp32)")


@contextlib.contextmanager
def inference(precision: str, device: torch.device) -> Iterator[None]:
    """Forwards without autograd, under autocast to ``precision`` (none for fp32)."""
    check_precision(precision, device)
    dtype = PRECISIONS[precision]
    with torch.inference_mode(), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
        yield


def start_model_producer(args, parts_dir: str):
    """What a producer that loads a model does before loading it: its shard
    (:func:`~..tools.sharding.shard_of`), its rank's GPU, the number format of ``--fp16``/``--bf16``
    checked on that device, and (where it merges) the parts a killed merge left in ``parts_dir`` merged.
    Returns ``(shard, precision, device)``."""
    from ..data.track_shards import finish_merges
    from ..tools.cli import precision_of
    from ..tools.sharding import shard_of, use_local_device

    shard = shard_of(args)
    use_local_device(shard)
    precision, device = precision_of(args), precision_device()
    check_precision(precision, device)
    if shard.merges:
        finish_merges(parts_dir)
    return shard, precision, device
