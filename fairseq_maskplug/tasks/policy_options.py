"""Tasks that take ``--mask-policy`` (every :class:`~.masked_lm_base.MaskedLMBaseTask`): every registered mask
policy's options exposed on each of them, and the policy built from them (:func:`build_task_policy`).

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
from .mask_units import MaskUnitOptions
from .rate_schedules import RateScheduleOptions

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


def register_policy_task(name: str, dataclass: type):
    """``register_task(name, dataclass)`` whose options also include all policies' options; the task
    must build the policy they name (derive from ``fairseq_maskplug.tasks.MaskedLMBaseTask``)."""

    def register(cls):
        if not callable(getattr(cls, "build_policy", None)):
            raise TypeError(f"register_policy_task({name!r}): {cls.__name__} must derive from "
                            f"fairseq_maskplug.tasks.MaskedLMBaseTask, which builds the policy its options name")
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
