"""META-TARTAN loss weighting (Dery et al. 2022, "Should We Be Pre-training? An Argument for
End-task Aware Training as an Alternative"), the multi-task framework L3Masking trains in
(Kimura et al., §4.1).

The end task and its auxiliary objectives are weighted by ``w = softmax(λ)``. At every
update, each objective's gradient ``g_k`` over the shared body (the encoder) is compared
with the gradient ``g_dev`` of a *dev head* -- a fresh classification head fitted on a
sample of dev data with the body frozen -- on another dev sample; the weights then move
towards the objectives that point where the dev loss falls:

    λ_k  <-  λ_k + η · cos(g_dev, g_k)

(the authors' code: gradient ``-cos`` on λ, averaged over gradient-accumulation steps,
plain SGD with ``--meta-lr-weight``). The model is trained on ``Σ_k w_k L_k``.

What this module holds: the weights as a model buffer (saved in every checkpoint, so
training resumes exactly), the cosine over lists of gradients, and the dev head.
"""

import copy
import math
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

Grads = Sequence[Optional[torch.Tensor]]


class MetaTartanWeights(nn.Module):
    """The logits λ of the objectives' softmax weights, as the buffer ``logits`` (float64).

    A buffer rather than task state because fairseq saves task state in checkpoints but
    does not restore it when training resumes; model buffers are restored. The buffer
    follows the model's device but never its dtype (``--fp16`` halves the model), and a
    checkpoint without it (the vanilla model of ``--finetune-from-model``) loads with the
    initial logits, 0: equal weights.
    """

    def __init__(self, objectives: Sequence[str]):
        super().__init__()
        self.objectives = tuple(objectives)
        self.register_buffer("logits", torch.zeros(len(self.objectives), dtype=torch.float64))
        self.register_load_state_dict_pre_hook(_keep_logits_if_missing)

    def weights(self) -> Dict[str, float]:
        """``{objective: w_k}``, ``w = softmax(λ)``."""
        w = torch.softmax(self.logits, dim=0).tolist()
        return dict(zip(self.objectives, w))

    def step(self, mean_cosines: Sequence[Optional[float]], meta_lr: float) -> None:
        """``λ_k += meta_lr · cos_k`` for each objective whose cosine is known (None: unchanged)."""
        delta = [0.0 if c is None else meta_lr * c for c in mean_cosines]
        self.logits += torch.tensor(delta, dtype=torch.float64, device=self.logits.device)

    def _apply(self, fn, recurse=True):
        device = fn(torch.empty(0, device=self.logits.device)).device
        self.logits = self.logits.to(device)
        return self


def _keep_logits_if_missing(module, state_dict, prefix, *args):
    state_dict.setdefault(prefix + "logits", module.logits.detach().clone())


def cosine(a: Grads, b: Grads) -> Optional[float]:
    """Cosine between two gradients given as lists of tensors (None: zero), in float64.

    Pairs where either side is None add nothing to the dot product; the norms count every
    tensor of their own side (as the authors' ``dot_prod``/``calc_norm``). None when either
    gradient is zero or not finite (an fp16 overflow).
    """
    dot = norm_a = norm_b = 0.0
    for x, y in zip(a, b, strict=True):
        x64 = None if x is None else x.detach().double()
        y64 = None if y is None else y.detach().double()
        if x64 is not None:
            norm_a += float((x64 * x64).sum())
        if y64 is not None:
            norm_b += float((y64 * y64).sum())
        if x64 is not None and y64 is not None:
            dot += float((x64 * y64).sum())
    if not (norm_a > 0 and norm_b > 0) or not math.isfinite(dot + norm_a + norm_b):
        return None
    return dot / math.sqrt(norm_a * norm_b)


def fresh_head(template: nn.Module, seed: int) -> nn.Module:
    """A copy of ``template`` (fp32, on its device) with every linear layer re-initialised
    from ``seed``, without touching the global random state."""
    device = next(template.parameters()).device
    head = copy.deepcopy(template).float().cpu()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for module in head.modules():
            if isinstance(module, nn.Linear):
                module.reset_parameters()
    return head.to(device)


def fit_dev_head(head: nn.Module, features: torch.Tensor, labels: torch.Tensor, steps: int, lr: float,
                 weight_decay: float) -> List[float]:
    """Fit ``head`` on fixed body features with full-batch AdamW (betas 0.9, 0.98), as the
    authors' ``learn_dev_head``; returns the loss before each step.

    The body is frozen during the fit, so its features are computed once; the authors
    recompute them (with new dropout) at every step.
    """
    optimizer = torch.optim.AdamW(head.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=weight_decay)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(head(features), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


def sentence_features(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """The encoder's last-layer features of the ``<s>`` position, shaped ``B x 1 x C`` (what a
    roberta classification head reads), in fp32."""
    features, _ = model(tokens, features_only=True)
    return features[:, :1, :].float()


def dev_gradient(model: nn.Module, head_template: nn.Module, body: Sequence[nn.Parameter], fit: dict,
                 probe: dict, seed: int, steps: int, lr: float, weight_decay: float,
                 scale: float = 1.0) -> List[Optional[torch.Tensor]]:
    """``g_dev``: gradient over ``body`` of the dev loss of a freshly fitted dev head.

    ``fit`` and ``probe`` are dev batches (``net_input.src_tokens``, ``target``): the head
    (a copy of ``head_template`` initialised from ``seed``) is fitted on ``fit`` and its
    cross-entropy on ``probe`` is differentiated, multiplied by ``scale`` (the fp16 loss
    scale, against underflow; cosines do not depend on it).
    """
    with torch.no_grad():
        fit_features = sentence_features(model, fit["net_input"]["src_tokens"])
    head = fresh_head(head_template, seed)
    fit_dev_head(head, fit_features, fit["target"].view(-1), steps, lr, weight_decay)
    for p in head.parameters():
        p.requires_grad_(False)
    loss = F.cross_entropy(head(sentence_features(model, probe["net_input"]["src_tokens"])),
                           probe["target"].view(-1))
    return list(torch.autograd.grad(loss * scale, list(body), allow_unused=True))


def loss_scale(optimizer) -> float:
    """The factor fairseq's ``optimizer.backward`` multiplies losses by (fp16/AMP loss scale; 1 in fp32)."""
    scaler = getattr(optimizer, "scaler", None)
    if scaler is None:
        return 1.0
    if hasattr(scaler, "get_scale"):  # AMP: torch's GradScaler
        return float(scaler.get_scale())
    return float(scaler.loss_scale)


def backward_combination(optimizer, params: Sequence[nn.Parameter], grads: Dict[str, Grads],
                         weights: Dict[str, float], scale: float) -> None:
    """Accumulate ``Σ_k w_k g_k`` into ``params``' gradients through ``optimizer.backward``.

    ``grads[k]`` were computed on the loss multiplied by ``scale``. A linear surrogate
    ``Σ_p <p, Σ_k w_k g_k,p / scale>`` is back-propagated, so fairseq's loss scaling,
    gradient accumulation and all-reduce see an ordinary backward whose gradients equal the
    weighted objective's, without another backward through the network. Parameters no
    objective reaches keep no gradient.
    """
    surrogate = None
    for i, p in enumerate(params):
        combined = None
        for name, w in weights.items():
            g = grads[name][i]
            if g is not None:
                term = w * g.float()
                combined = term if combined is None else combined + term
        if combined is None:
            continue
        term = (p.float() * (combined / scale)).sum()
        surrogate = term if surrogate is None else surrogate + term
    if surrogate is not None:
        optimizer.backward(surrogate)
