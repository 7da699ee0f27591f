"""The task side of policies that learn from training (:mod:`fairseq_maskplug.masking.feedback`).

:class:`TrainingFeedback` keeps the policy's running statistics: every training batch takes the
masked-LM loss of each predicted position (:class:`TokenLosses`, read from the model's output in the same
forward pass) and sums it per group into its logging output (:meth:`TrainingFeedback.batch_statistics`), in
the row of its micro-batch (``--update-freq k``: k rows, the i-th forward of the update in row i; fairseq's
``Trainer.train_step`` announces k, ``integration/compat.py``); fairseq adds the logging outputs up over the
update's micro-batches and the data-parallel workers, as it does its own statistics, and the task folds the
rows in, in order, once per update (:meth:`TrainingFeedback.fold_update`): one fold per forward, as the authors'
code folds after every forward (PTW), each forward's sums taken over the workers. So the statistics take no
collective of their own: a worker that skips a micro-batch on an out-of-memory error, a batch fairseq runs
again after an AMP overflow and an update fairseq skips on an fp16 overflow are where fairseq's own
statistics are (the first two counted once, the last not at all). The items of
epoch ``e`` draw with the statistics at the end of epoch ``e - 1`` (epoch 1 and validation: the initial
ones). Both are saved in the checkpoint's task state and restored on resume, so a resumed run
masks as an uninterrupted one.

:class:`LiveFeedbackDraw` then draws every training batch's masks again, in the main process, with the
statistics of the current update, as PTW's authors' collator reads the live scores at every batch: the
items' own draws (made ahead by the loader's workers, with the epoch's statistics) only stand where that
step cannot run (a policy that reads side information other than its feedback track).
"""

import logging
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from fairseq.logging import metrics

from ..masking import Feedback, group_loss_sums

#: the key of the statistics in the checkpoint's task state
STATE_KEY = "mask_policy_feedback"
#: a training batch's logging-output entries: per group, the sum of the finite losses and their count (2 x groups),
#: and the number of non-finite losses left out
SUMS_KEY, DROPPED_KEY = "feedback_loss_sums", "feedback_dropped"

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
        self.updates_folded = 0  #: updates whose batches are in the statistics (logged with each epoch's state)
        self.slots, self.next_slot = 1, 0  #: the current update's micro-batches, and the next one's row

    def begin_update(self, micro_batches: int) -> None:
        """An update of ``micro_batches`` forwards begins (fairseq's ``Trainer.train_step``, ``--update-freq``):
        each :meth:`take_slot` then gives the next forward's row of :meth:`batch_statistics`."""
        if micro_batches < 1:
            raise ValueError(f"mask policy feedback: an update of {micro_batches} micro-batches")
        self.slots, self.next_slot = int(micro_batches), 0

    def take_slot(self) -> tuple:
        """``(row, rows)`` for this forward's statistics: the i-th forward since :meth:`begin_update` gets row i of
        as many as the update has (without it, every forward row 0 of 1: the update's forwards summed)."""
        slot = min(self.next_slot, self.slots - 1)
        self.next_slot += 1
        return slot, self.slots

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
        logger.info("mask policy %s: epoch %d draws with its state from training so far (%d updates folded): %s%s "
                    "(the masks it gives: fairseq-maskplug-show-examples --task-state CHECKPOINT)", self.name, epoch,
                    self.updates_folded, self.feedback.describe(state), dropped)

    def batch_statistics(self, groups: torch.Tensor, losses: torch.Tensor, ignore: bool = False, slot: int = 0,
                         slots: int = 1) -> dict:
        """This worker's part of one forward, as logging-output entries: per group the sum of the finite losses of
        its predicted positions and their count, in row ``slot`` of ``slots`` (:meth:`take_slot`; the other rows
        zero; ``ignore``, fairseq's dummy batches: all zero), and the number of non-finite losses left out (an fp16
        overflow's NaN would stay in a score for good)."""
        if not 0 <= slot < slots:
            raise ValueError(f"mask policy feedback: row {slot} of {slots}")
        losses, groups = losses.double().cpu(), groups.cpu()
        finite = torch.isfinite(losses)
        dropped = int((~finite).sum())
        sums, counts = group_loss_sums(groups[finite].numpy(), losses[finite].numpy(), self.feedback.groups)
        rows = np.zeros((slots, 2, self.feedback.groups))
        rows[slot] = np.stack([sums, counts]) * (0.0 if ignore else 1.0)
        return {SUMS_KEY: torch.from_numpy(rows), DROPPED_KEY: 0 if ignore else dropped}

    def fold_update(self, logging_outputs) -> None:
        """Fold one update in: the :meth:`batch_statistics` of its logging outputs, which fairseq has already added
        up over the micro-batches and the workers (every worker folds the same sums), one row per forward, in
        order (the Hugging Face collator: one forward, one row). Logging outputs without them (validation) fold
        nothing."""
        parts = [log[SUMS_KEY] for log in logging_outputs if SUMS_KEY in log]
        if not parts:
            return
        rows = sum(torch.as_tensor(part).double().cpu() for part in parts)
        rows = rows.reshape(-1, 2, self.feedback.groups)
        self.dropped += int(sum(float(log.get(DROPPED_KEY, 0)) for log in logging_outputs))
        for sums, counts in rows.numpy():
            self.running = np.asarray(self.feedback.fold(self.running, sums, counts), dtype=np.float64)
        self.updates_folded += 1

    def restart_epochs(self) -> None:
        """Training starts again at epoch 1 with the statistics loaded (``--reset-dataloader``,
        ``--finetune-from-model``): epoch 1 draws with them, and the epochs are counted anew."""
        self.start = self.running.copy()
        self.epoch, self.drawn = 1, self.start.copy()
        self.logged.clear()

    def state_dict(self) -> dict:
        return {"running": self.running.tolist(), "epoch": self.epoch, "drawn": self.drawn.tolist(),
                "start": self.start.tolist(), "updates_folded": self.updates_folded, "dropped": self.dropped}

    def load_state_dict(self, state: dict) -> None:
        running, drawn = np.asarray(state["running"], dtype=np.float64), np.asarray(state["drawn"], dtype=np.float64)
        start = np.asarray(state.get("start", self.initial), dtype=np.float64)  # (saved before restarts existed)
        if not running.shape == drawn.shape == start.shape == self.initial.shape:
            raise ValueError(f"the checkpoint's mask-policy statistics have {running.shape[0]} groups, the policy "
                             f"{self.initial.shape[0]}")
        self.running, self.epoch, self.drawn, self.start = running, int(state["epoch"]), drawn, start
        self.updates_folded, self.dropped = int(state.get("updates_folded", 0)), int(state.get("dropped", 0))


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


class LiveFeedbackDraw:
    """A batch step (:meth:`~.task_base.PackageTask.prepare_batch`) of a policy that learns from training: each
    row of a training batch gets its item drawn again by the training items' own path
    (:meth:`~fairseq_maskplug.data.policy_path.PolicyPath.draw`) with a chooser holding
    :attr:`TrainingFeedback.running`, the statistics folded through the previous update, from the row's
    original tokens and its feedback track (both in the batch). The draw is keyed by ``(seed, 2, update, item
    id)``: a resumed run draws the same masks whatever the loader's workers and prefetch. Validation batches
    keep the items' draws (the initial statistics: comparable losses).

    Args:
        path: a :class:`~fairseq_maskplug.data.policy_path.PolicyPath` of the task's policy (with its
            ``--mask-unit`` wrapper) and the run's masked-LM output format.
        feedback: the task's :class:`TrainingFeedback`.
        pad: the padding index.
    """

    def __init__(self, path, feedback: TrainingFeedback, pad: int):
        self.path, self.feedback, self.pad = path, feedback, pad
        self.track = path.chooser.feedback.track

    @staticmethod
    def applies(policy) -> bool:
        """Whether a batch holds all the policy reads: its feedback track and nothing else."""
        feedback = getattr(policy, "feedback", None)
        return feedback is not None and set(policy.side_info_names) <= {feedback.track}

    def __call__(self, sample, update_num) -> dict:
        if update_num is None or not sample:
            return {}
        inputs, target = sample["net_input"], sample["target"]
        src, groups, ids = inputs["src_tokens"], sample["feedback_groups"].cpu().numpy(), sample["id"].cpu().numpy()
        if src.size(0) != len(ids):
            raise ValueError(f"live feedback: {src.size(0)} rows for {len(ids)} items (one row per item expected)")
        chooser = self.path.chooser.with_state(self.feedback.running)
        originals = torch.where(target.ne(self.pad), target, src).cpu().numpy()
        lengths = inputs["src_lengths"].cpu().numpy()
        sources, targets, counts = originals.copy(), np.full_like(originals, self.pad), []
        for row, (item, length) in enumerate(zip(ids.tolist(), lengths.tolist())):
            drawn = self.path.draw(originals[row, :length], {self.track: groups[row, :length]},
                                   np.random.default_rng((self.path.seed, 2, int(update_num), item)), item, chooser)
            sources[row, :length], targets[row, :length] = drawn["source"].numpy(), drawn["target"].numpy()
            counts.append(drawn["mask_counts"])
        src.copy_(torch.from_numpy(sources))
        target.copy_(torch.from_numpy(targets))
        sample["mask_counts"] = torch.cat(counts).to(sample["mask_counts"].device)
        top = int(np.argmax(self.feedback.running))
        chosen, maskable = targets != self.pad, np.isin(originals, self.path.special_ids, invert=True)
        return {"feedback_top_chosen": int((chosen & (groups == top)).sum()), "feedback_chosen": int(chosen.sum()),
                "feedback_top_maskable": int((maskable & (groups == top)).sum()),
                "feedback_maskable": int(maskable.sum())}


def log_live_feedback(logging_outputs) -> None:
    """Log, for the live draws (:class:`LiveFeedbackDraw`), ``mask_top_group_share``: of the chosen positions, the
    share in the group the statistics rank highest at that update (PTW: the hardest tag); and
    ``mask_top_group_lift``: that share over the group's share of the maskable positions (1: drawn as if
    the statistics were not there)."""
    total = lambda key: sum(log.get(key, 0) for log in logging_outputs)  # noqa: E731
    chosen, maskable, top_maskable = total("feedback_chosen"), total("feedback_maskable"), total("feedback_top_maskable")
    if chosen:
        share = total("feedback_top_chosen") / chosen
        metrics.log_scalar("mask_top_group_share", share, chosen, round=4)
        if top_maskable:
            metrics.log_scalar("mask_top_group_lift", share / (top_maskable / maskable), chosen, round=3)
