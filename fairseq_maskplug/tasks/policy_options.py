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
from dataclasses import dataclass
from typing import Dict, Tuple

from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import TASK_DATACLASS_REGISTRY, register_task
from hydra.core.config_store import ConfigStore

from ..common.option_ranges import option
from ..data.word_boundaries import BOUNDARIES, word_start_symbols
from ..masking import build_mask_policy, ignored_policy_options, on_policy_registered, policy_option_dataclasses
from ..masking.words import WordUnitPolicy

_POLICY_TASKS: Dict[str, Tuple[type, type]] = {}


@dataclass
class MaskUnitOptions:
    """What any policy chooses: tokens, or whole words (:mod:`fairseq_maskplug.masking.words`)."""

    mask_unit: ChoiceEnum(["token", "word"]) = option(
        "token", "token: the policy chooses subword tokens; word: it chooses whole words (its rate is then per word; "
        "entity and learned spans grow to whole words); both rates are logged (mask_rate, unit_mask_rate)",
        source="paper (every method masks subwords; word: ours, for any policy)")
    word_boundaries: ChoiceEnum(list(BOUNDARIES)) = option(
        "auto", "with --mask-unit word: where words start: sentencepiece (a piece with the word-start mark), gpt2 (a "
        "token with GPT-2's space byte; needs --gpt2-encoder-json), whitespace (every token is a word); auto reads "
        "dict.txt", source="fairseq (get_whole_word_mask's rule)")
    gpt2_encoder_json: str = option("", "with --mask-unit word on GPT-2 BPE data: the BPE's encoder.json")


def with_policy_options(base: type) -> type:
    """``base`` extended with the option fields of all registered policies and :class:`MaskUnitOptions`."""
    own = {f.name for f in dataclasses.fields(base)}
    options = [*policy_option_dataclasses(), MaskUnitOptions]
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


class PolicyTask:
    """What every task with ``--mask-policy`` shares, as a base listed before its fairseq task base:
    :attr:`policy`, built from the task's options when the task is made (:meth:`build_policy`), and
    the side-information tracks that policy reads (:attr:`side_info_rules`, loaded and checked with
    the tokens). Register such a task with :func:`register_policy_task`."""

    policy = None

    def __init__(self, cfg, *args, **kwargs):
        super().__init__(cfg, *args, **kwargs)
        self.policy = with_mask_unit(self.build_policy(cfg), cfg, self.dictionary)

    def build_policy(self, cfg):
        """The policy ``--mask-policy`` names (:func:`build_task_policy`); a task may return None
        where no policy was asked for (``fe_mlm``'s paper views)."""
        return build_task_policy(cfg)

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


def build_task_policy(cfg):
    """The policy ``cfg.mask_policy`` names; options of policies it does not read, set to
    anything but their default, are refused (they would be ignored silently)."""
    policy = build_mask_policy(cfg.mask_policy, cfg)
    ignored = ignored_policy_options(policy, cfg)
    if ignored:
        listed = ", ".join(f"{flag} (an option of mask policy {owner!r})" for flag, owner in ignored)
        owners = " or ".join(sorted({f"--mask-policy {owner}" for _, owner in ignored}))
        task = getattr(cfg, "_name", None)
        raise ValueError(f"{f'--task {task} ' if task else ''}--mask-policy {cfg.mask_policy} does not read "
                         f"{listed}: leave {'it' if len(ignored) == 1 else 'them'} out, or use {owners}")
    return policy


def with_mask_unit(policy, cfg, dictionary):
    """``policy`` as ``--mask-unit`` asks: itself for tokens, a :class:`WordUnitPolicy` for words; the
    word options without ``--mask-unit word`` are refused (nothing would read them)."""
    if cfg.mask_unit == "token":
        given = [flag for flag, value, default in (("--word-boundaries", cfg.word_boundaries, "auto"),
                                                   ("--gpt2-encoder-json", cfg.gpt2_encoder_json, ""))
                 if value != default]
        if given:
            raise ValueError(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} read only with "
                             "--mask-unit word")
        return policy
    if policy is None:
        raise ValueError("--mask-unit word needs a --mask-policy to choose whole words (e.g. --mask-policy random)")
    starts, _ = word_start_symbols(dictionary, cfg.word_boundaries, cfg.gpt2_encoder_json or None)
    return WordUnitPolicy(policy, starts)


def policy_task_options(name: str):
    """``(task class, its own options dataclass)`` of a task registered with
    :func:`register_policy_task`, else None."""
    return _POLICY_TASKS.get(name)


def _refresh_policy_tasks() -> None:
    for name, (task_cls, base) in _POLICY_TASKS.items():
        _install(name, task_cls, with_policy_options(base))


on_policy_registered(_refresh_policy_tasks)
