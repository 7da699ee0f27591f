"""META-TARTAN inside a fairseq task, for any number of named objectives.

The task supplies, per micro-batch, each objective's loss (from one forward through the
model) and a way to draw dev batches; :class:`MetaTartanTraining` does the rest of
Dery et al.'s update (see :mod:`.meta_tartan`):

1. each objective's gradient over all trainable parameters (``autograd.grad``, on the loss
   times the fp16 loss scale);
2. the dev gradient ``g_dev`` of a fresh dev head fitted on dev data, and the cosines
   ``cos(g_dev, g_k)`` over the shared body, kept until the update ends;
3. one backward of the weighted sum ``Σ_k w_k g_k`` through fairseq's ``optimizer.backward``
   (loss scaling, ``--update-freq`` and all-reduce as usual);
4. after the parameter update, ``λ_k += η · mean cos_k`` over micro-batches and workers.

Dev draws are seeded by (seed, update, worker, micro-batch), so a resumed run draws what
the uninterrupted one drew.
"""

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ..models import unwrap_model
from .meta_tartan import MetaTartanWeights, backward_combination, cosine, dev_gradient, loss_scale
from .objectives import Weighting

#: ``dev_batches(seed, device) -> (fit batch, probe batch)``: two disjoint labelled dev batches
DevBatches = Callable[[int, torch.device], Tuple[dict, dict]]


class MetaTartanTraining(Weighting):
    """The META-TARTAN steps of a task whose objectives are ``objectives``.

    Args:
        objectives: names of the objectives, in the order of the weight logits.
        seed: the run's seed (``--seed``).
        meta_lr: ``η``, the learning rate of the weight logits.
        head_steps, head_lr, head_weight_decay: how the dev head is fitted.
    """

    total = 1.0  # the weighted sum is the loss (:func:`.objectives.combine`): the weights sum to 1

    def __init__(self, objectives: Sequence[str], seed: int, meta_lr: float, head_steps: int, head_lr: float,
                 head_weight_decay: float):
        self.objectives = tuple(objectives)
        self.seed, self.meta_lr = seed, meta_lr
        self.head_steps, self.head_lr, self.head_weight_decay = head_steps, head_lr, head_weight_decay
        self.cosines: List[List[Optional[float]]] = []  # per micro-batch of the current update attempt

    def attach(self, model) -> None:
        """Give ``model`` the weight logits (a buffer: saved in checkpoints, restored on resume)."""
        model.meta_tartan = MetaTartanWeights(self.objectives)

    def weights(self, model) -> Dict[str, float]:
        """``{objective: w_k}`` in force."""
        return unwrap_model(model).meta_tartan.weights()

    def seeds(self, update_num: int, micro_batch: int) -> Tuple[int, int]:
        """``(dev head seed, dev draw seed)`` of one micro-batch."""
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        head, draw = np.random.SeedSequence([self.seed, update_num, rank, micro_batch]).generate_state(2)
        return int(head), int(draw)

    def backward(self, model, optimizer, losses: Dict[str, torch.Tensor], weights: Dict[str, float],
                 update_num: int, dev_batches: DevBatches, head_template: torch.nn.Module,
                 body: Sequence[torch.nn.Parameter]) -> List[Optional[float]]:
        """Steps 1-3 for one micro-batch; returns ``[cos(g_dev, g_k) for k in objectives]`` (None
        where a gradient is zero or not finite).

        ``losses`` share one forward; ``head_template`` is copied for the dev head and ``body``
        holds the shared parameters the cosines are taken over.
        """
        params = [p for p in model.parameters() if p.requires_grad]
        if all(p.grad is None for p in params):  # fairseq clears gradients when an update attempt starts
            self.cosines = []
        scale = loss_scale(optimizer)
        last = self.objectives[-1]
        grads = {k: _gradients(losses[k] * scale, params, retain_graph=k != last) for k in self.objectives}
        in_body = {id(p) for p in body}
        shared = [i for i, p in enumerate(params) if id(p) in in_body]
        head_seed, draw_seed = self.seeds(update_num, len(self.cosines))
        fit, probe = dev_batches(draw_seed, params[0].device)
        g_dev = dev_gradient(unwrap_model(model), head_template, [params[i] for i in shared], fit, probe,
                             seed=head_seed, steps=self.head_steps, lr=self.head_lr,
                             weight_decay=self.head_weight_decay, scale=scale)
        cosines = [cosine(g_dev, [grads[k][i] for i in shared]) for k in self.objectives]
        self.cosines.append(cosines)
        backward_combination(optimizer, params, grads, weights, scale)
        return cosines

    def update_weights(self, model) -> None:
        """Step 4, after ``optimizer.step``: the mean cosines of the update (over its micro-batches
        and all workers) move the logits."""
        weights = unwrap_model(model).meta_tartan
        sums = torch.zeros(2, len(self.objectives), dtype=torch.float64, device=weights.logits.device)
        for cosines in self.cosines:
            for k, c in enumerate(cosines):
                if c is not None:
                    sums[0, k] += c
                    sums[1, k] += 1
        if torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
            from fairseq.distributed import utils as distributed_utils
            distributed_utils.all_reduce(sums, group=distributed_utils.get_data_parallel_group())
        means = [float(s / n) if n > 0 else None for s, n in sums.T.tolist()]
        weights.step(means, self.meta_lr)
        self.cosines = []


def _gradients(loss, params, retain_graph=False):
    """``d loss / d params`` (None where a parameter is not reached; all None without a graph)."""
    if not loss.requires_grad:
        return [None] * len(params)
    return list(torch.autograd.grad(loss, params, allow_unused=True, retain_graph=retain_graph))
