"""``fairseq-maskplug-train --task T [--mask-policy P] --help``: the options a run really has.

fairseq's parser reads the command line twice: the first pass finds ``--task``,
``--arch``, ``--criterion`` and the other components, the second adds their options.
``--help`` answers in the first pass, so ``fairseq-train --task guided_mlm --help``
lists none of the task's options. :func:`training_help` builds the parser as
``fairseq.options.parse_args_and_arch`` does, from the same registries, and prints it
with each component's options in a group of its own and every default shown:

- ``--task T``: the task's own options; for a policy task, one group per mask policy,
  or with ``--mask-policy P`` only the policies ``P`` reads (``matched_random`` also
  reads the options of its ``--matched-policy``);
- ``--arch A`` (if given): the model's options;
- ``--criterion``, ``--optimizer``, ``--lr-scheduler``, ...: each chosen one's options
  (a package task's ``--criterion`` defaults to the one it trains with).

For a task of this package, its groups come first (the task's, the unit and schedule options, its
policies', its criterion's), fairseq's generic groups after them; the usage line is one line, not
fairseq's 170. Without a task of this package, the help begins with this package's tasks and
policies.
"""

import argparse
import dataclasses
from typing import List, Optional, Sequence

HELP_FLAGS = ("-h", "--help")


def wants_help(argv: Sequence[str]) -> bool:
    return any(a in HELP_FLAGS for a in argv)


def _as_fairseq_dataclass(options: type) -> type:
    """A policy's plain options dataclass as a ``FairseqDataclass`` (what fairseq's flag builder reads)."""
    from fairseq.dataclass import FairseqDataclass

    return dataclasses.make_dataclass(options.__name__, [], bases=(FairseqDataclass, options))


def _policies_shown(argv: Sequence[str], policy: Optional[str]) -> List[str]:
    """Every registered policy, or the ones ``--mask-policy policy`` reads."""
    from fairseq.dataclass.utils import gen_parser_from_dataclass

    from ..masking import MASK_POLICY_REGISTRY, policies_read, policy_option_dataclasses

    if policy is None:
        return list(MASK_POLICY_REGISTRY)
    if policy not in MASK_POLICY_REGISTRY:
        policies_read(policy)  # raises: unknown policy, with the registered names
    given = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for options in policy_option_dataclasses():
        gen_parser_from_dataclass(given, _as_fairseq_dataclass(options)())
    try:  # a wrapping policy (matched_random) reads the options of the policy it wraps
        return policies_read(policy, given.parse_known_args(argv)[0])
    except ValueError:  # --matched-policy naming an unknown policy or itself: the policy alone
        return [policy]


def _add_task_options(parser: argparse.ArgumentParser, task_name: str, argv: Sequence[str]) -> None:
    from fairseq.dataclass.utils import gen_parser_from_dataclass
    from fairseq.tasks import TASK_REGISTRY

    from ..masking import MASK_POLICY_DATACLASS_REGISTRY
    from ..tasks.mask_units import MaskUnitOptions
    from ..tasks.policy_options import policy_task_options
    from ..tasks.rate_schedules import RateScheduleOptions

    task_cls = TASK_REGISTRY[task_name]
    own = policy_task_options(task_name)
    if own is None:  # any other task: its options as fairseq adds them
        task_cls.add_args(parser.add_argument_group(f"--task {task_name} options"))
        return
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--mask-policy", default=None)
    chosen = pre.parse_known_args(argv)[0].mask_policy
    note = None if chosen else "each mask policy's options follow; --mask-policy NAME --help shows only its own"
    gen_parser_from_dataclass(parser.add_argument_group(f"--task {task_name} options", note), own[1]())
    for title, options in (("what any policy chooses (--mask-unit)", MaskUnitOptions),
                           ("the mask rate over training (--mask-prob-schedule)", RateScheduleOptions)):
        gen_parser_from_dataclass(parser.add_argument_group(title), _as_fairseq_dataclass(options)())
    names = _policies_shown(argv, chosen)
    for name in list(MASK_POLICY_DATACLASS_REGISTRY):  # registration order
        options = MASK_POLICY_DATACLASS_REGISTRY[name]
        if options is None or name not in names:
            continue
        gen_parser_from_dataclass(parser.add_argument_group(f"--mask-policy {name} options"),
                                  _as_fairseq_dataclass(options)())


def training_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """fairseq-train's parser with every option of the components ``argv`` names."""
    from fairseq import options, utils
    from fairseq.dataclass.utils import gen_parser_from_dataclass
    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY
    from fairseq.registry import REGISTRIES

    argv = [a for a in argv if a not in HELP_FLAGS]
    user = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    user.add_argument("--user-dir", default=None)
    utils.import_user_module(user.parse_known_args(argv)[0])

    parser = options.get_training_parser()
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    args, _ = parser.parse_known_args(argv)  # the first pass: which components
    if args.arch is not None:
        model = ARCH_MODEL_REGISTRY.get(args.arch) or MODEL_REGISTRY.get(args.arch)
        model.add_args(parser.add_argument_group(f"--arch {args.arch} options", argument_default=argparse.SUPPRESS))
    _add_task_options(parser, args.task, argv)
    for registry_name, registry in REGISTRIES.items():
        choice = getattr(args, registry_name, None)
        if choice is None:
            continue
        component = registry["registry"][choice]
        group = parser.add_argument_group(f"--{registry_name.replace('_', '-')} {choice} options")
        if hasattr(component, "add_args"):
            component.add_args(group)
        elif hasattr(component, "__dataclass"):
            gen_parser_from_dataclass(group, component.__dataclass())
    _annotate(parser, args)
    _package_first(parser, args)
    return parser


USAGE = "%(prog)s DATA --task TASK [--mask-policy POLICY] [--arch ARCH] [options]"


def _package_first(parser: argparse.ArgumentParser, args) -> None:
    """A short usage line; for a task of this package its groups first, else a list of its tasks and policies."""
    from fairseq.tasks import TASK_REGISTRY

    from ..masking import MASK_POLICY_REGISTRY

    parser.usage = USAGE
    ours = sorted(name for name, cls in TASK_REGISTRY.items() if cls.__module__.startswith("fairseq_maskplug."))
    if args.task not in ours:
        parser.description = (f"Tasks of fairseq-maskplug: {', '.join(ours)}. Mask policies: "
                               f"{', '.join(MASK_POLICY_REGISTRY)}. --task NAME --help shows that task's options, "
                               "its policies' and its criterion's first (fairseq-train's other tasks work too).")
        return
    parser.description = (f"--task {args.task}: its options, its mask policies' and its criterion's first; "
                          "fairseq's generic options after them.")
    first = (f"--task {args.task} options", "what any policy chooses", "the mask rate over training",
             "--mask-policy ", f"--criterion {getattr(args, 'criterion', None)} options")

    def rank(group) -> int:
        title = group.title or ""
        if group is parser._positionals:
            return -1
        return next((i for i, prefix in enumerate(first) if title.startswith(prefix)), len(first))

    parser._action_groups.sort(key=rank)  # stable: the order within each rank stays


def _annotate(parser: argparse.ArgumentParser, args) -> None:
    """Add to the help what the registries know now: every numeric option's declared range and every word
    option's choices (:mod:`.option_ranges`) and, for ``--mask-policy``, the policies registered (plugins included)."""
    from fairseq.criterions import CRITERION_DATACLASS_REGISTRY
    from fairseq.tasks import TASK_REGISTRY

    from ..masking import MASK_POLICY_REGISTRY, policy_option_dataclasses
    from ..common.option_ranges import declared_range

    sources = [getattr(TASK_REGISTRY.get(args.task), "__dataclass", None), *policy_option_dataclasses(),
               CRITERION_DATACLASS_REGISTRY.get(getattr(args, "criterion", None))]
    ranges = {f.name: declared_range(f) for dc in sources if dc is not None
              for f in dataclasses.fields(dc) if "range" in f.metadata}
    choices = {f.name: f.metadata["choices"] for dc in sources if dc is not None
               for f in dataclasses.fields(dc) if "choices" in f.metadata}
    for action in parser._actions:
        if action.dest in ranges and action.help:
            action.help += f"; in {ranges[action.dest]}"
        if action.dest in choices and action.help:
            action.help += f"; one of {', '.join(choices[action.dest])}"
        if action.dest == "mask_policy" and action.help:
            action.help += f"; registered now: {', '.join(MASK_POLICY_REGISTRY)}"


def training_help(argv: Sequence[str]) -> str:
    return training_parser(argv).format_help()
