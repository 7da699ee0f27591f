"""What every task of this package is built on (:class:`PackageTask`): its options checked against their
declared ranges, the criteria it trains with, one dictionary on both sides, and one batch-preparation step
(:meth:`PackageTask.prepare_batch`) that every train and valid batch goes through before the model sees it."""

from typing import Callable, List, Sequence

from fairseq.criterions import CRITERION_DATACLASS_REGISTRY
from fairseq.tasks import FairseqTask

from ..common.option_ranges import check_ranges
from .criterion_check import check_criterion

#: a step of :meth:`PackageTask.prepare_batch`: ``(sample, update_num) -> logging entries``; it changes the
#: batch in place (``update_num`` is None for validation batches)
BatchStep = Callable[[dict, object], dict]


class PackageTask(FairseqTask):
    """Base of every task of the package.

    - its numeric options are checked against their declared ranges (:mod:`..common.option_ranges`) when the
      task is built, and :meth:`build_criterion` refuses criteria other than :attr:`criteria`;
    - ``self.dictionary`` is both the source and the target dictionary, and items hold at most
      ``--tokens-per-sample`` tokens;
    - every train and valid step runs :meth:`prepare_batch` first, then :meth:`optimization_step` (train) or
      :meth:`evaluation_step` (valid): a task changes what a batch holds by adding to :attr:`batch_steps`,
      and how it is trained by overriding one of the two steps.
    """

    #: criteria the task trains with; the first is the default of ``fairseq-maskplug-train``
    criteria: Sequence[str] = ()

    def __init__(self, cfg, *args, **kwargs):
        check_ranges(cfg, getattr(type(self), "__dataclass"))
        super().__init__(cfg, *args, **kwargs)
        #: the steps of :meth:`prepare_batch`, in order
        self.batch_steps: List[BatchStep] = []

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary

    def max_positions(self):
        return self.cfg.tokens_per_sample

    def build_criterion(self, cfg, from_checkpoint=False):
        name = getattr(cfg, "_name", None)
        check_criterion(getattr(self.cfg, "_name", None) or type(self).__name__, self.criteria, name)
        if CRITERION_DATACLASS_REGISTRY.get(name) is not None:
            check_ranges(cfg, CRITERION_DATACLASS_REGISTRY[name])
        return super().build_criterion(cfg, from_checkpoint)

    def prepare_batch(self, sample, update_num) -> dict:
        """Make ``sample`` ready for the model, in place, and return what to log: the sample gets
        ``update_num`` (the update's number; None in validation), which a criterion reads from there, then
        each of :attr:`batch_steps` runs in order (``--mask-prob-schedule`` thins the masks to the update's
        rate, :class:`~.rate_schedules.ScheduledThinning`)."""
        logs = {}
        if not sample:
            return logs
        sample["update_num"] = update_num
        for step in self.batch_steps:
            logs.update(step(sample, update_num))
        return logs

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        prepared = self.prepare_batch(sample, update_num)
        loss, sample_size, logging_output = self.optimization_step(sample, model, criterion, optimizer, update_num,
                                                                   ignore_grad)
        logging_output.update(prepared)
        return loss, sample_size, logging_output

    def optimization_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        """The forward and backward pass of a prepared training batch (fairseq's ``train_step``)."""
        return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)

    def valid_step(self, sample, model, criterion):
        prepared = self.prepare_batch(sample, None)
        loss, sample_size, logging_output = self.evaluation_step(sample, model, criterion)
        logging_output.update(prepared)
        return loss, sample_size, logging_output

    def evaluation_step(self, sample, model, criterion):
        """The loss of a prepared validation batch (fairseq's ``valid_step``)."""
        return super().valid_step(sample, model, criterion)
