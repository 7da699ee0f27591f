"""The task side of policies that learn from training (:mod:`fairseq_maskplug.masking.feedback`).

:class:`TrainingFeedback` keeps the policy's running statistics: after every training batch it takes the
masked-LM loss of each predicted position (:class:`TokenLosses`, read from the model's output in the same
forward pass), sums it per group, adds the sums up over the data-parallel workers and folds them in; the
items of epoch ``e`` draw with the statistics at the end of epoch ``e - 1`` (epoch 1 and validation: the
initial ones). Both are saved in the checkpoint's task state and restored on resume, so a resumed run
masks as an uninterrupted one.
"""

import logging
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from ..masking import Feedback, group_loss_sums

#: the key of the statistics in the checkpoint's task state
STATE_KEY = "mask_policy_feedback"

logger = logging.getLogger(__name__)


class TrainingFeedback:
    """The running statistics of a policy's :class:`~fairseq_maskplug.masking.Feedback` and the state each epoch's
    items draw with (module docstring)."""

    def __init__(self, feedback: Feedback, name: str = "the policy"):
        self.feedback, self.name = feedback, name
        self.initial = np.asarray(feedback.initial(feedback.groups), dtype=np.float64)
        self.running = self.initial.copy()  #: after the last training batch
        self.start = self.initial.copy()  #: what epoch 1 draws with (a restarted run: what it was loaded with)
        self.epoch, self.drawn = 1, self.initial.copy()  #: the newest epoch and the state its items draw with
        self.logged = set()  # the epochs whose state was logged
        self.dropped = 0  #: non-finite losses left out of the statistics (logged with each epoch's state)

    def state_for_epoch(self, epoch: int) -> np.ndarray:
        """The state the items of ``epoch`` draw with: for epoch 1 (and validation, which fairseq iterates as epoch
        1) the initial one, or the one loaded by a restarted run (:meth:`restart_epochs`); for a new epoch, the
        running statistics now; for the current one, the same again.
        The first time an epoch is asked, what it draws with is logged (:attr:`Feedback.describe`)."""
        if epoch <= 1:
            self.log_state(1, self.start)
            return self.start
        if epoch > self.epoch:
            self.epoch, self.drawn = epoch, self.running.copy()
        elif epoch < self.epoch:
            raise ValueError(f"mask policy feedback: epoch {epoch} asked after epoch {self.epoch}")
        self.log_state(epoch, self.drawn)
        return self.drawn

    def log_state(self, epoch: int, state: np.ndarray) -> None:
        """One line in training's log for the first call of ``epoch``: what the policy draws with."""
        if epoch in self.logged or self.feedback.describe is None:
            return
        self.logged.add(epoch)
        dropped = f"; {self.dropped} non-finite losses left out so far" if self.dropped else ""
        logger.info("mask policy %s: epoch %d draws with its state from training so far: %s%s (the masks it gives: "
                    "fairseq-maskplug-show-examples --task-state CHECKPOINT)", self.name, epoch,
                    self.feedback.describe(state), dropped)

    def fold(self, groups: torch.Tensor, losses: torch.Tensor, device, ignore: bool = False) -> None:
        """Fold one training batch in: ``groups`` and ``losses`` of its predicted positions, summed over the
        data-parallel workers first (every worker calls this once per batch; fairseq's dummy batches,
        ``ignore``, add zeros). A non-finite loss is left out (and counted in :attr:`dropped`)."""
        losses, groups = losses.double().cpu(), groups.cpu()
        finite = torch.isfinite(losses)
        if not bool(finite.all()):  # an fp16 overflow (a step fairseq then skips): one NaN would stay in a score
            self.dropped += int((~finite).sum())
            losses, groups = losses[finite], groups[finite]
        sums, counts = group_loss_sums(groups.numpy(), losses.numpy(), self.feedback.groups)
        both = torch.from_numpy(np.stack([sums, counts]) * (0.0 if ignore else 1.0))
        if torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
            from fairseq.distributed import utils as distributed_utils

            both = distributed_utils.all_reduce(both.to(device), group=distributed_utils.get_data_parallel_group())
            both = both.cpu()
        self.running = np.asarray(self.feedback.fold(self.running, both[0].numpy(), both[1].numpy()),
                                  dtype=np.float64)

    def restart_epochs(self) -> None:
        """Training starts again at epoch 1 with the statistics loaded (``--reset-dataloader``,
        ``--finetune-from-model``): epoch 1 draws with them, and the epochs are counted anew."""
        self.start = self.running.copy()
        self.epoch, self.drawn = 1, self.start.copy()
        self.logged.clear()

    def state_dict(self) -> dict:
        return {"running": self.running.tolist(), "epoch": self.epoch, "drawn": self.drawn.tolist(),
                "start": self.start.tolist()}

    def load_state_dict(self, state: dict) -> None:
        running, drawn = np.asarray(state["running"], dtype=np.float64), np.asarray(state["drawn"], dtype=np.float64)
        start = np.asarray(state.get("start", self.initial), dtype=np.float64)  # (saved before restarts existed)
        if not running.shape == drawn.shape == start.shape == self.initial.shape:
            raise ValueError(f"the checkpoint's mask-policy statistics have {running.shape[0]} groups, the policy "
                             f"{self.initial.shape[0]}")
        self.running, self.epoch, self.drawn, self.start = running, int(state["epoch"]), drawn, start


class TokenLosses:
    """``with TokenLosses(model, target, pad) as captured:`` the no-grad cross-entropy of each predicted position
    (``target != pad``, row-major) from the model's first output in that forward pass, ``captured.losses``.
    It needs a criterion that asks the model for the predicted positions only (fairseq's ``masked_lm``)."""

    def __init__(self, model, target: torch.Tensor, pad: int):
        self.model, self.targets = model, target[target.ne(pad)]
        self.losses: Optional[torch.Tensor] = None
        self.handle = None

    def capture(self, module, inputs, output):
        if self.losses is not None:  # a later forward in the same step (the self_evolution criterion's clean one)
            return
        if self.targets.numel() == 0:  # nothing predicted: fairseq's criterion then asks for every position
            self.losses = torch.zeros(0)
            return
        logits = output[0] if isinstance(output, (tuple, list)) else output
        if logits.dim() != 2 or logits.size(0) != self.targets.numel():
            raise ValueError(f"mask policy feedback: the model gave {tuple(logits.shape)} outputs for "
                             f"{self.targets.numel()} predicted positions (it needs the masked_lm criterion)")
        with torch.no_grad():
            self.losses = F.cross_entropy(logits.detach().float(), self.targets.to(logits.device), reduction="none")

    def __enter__(self):
        self.handle = self.model.register_forward_hook(self.capture)
        return self

    def __exit__(self, *exc):
        self.handle.remove()
        return False
