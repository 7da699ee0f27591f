"""Everything about a plan that can be checked before any training, each refusal one line naming the plan's key
or the arm and what is wrong (:class:`~.plan.PlanError`):

- the data: the unlabelled corpus is a binarized directory with ``train`` and ``valid``; the labelled task has
  ``input0/`` and ``label/`` with ``train``, ``valid`` and ``test``; both use one dictionary;
- the model: a RoBERTa or BART checkpoint whose dictionary the data uses;
- every arm's continued pre-training through the real parsers and the task's own checks
  (:func:`~fairseq_maskplug.commands.train_cli.checked_config`: the policy's options and their ranges), then its
  training and validation splits loaded as training would load them: a track the policy reads and the corpus
  lacks is named with the command that writes it; its blocks no longer than the model's positions (named by the
  plan key that sets them: ``[pretrain] tokens_per_sample`` or the option list that gives ``--tokens-per-sample``);
- every arm's fine-tuning (``[finetune]`` with the arm's ``finetune_options``) through the same parsers and,
  where its produce commands have run, its splits loaded (L3's track on the labelled task);
- every produce command that trains (``fairseq-maskplug-train``: selective masking's tagger) through the same
  parsers and checks, and every other command of this package (the producers, ``prepare-text``, ``retrieve``, ...)
  through its own parser, filled for the first seed, named by its list and number (``seed_produce command 3``).
"""

import dataclasses
import filecmp
from pathlib import Path
from typing import Callable, Iterable, Optional

from .commands import device_options, finetune_command, model_options, model_positions, pretrain_command
from .plan import Plan, PlanError
from .units import produced

SPLIT_FILES = (".idx", ".bin")


def _split_missing(prefix: Path) -> Optional[str]:
    for suffix in SPLIT_FILES:
        if not Path(f"{prefix}{suffix}").is_file():
            return f"{prefix}{suffix}"
    return None


def first_line(error: Exception) -> str:
    """A refusal's one line: the error's first line, or its type's name where it says nothing."""
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def check_data(plan: Plan) -> None:
    """The corpus and the labelled task are where the plan says, binarized, with one dictionary."""
    on_corpus = check_corpus(plan)
    if check_task(plan) and on_corpus and not filecmp.cmp(plan.corpus / "dict.txt", plan.labelled / "input0" / "dict.txt",
                                                         shallow=False):
        raise PlanError(f"{plan.path} [data]: the corpus's dict.txt and the task's input0/dict.txt differ: binarize "
                        "both with one dictionary (the model's)")


def check_corpus(plan: Plan) -> bool:
    """The corpus is where the plan says, binarized (where an arm pre-trains on it); whether one does."""
    where = f"{plan.path} [data]"
    on_corpus = any(arm.task and not arm.data for arm in plan.arms)
    if on_corpus:
        if not (plan.corpus / "dict.txt").is_file():
            raise PlanError(f"{where}: corpus {plan.corpus} has no dict.txt (a binarized corpus: "
                            "fairseq-maskplug-prepare-text or fairseq-preprocess --only-source)")
        for split in ("train", "valid"):
            missing = _split_missing(plan.corpus / split)
            if missing:
                raise PlanError(f"{where}: corpus has no {split} split ({missing} not found)")
    return on_corpus


def check_task(plan: Plan) -> bool:
    """The labelled task is where the plan says, binarized with train, valid and test; False where the plan's own
    fine-tuning command reads it (its parser and loading check the rest)."""
    where = f"{plan.path} [data]"
    if plan.finetune_command:
        if not plan.labelled.is_dir():
            raise PlanError(f"{where}: task {plan.labelled}: no such folder")
        return False
    if not plan.labelled.is_dir():
        raise PlanError(f"{where}: task {plan.labelled}: no such folder")
    if not (plan.labelled / "label").is_dir():
        raise PlanError(f"{where}: task {plan.labelled} has no label/ folder: a comparison fine-tunes and scores "
                        "a labelled task (fairseq-maskplug-prepare-text with labels writes input0/ and label/)")
    for part in ("input0", "label"):
        if not (plan.labelled / part / "dict.txt").is_file():
            raise PlanError(f"{where}: task {plan.labelled} has no {part}/dict.txt")
        for split in ("train", "valid", "test"):
            missing = _split_missing(plan.labelled / part / split)
            if missing:
                how = (" (the report scores test: fairseq-maskplug-prepare-text --labelled NAME TRAIN VALID TEST "
                       "writes it, e.g. from a held-out share of your labelled lines)") if split == "test" else ""
                raise PlanError(f"{where}: task has no {part} {split} split ({missing} not found){how}")
    return True


def check_model(plan: Plan) -> list:
    """The model is a RoBERTa or BART checkpoint (the labelled data's dictionary fits it, where the plan fine-tunes
    a classifier); its architecture options."""
    from ..tools.checkpoints import load_checked_state

    where = f"{plan.path} [model]: checkpoint"
    if not plan.model.is_file():
        raise PlanError(f"{where} {plan.model}: no such file")
    try:
        if not plan.finetune_command:  # a classifier's data: its dictionary is the model's
            load_checked_state(str(plan.model), str(plan.labelled))
        return model_options(plan.model)
    except (ValueError, OSError, KeyError) as error:
        raise PlanError(f"{where} {plan.model}: {error}") from None


def block_length_key(plan: Plan, arm) -> str:
    """The plan key that sets the arm's ``--tokens-per-sample``: the last option list giving it, else
    ``[pretrain] tokens_per_sample``."""
    if "--tokens-per-sample" in arm.options:
        return f"[arms.{arm.name}] options --tokens-per-sample"
    if "--tokens-per-sample" in plan.pretrain.options:
        return "[pretrain] options --tokens-per-sample"
    return "[pretrain] tokens_per_sample"


def check_block_length(plan: Plan, arm, cfg, model: list) -> None:
    """Refuse an arm whose blocks hold more tokens than the model has positions (fairseq stops at its first batch,
    minutes in, naming its own flag), naming the plan key and the largest value the model takes."""
    positions, tokens = model_positions(model), getattr(cfg.task, "tokens_per_sample", None)
    if positions is not None and tokens is not None and tokens > positions:
        raise PlanError(f"{plan.path} {block_length_key(plan, arm)}: {tokens} tokens per block, but the model "
                        f"{plan.model} has {positions} positions: give {positions} or fewer")


def check_arm_training(plan: Plan, arm, model: list, device: list, load: bool = True) -> None:
    """The arm's continued pre-training parses, passes its task's checks and (``load``) loads its splits: not
    before its ``produce`` commands have written the tracks it reads."""
    from ..commands.train_cli import checked_config
    from fairseq import tasks

    where = f"{plan.path} [arms.{arm.name}]"
    try:
        cfg = checked_config(pretrain_command(plan, arm, plan.seeds[0], model, device))
    except (ValueError, OSError, KeyError) as error:
        raise PlanError(f"{where}: {first_line(error)}") from None
    check_block_length(plan, arm, cfg, model)  # (from scratch too: a fresh model of the same shape)
    try:
        task = tasks.setup_task(cfg.task)
        for split in ("train", "valid") if load else ():
            task.load_dataset(split, combine=False, epoch=1)
    except (ValueError, OSError, KeyError) as error:
        raise PlanError(f"{where}: {first_line(error)}") from None


def check_arm_finetuning(plan: Plan, arm, model: list, device: list, load: bool = True) -> None:
    """The arm's fine-tuning parses, passes its task's checks and (``load``) loads its splits."""
    from ..commands.train_cli import checked_config
    from fairseq import tasks

    own = arm.finetune_options or arm.finetune_task
    where = f"{plan.path} [arms.{arm.name}] finetune" if own else f"{plan.path} [finetune]"
    try:
        cfg = checked_config(finetune_command(plan, arm, plan.seeds[0], model, device))
        task = tasks.setup_task(cfg.task)
        for split in ("train", "valid") if load else ():
            task.load_dataset(split, combine=False, epoch=1)
    except (ValueError, OSError, KeyError) as error:
        raise PlanError(f"{where}: {first_line(error)}") from None


def package_parser(command: str) -> Optional[Callable]:
    """The ``parse_args`` of one of this package's console commands (a producer's parser, or the module's own), or
    None for any other command (``python``, a tool of one's own: not checked)."""
    import importlib
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group="console_scripts", name=command) if ep.value.startswith("fairseq_maskplug")]
    if not found:
        return None
    module = importlib.import_module(found[0].module)
    producer = getattr(module, "PRODUCER", None)
    return producer.parser().parse_args if producer is not None else getattr(module, "parse_args", None)


def parse_problem(parse: Callable, argv: list) -> Optional[str]:
    """argparse's one-line error for ``argv`` (its last line on stderr), or None where it parses."""
    import contextlib
    import io

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            parse(argv)
    except SystemExit as stop:
        lines = said.getvalue().strip().splitlines()
        return lines[-1] if lines else f"exit status {stop.code}"
    return None


def check_produce_commands(plan: Plan, model: list, device: list) -> None:
    """Each command of this package in the plan's ``produce``, ``seed_produce`` and the arms' ``produce`` (filled as
    it will run, for the plan's first seed) parses: ``fairseq-maskplug-train`` also passes its task's checks. A
    misspelt option of a tagger or a scorer is refused before any work, not after the units it waits for."""
    from ..commands.train_cli import checked_config
    from .commands import filled

    lists = [("produce", plan.produce, None), ("seed_produce", plan.seed_produce, plan.seeds[0])]
    lists += [(f"[arms.{arm.name}] produce", arm.produce, None) for arm in plan.arms]
    for name, commands, seed in lists:
        for number, command in enumerate(commands, 1):
            argv = filled(plan, command, seed, model, device)[1:]
            try:
                if command[0] == "fairseq-maskplug-train":
                    checked_config(argv)
                    continue
                parse = package_parser(command[0])
                problem = parse_problem(parse, argv) if parse is not None else None
            except (ValueError, OSError, KeyError) as error:
                problem = first_line(error)
            if problem:
                raise PlanError(f"{plan.path} {name} command {number} ({command[0]}): {problem}")


def produced_data(plan: Plan, arm) -> bool:
    """Whether the arm pre-trains on data below the plan's output folder (``data = "{out}/..."``): a produce
    command writes it, so its stage is parsed only once that has run (it needs the data's dictionary)."""
    return arm.data is not None and plan.out.resolve() in Path(arm.data).resolve().parents


def check_plan(plan: Plan, arms: Optional[Iterable[str]] = None, say: Callable[[str], None] = lambda line: None) -> list:
    """Every check (module docstring) for ``arms`` (default: all); the model's architecture options."""
    check_data(plan)
    model = check_model(plan)
    device = device_options()
    check_produce_commands(plan, model, device)
    chosen = [plan.arm(name) for name in arms] if arms is not None else list(plan.arms)
    for arm in chosen:
        if arm.task and produced_data(plan, arm) and not produced(plan, arm):
            say(f"arm {arm.name}: its data {arm.data} is written by the produce commands: checked after "
                "them")
        elif arm.task:
            say(f"checking arm {arm.name}: {arm.task} {' '.join(arm.options)}".rstrip())
            check_arm_training(plan, arm, model, device, load=produced(plan, arm))
        # an arm with label_noise fine-tunes on the copy each unit's flip stage writes: its words are checked on the
        # clean task (the same files but the train labels)
        ready = produced(plan, arm)
        check_arm_finetuning(plan, dataclasses.replace(arm, label_noise=0.0) if arm.label_noise else arm, model,
                             device, load=ready)
    return model
