"""What every training step needs under fairseq's default ``--ddp-backend pytorch_ddp``.

torch's ``DistributedDataParallel`` (without ``--find-unused-parameters``) expects every
trainable parameter to receive a gradient in every backward; a head that a step does
not use (the LM head while a tagger or a classifier trains) makes the next step fail
with "Expected to have finished reduction in the prior iteration". And the model must
be called through the wrapper once per backward.
"""

import torch


def unwrap_model(model):
    """The model inside fairseq's distributed wrappers (``.module`` chains)."""
    while hasattr(model, "module"):
        model = model.module
    return model


def zero_gradient_term(*modules) -> torch.Tensor:
    """``0 * Σ p.sum()`` over the trainable parameters of ``modules``: a loss term of value 0
    that gives each of them a zero gradient (weight decay still applies to them)."""
    params = [p for m in modules for p in m.parameters() if p.requires_grad]
    if not params:
        raise ValueError("zero_gradient_term needs at least one trainable parameter")
    return sum(p.sum() for p in params) * 0.0
