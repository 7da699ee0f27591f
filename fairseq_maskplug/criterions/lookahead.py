"""The one-step lookahead meta-objective of the meta-learned span policy (ours; Ye, Li et al.
2021 state only that the policy is trained "so that the model learns the downstream task
quickly").

For policy weights ``w`` (here ``π_φ(s)`` over candidate spans, divided by the number of
blocks) and per-example losses ``L_n(θ)`` of the seq2seq model on the masked examples:

    inner(θ, φ)  = Σ_n w_n(φ) L_n(θ)
    θ'(φ)        = θ − α ∇θ inner(θ, φ)                  (one virtual SGD step)
    outer(φ)     = L_task(θ'(φ))                          (the downstream loss after it)

``exact`` differentiates ``outer`` through ``θ'`` with second-order autograd
(``create_graph=True``): ``∇φ outer = −α (∂²inner/∂φ∂θ) v`` with ``v = ∇θ' L_task(θ')``.
``finite_difference`` is DARTS' approximation (Liu et al. 2019, eq. 8): the mixed second
derivative times ``v`` as a central difference of ``∇φ inner`` at ``θ ± εv``, with
``ε = epsilon / ‖v‖``. It needs two extra forwards of the examples and no second-order
graph, so it suits large models; its error is O(ε²).

Everything is a pure function of the parameter dictionary, so tests compare both modes
with finite differences of ``outer`` itself.
"""

import contextlib
from dataclasses import dataclass
from typing import Callable, Dict, Iterator

import torch
from torch import nn

Params = Dict[str, torch.Tensor]
MODES = ("exact", "finite_difference")


@dataclass
class Lookahead:
    loss: torch.Tensor         # value = L_task(θ'); its gradient w.r.t. φ is the meta-gradient (exact or DARTS)
    task_before: torch.Tensor  # L_task(θ), for the log (detached)
    inner: torch.Tensor        # Σ w_n L_n(θ) (detached)


@contextlib.contextmanager
def substituted(model: nn.Module, params: Params) -> Iterator[nn.Module]:
    """``model`` with ``params`` (by parameter name) in place of its parameters, in every module
    that holds them (tied weights included), restored on exit. ``torch.func.functional_call``
    was found to leave a fairseq BART's three-way tied embedding altered after the call
    (torch 2.15), so the swap is done here, without touching the parameters' storage."""
    named = dict(model.named_parameters())
    unknown = sorted(set(params) - set(named))
    if unknown:
        raise KeyError(f"not parameters of the model: {unknown[:5]}")
    holders = {}
    for module in model.modules():
        for attr, p in module._parameters.items():
            if p is not None:
                holders.setdefault(id(p), []).append((module, attr))
    saved = []
    try:
        for name, tensor in params.items():
            for module, attr in holders[id(named[name])]:
                saved.append((module, attr, module._parameters[attr]))
                module._parameters[attr] = tensor
        yield model
    finally:
        for module, attr, original in reversed(saved):
            module._parameters[attr] = original


def detached(params: Params) -> Params:
    """Leaf copies that require grad: gradients land on these, never on the model's parameters."""
    return {name: p.detach().requires_grad_(True) for name, p in params.items()}


def lookahead(params: Params, weights: torch.Tensor, example_losses: Callable[[Params], torch.Tensor],
              task_loss: Callable[[Params], torch.Tensor], step_size: float, mode: str = "exact",
              epsilon: float = 0.01) -> Lookahead:
    """The meta-objective above. ``weights`` carry the graph to φ; ``example_losses(params)``
    returns ``L_n`` for every n (same length as ``weights``), ``task_loss(params)`` the
    downstream loss, both evaluated with ``params`` in place of the model's."""
    if mode not in MODES:
        raise ValueError(f"meta-gradient mode must be one of {MODES}, got {mode!r}")
    if not step_size > 0:
        raise ValueError(f"the inner step size must be positive, got {step_size}")
    theta = detached(params)
    names = list(theta)
    losses = example_losses(theta)
    if losses.shape != weights.shape:
        raise ValueError(f"{tuple(losses.shape)} example losses for {tuple(weights.shape)} weights")
    with torch.no_grad():
        task_before = task_loss(theta).detach()
    if mode == "exact":
        inner = (weights * losses).sum()
        grads = torch.autograd.grad(inner, [theta[k] for k in names], create_graph=True, allow_unused=True)
        updated = {k: theta[k] if g is None else theta[k] - step_size * g for k, g in zip(names, grads)}
        return Lookahead(task_loss(updated), task_before, inner.detach())
    # DARTS eq. 8
    inner = (weights.detach() * losses).sum()
    grads = torch.autograd.grad(inner, [theta[k] for k in names], allow_unused=True)
    updated = detached({k: theta[k] if g is None else theta[k] - step_size * g for k, g in zip(names, grads)})
    after = task_loss(updated)
    v = torch.autograd.grad(after, [updated[k] for k in names], allow_unused=True)
    v = [torch.zeros_like(theta[k]) if g is None else g for k, g in zip(names, v)]
    norm = torch.sqrt(sum((g.double() ** 2).sum() for g in v))
    if not norm > 0:  # the task loss does not depend on θ here: no meta-gradient
        return Lookahead(after.detach() + 0.0 * weights.sum(), task_before, inner.detach())
    eps = epsilon / float(norm)
    with torch.no_grad():
        plus = example_losses({k: theta[k] + eps * g for k, g in zip(names, v)})
        minus = example_losses({k: theta[k] - eps * g for k, g in zip(names, v)})
    surrogate = -step_size * (weights * (plus - minus)).sum() / (2 * eps)
    return Lookahead(after.detach() + surrogate - surrogate.detach(), task_before, inner.detach())
