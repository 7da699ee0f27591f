"""Tasks that take ``--mask-policy``: what they share (:class:`PolicyTask`) and every registered mask
policy's options exposed on each of them.

fairseq reads a task's options from its dataclass in three places: the class
attribute ``__dataclass`` (argparse flags), ``TASK_DATACLASS_REGISTRY`` (flags ->
config) and hydra's ConfigStore (``fairseq-hydra-train``). A task registered with
:func:`register_policy_task` gets a dataclass that extends its own with the options of
every policy registered so far, and all three places are updated whenever another
policy registers (for instance from a user's ``--user-dir`` module).
"""

import dataclasses
from typing import Dict, Tuple

from fairseq.tasks import TASK_DATACLASS_REGISTRY, register_task
from hydra.core.config_store import ConfigStore

from ..masking import build_mask_policy, ignored_policy_options, on_policy_registered, policy_option_dataclasses
from .mask_units import MaskUnitOptions, with_mask_unit
from .rate_schedules import RateScheduleOptions, ScheduledRates, prepare_rate_schedule, schedule_highest_rate

_POLICY_TASKS: Dict[str, Tuple[type, type]] = {}


def with_policy_options(base: type) -> type:
    """``base`` extended with the option fields of all registered policies, :class:`MaskUnitOptions` and
    :class:`RateScheduleOptions`."""
    own = {f.name for f in dataclasses.fields(base)}
    options = [*policy_option_dataclasses(), MaskUnitOptions, RateScheduleOptions]
    for dc in options:
        clash = own & {f.name for f in dataclasses.fields(dc)}
        if clash:
            raise ValueError(f"mask policy options {sorted(clash)} ({dc.__name__}) clash with "
                             f"options of {base.__name__}")
    merged = dataclasses.make_dataclass(base.__name__, [], bases=(base, *options))
    merged.__module__, merged.__qualname__, merged.__doc__ = base.__module__, base.__qualname__, base.__doc__
    return merged


def _install(name: str, task_cls: type, dataclass: type) -> None:
    setattr(task_cls, "__dataclass", dataclass)  # what FairseqTask.add_args reads
    TASK_DATACLASS_REGISTRY[name] = dataclass
    node = dataclass()
    node._name = name
    ConfigStore.instance().store(name=name, group="task", node=node, provider="fairseq")


class PolicyTask(ScheduledRates):
    """What every task with ``--mask-policy`` shares, as a base listed before its fairseq task base:
    :attr:`policy`, built from the task's options when the task is made (:meth:`build_policy`), and
    the side-information tracks that policy reads (:attr:`side_info_rules`, loaded and checked with
    the tokens). Register such a task with :func:`register_policy_task`."""

    policy = None

    def __init__(self, cfg, *args, **kwargs):
        super().__init__(cfg, *args, **kwargs)
        self.rate_schedule = prepare_rate_schedule(cfg, self.rate_schedule_refused)
        self.policy = with_mask_unit(self.build_policy(cfg, schedule_highest_rate(self.rate_schedule)), cfg,
                                     self.dictionary)

    def build_policy(self, cfg, rate=None):
        """The policy ``--mask-policy`` names (:func:`build_task_policy`), drawing at ``rate`` when a schedule
        sets it; a task may return None where no policy was asked for (``fe_mlm``'s paper views)."""
        return build_task_policy(cfg, rate)

    @property
    def side_info_rules(self):
        """The side-information tracks the policy reads, each mapped to the rule its values follow."""
        return self.policy.side_info_rules if self.policy is not None else {}


def register_policy_task(name: str, dataclass: type):
    """``register_task(name, dataclass)`` whose options also include all policies' options; the task
    must derive from :class:`PolicyTask`."""

    def register(cls):
        if not issubclass(cls, PolicyTask):
            raise TypeError(f"register_policy_task({name!r}): {cls.__name__} must derive from "
                            f"fairseq_maskplug.tasks.PolicyTask (listed before its fairseq task base), which "
                            f"builds the policy its options name")
        register_task(name, dataclass=with_policy_options(dataclass))(cls)
        _POLICY_TASKS[name] = (cls, dataclass)
        return cls

    return register


def build_task_policy(cfg, rate=None):
    """The policy ``cfg.mask_policy`` names, its options mapped from the task's (:func:`policy_options`) and its
    rate replaced by ``rate`` when given (a schedule's highest rate; the task's own configuration, saved in
    checkpoints, keeps what was given); options of policies it does not read, set to anything but their
    default, are refused (they would be ignored silently)."""
    ignored = ignored_policy_options(cfg.mask_policy, cfg)
    if ignored:
        listed = ", ".join(f"{flag} (an option of mask policy {owner!r})" for flag, owner in ignored)
        owners = " or ".join(sorted({f"--mask-policy {owner}" for _, owner in ignored}))
        task = getattr(cfg, "_name", None)
        raise ValueError(f"{f'--task {task} ' if task else ''}--mask-policy {cfg.mask_policy} does not read "
                         f"{listed}: leave {'it' if len(ignored) == 1 else 'them'} out, or use {owners}")
    return build_mask_policy(cfg.mask_policy, cfg, rate)


def policy_task_options(name: str):
    """``(task class, its own options dataclass)`` of a task registered with
    :func:`register_policy_task`, else None."""
    return _POLICY_TASKS.get(name)


def _refresh_policy_tasks() -> None:
    for name, (task_cls, base) in _POLICY_TASKS.items():
        _install(name, task_cls, with_policy_options(base))


on_policy_registered(_refresh_policy_tasks)
