"""What a resumed run changes from the checkpoint it resumes, said in one line per option, and kept.

fairseq resumes ``checkpoint_last.pt`` under the command's options, whatever the checkpoint's were: a run started
with ``--mask-policy pmi`` and resumed with ``--mask-policy random`` went on under random masks without a word, and
the checkpoint then recorded only the new policy. On a resume (not a fine-tuning start, not
``--reset-dataloader``), :func:`changed_options` names each task option whose value differs (the data directory
aside), :func:`check_recorded_policy` refuses a checkpoint whose recorded ``--mask-policy`` this version does not
know, and :func:`history_after` gives the settings history the task saves with every later checkpoint
(``task_state["option_history"]``: each setting the run trained under, from which update).
"""

from typing import List, Mapping, Optional

#: task options a resume may change without it being a change of what is trained (where the data was found)
NOT_COMPARED = ("data", "_name")
HISTORY_KEY = "option_history"


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _plain(value):
    """A value as the checkpoint can hold it (plain types only: an enum by its name, a sequence as a list)."""
    import enum

    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def changed_options(checkpoint: str, saved: Mapping, current: Mapping) -> List[str]:
    """One line per task option whose value in ``current`` (this run's task options) differs from ``saved`` (the
    checkpoint's), in the order of ``current``; options only one side has are named too."""
    lines = []
    for key in list(current.keys()) + [k for k in saved.keys() if k not in current.keys()]:
        if key in NOT_COMPARED or key.startswith("_"):
            continue
        before, now = _plain(saved.get(key, "(not set)")), _plain(current.get(key, "(not set)"))
        if before != now:
            lines.append(f"resuming {checkpoint}: {_option(key)} was {before!r} in the checkpoint, {now!r} now")
    return lines


def check_recorded_policy(checkpoint: str, saved: Mapping) -> None:
    """Refuse, naming it and the registered policies, a checkpoint trained under a ``--mask-policy`` that this
    version does not register (a plugin's policy whose ``--user-dir`` is not given, or one since renamed)."""
    from ..masking.registry import MASK_POLICY_REGISTRY

    policy = saved.get("mask_policy")
    if policy and policy not in MASK_POLICY_REGISTRY:  # '' or None: the task's own default (older fe_mlm checkpoints)
        raise ValueError(f"{checkpoint} was trained with --mask-policy {policy!r}, which this version does not "
                         f"register (registered: {', '.join(sorted(MASK_POLICY_REGISTRY))}); load the plugin that "
                         "defines it (--user-dir), or start a new run")


def history_after(previous: Optional[list], saved: Mapping, current: Mapping, update: int) -> list:
    """The settings history after this resume: ``previous`` (the checkpoint's, or one entry for the settings it
    started with), then this run's settings from ``update`` on where any compared option changed."""
    def compared(options):
        return {k: _plain(v) for k, v in options.items() if k not in NOT_COMPARED and not k.startswith("_")}

    history = list(previous or [{"from_update": 0, "options": compared(saved)}])
    if compared(current) != history[-1]["options"]:
        history.append({"from_update": int(update), "options": compared(current)})
    return history
