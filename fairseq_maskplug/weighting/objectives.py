"""How a task's named objectives combine into the loss it trains on: one component, three weightings.

A task declares its objectives (``{"cls": L_cls, "mlm": L_mlm}``, each a mean over its own
sample size) and holds one weighting with ``weights(model) -> {objective: w}``; the loss is
:func:`combine`: ``Σ_k w_k L_k / total``. The weightings:

- :class:`FixedWeights` ``{cls: 1, mlm: --mlm-weight}`` (``joint_mlm_classification``; L3Masking's
  and TARTAN's fixed-weight multi-task baselines);
- :class:`FixedWeights` ``{mlm: ρ2, cls: 1}`` with total ``ρ2 + 1`` (``tlm``'s task batches: Yao et
  al. 2022, Sec. 3.2, the authors' ``(ρ2 · L_mlm + L_cls) / (ρ2 + 1)``);
- :class:`~fairseq_maskplug.weighting.MetaTartanTraining`, ``w = softmax(λ)`` learned from dev
  gradients (Dery et al.; ``--loss-weighting tartan``).
"""

from typing import Dict, Mapping


class Weighting:
    """What every weighting gives a task and its criterion: ``weights(model) -> {objective: w}`` and the
    constant ``total`` the weighted sum is divided by, combined by :meth:`combined_loss`."""

    total: float = 1.0

    def weights(self, model) -> Dict[str, float]:
        raise NotImplementedError

    def combined_loss(self, losses: Mapping[str, object], weights: Mapping[str, float]):
        """``Σ_k w_k L_k / total`` (:func:`combine`)."""
        return combine(losses, weights, self.total)


class FixedWeights(Weighting):
    """Weights that never change, and the constant ``total`` the weighted sum is divided by."""

    def __init__(self, weights: Mapping[str, float], total: float = 1.0):
        if not weights or any(w < 0 for w in weights.values()) or not total > 0:
            raise ValueError(f"objective weights must be non-negative and the total positive, got {dict(weights)} "
                             f"and {total}")
        self._weights, self.total = dict(weights), float(total)

    def weights(self, model=None) -> Dict[str, float]:
        """``{objective: w_k}``, in the order the losses are summed."""
        return dict(self._weights)


def combine(losses: Mapping[str, object], weights: Mapping[str, float], total: float = 1.0):
    """``Σ_k w_k L_k / total`` over the objectives of ``weights``, summed in their order."""
    missing = sorted(set(weights) - set(losses))
    if missing:
        raise KeyError(f"no loss for the objectives {missing}")
    loss = sum(weights[k] * losses[k] for k in weights)
    return loss if total == 1.0 else loss / total
