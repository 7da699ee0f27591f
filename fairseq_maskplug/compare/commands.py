"""The command lines of one unit ``(arm, seed)`` of a plan: its continued pre-training, its fine-tuning and its
scoring, as ``fairseq-maskplug-train`` and ``fairseq-maskplug-evaluate`` take them.

The settings follow the recipes' (``recipes/lib.sh``'s ``pretrain`` and ``finetune``): Adam (0.9, 0.98),
eps 1e-6, weight decay 0.01, polynomial decay with 10% warm-up, blocks cut at sentence ends
(``--sample-break-mode complete``); the model's shape read from the plan's checkpoint
(:func:`~fairseq_maskplug.interop.release.model_options`); a stage starts from the plan's checkpoint (or the
arm's pre-trained one) with ``--finetune-from-model``, so that a stage cut short resumes from its own
``checkpoint_last.pt``. Every stage of a unit draws from the unit's seed.
"""

import struct
import sys
from pathlib import Path
from typing import List, Optional

from ..tools.cli import console_command as tool
from .plan import NOISY_TASK, UNIT, Arm, Plan

#: the optimiser and logging of every stage (the recipes' COMMON_ARGS, less the batch size and the device)
COMMON = ["--required-batch-size-multiple", "1", "--no-progress-bar", "--log-format", "json", "--log-interval", "10",
          "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01",
          "--clip-norm", "0.0"]


def device_options() -> List[str]:
    """``--fp16`` with a GPU, else ``--cpu``; one loader process on CPUs (the recipes')."""
    import torch

    return ["--fp16", "--num-workers", "2"] if torch.cuda.is_available() else ["--cpu", "--num-workers", "0"]


def device_name() -> str:
    """What a unit ran on, for the report's provenance: ``CPU`` or the GPU's name."""
    import torch

    return f"{torch.cuda.get_device_name(0)} (CUDA)" if torch.cuda.is_available() else "CPU"


def model_options(checkpoint: Path) -> List[str]:
    """The architecture options of ``checkpoint`` (a RoBERTa or BART of this project or a fairseq release)."""
    from ..interop.release import model_options as options, read_model_args

    return options(read_model_args(checkpoint))


#: the blocks' length where ``[pretrain] tokens_per_sample`` is 0: the recipes' MASKPLUG_TOKENS, cut to the model's
#: positions (:func:`block_length`)
DEFAULT_BLOCK = 128


def model_positions(model: List[str]) -> Optional[int]:
    """The positions of the model whose architecture options ``model`` are (``--max-positions``, BART's
    ``--max-source-positions``); None where they do not say."""
    for flag in ("--max-positions", "--max-source-positions"):
        if flag in model[:-1]:
            return int(model[model.index(flag) + 1])
    return None


def block_length(plan: Plan, model: Optional[List[str]] = None) -> int:
    """``[pretrain] tokens_per_sample``, or where it is 0 (the default) the model's positions, at most
    :data:`DEFAULT_BLOCK` (``model``: its architecture options, read from the plan's checkpoint where not given)."""
    if plan.pretrain.tokens_per_sample:
        return plan.pretrain.tokens_per_sample
    positions = model_positions(list(model) if model else model_options(plan.model))
    return min(DEFAULT_BLOCK, positions) if positions else DEFAULT_BLOCK


def split_size(prefix: Path) -> int:
    """Sentences in a binarized split (``PREFIX.idx``, fairseq's mmap index: the count at byte 18)."""
    with open(f"{prefix}.idx", "rb") as index:
        index.seek(18)
        return struct.unpack("<Q", index.read(8))[0]


def label_count(labelled: Path) -> int:
    """Classes of the labelled task: the labels in ``label/dict.txt``."""
    with open(labelled / "label" / "dict.txt", encoding="utf-8") as handle:
        return sum(1 for line in handle if line.strip() and not line.startswith("madeupword"))


def unit_dir(plan: Plan, arm: str, seed: int) -> Path:
    return plan.out / "units" / f"{arm}__seed{seed}"


def producers_dir(plan: Plan) -> Path:
    return plan.out / "producers"


def seed_dir(plan: Plan, seed: int) -> Path:
    """The folder of one seed's ``seed_produce`` commands (``{seed_dir}``): their outputs, logs and markers."""
    return producers_dir(plan) / f"seed{seed}"


def start_checkpoint(plan: Plan, arm: Arm, seed: int) -> Path:
    """Where the arm's fine-tuning starts: its unit's pre-trained checkpoint, or the plan's model."""
    return unit_dir(plan, arm.name, seed) / "pretrain" / "checkpoint_last.pt" if arm.task else plan.model


def filled(plan: Plan, command, seed: Optional[int] = None, model: List[str] = (), device: List[str] = (),
           arm: Optional[Arm] = None) -> List[str]:
    """A command's words with the plan's placeholders replaced: ``{corpus}`` by the corpus, ``{task}`` by the
    labelled task's folder (the plan's views of them, :mod:`.views`; ``{corpus}/..`` and ``{task}/..`` name the user's
    folders' parents, e.g. the demo data's folder the TLM plan reads), ``{model}`` by the plan's checkpoint, ``{out}`` by its output folder; with a ``seed``
    also ``{seed}``, ``{seed_dir}``, ``{unit:ARM}`` (that arm's unit of the seed) and the words
    ``{model_options}`` and ``{device}``; with an ``arm`` (a unit's own commands) ``{unit}`` and ``{start}``;
    always the sizes (:data:`~.plan.SIZE_PLACEHOLDERS`): ``{finetune_schedule}`` (:func:`finetune_schedule`, read
    only where a command names it: it counts the task's train split) and ``{tokens_per_sample}``
    (:func:`block_length`).
    ``{split}`` is left to the command."""
    from .views import given_parents

    # the parents before {corpus} and {task}: a view's parent is its folder's
    values = {**given_parents(plan), "{corpus}": plan.corpus, "{task}": plan.labelled, "{model}": plan.model,  # corpus: checked
              "{out}": plan.out}
    if seed is not None:
        values.update({"{seed}": seed, "{seed_dir}": seed_dir(plan, seed)})
    if arm is not None:
        values.update({"{unit}": unit_dir(plan, arm.name, seed), "{start}": start_checkpoint(plan, arm, seed)})
    words = []
    for word in command:
        if seed is not None and word in ("{model_options}", "{device}"):
            words += model if word == "{model_options}" else device
            continue
        if word == "{finetune_schedule}":
            words += finetune_schedule(plan)
            continue
        if "{tokens_per_sample}" in word:  # (read only where named: 0 reads the model's positions)
            word = word.replace("{tokens_per_sample}", str(block_length(plan, model)))
        for placeholder, value in values.items():
            word = word.replace(placeholder, str(value))
        if seed is not None:
            word = UNIT.sub(lambda match: str(unit_dir(plan, match.group(1), seed)), word)
        words.append(word)
    return words


def arm_words(plan: Plan, words, seed: int) -> List[str]:
    """An arm's options with ``{seed}`` replaced by the unit's seed (a track ``seed_produce`` wrote per seed) and
    ``{out}`` by the plan's output folder (data a produce command wrote there)."""
    return [word.replace("{seed}", str(seed)).replace("{out}", str(plan.out)) for word in words]


#: how the masked-LM tasks cut the corpus into blocks (the recipes' pretrain); a task that reads sentence_prediction
#: data (``tlm``) has no such options
BLOCKS = ["--sample-break-mode", "complete", "--shorten-method", "truncate"]
NO_BLOCKS = ("tlm",)


def keep_checkpoints(score_every: int, updates: int) -> List[str]:
    """The pre-training's interval checkpoints: every ``score_every`` updates, all kept (the curve's), or the last."""
    if score_every:
        return ["--save-interval-updates", str(score_every), "--keep-interval-updates", "-1"]
    return ["--save-interval-updates", str(updates), "--keep-interval-updates", "1"]


def curve_command(plan: Plan, arm: Arm, seed: int) -> List[str]:
    """Scoring of the arm's interval checkpoints (``[pretrain] score_every``) on the valid split of its
    pre-training data under one fixed set of random 15% masks
    (:mod:`~fairseq_maskplug.evaluation.evaluate_mlm`): ``{unit}/curve.jsonl``, one line per checkpoint."""
    unit = unit_dir(plan, arm.name, seed)
    checkpoints = sorted((unit / "pretrain").glob("checkpoint_*_*.pt"),
                         key=lambda path: int(path.stem.rsplit("_", 1)[1]))
    if not checkpoints:
        raise ValueError(f"unit {unit.name}: no interval checkpoint in {unit / 'pretrain'} to score (pre-trained "
                         "before [pretrain] score_every was set? delete the unit's folder to train it again)")
    return [sys.executable, "-m", "fairseq_maskplug.evaluation.evaluate_mlm", "--data", str(arm.data or plan.corpus),
            "--split", "valid", "--output", str(unit / "curve.jsonl"), *map(str, checkpoints)]


def pretrain_command(plan: Plan, arm: Arm, seed: int, model: List[str], device: List[str]) -> List[str]:
    """``fairseq-maskplug-train`` arguments of the arm's continued pre-training (its task's own criterion): on the
    arm's ``data`` or the corpus, from the plan's model or (``from_scratch``) a fresh one of its shape."""
    settings, updates = plan.pretrain, arm.updates
    start = [] if arm.from_scratch else ["--finetune-from-model", str(plan.model)]
    return [str(arm.data or plan.corpus), "--task", arm.task, *model, *COMMON, *device,
            "--tokens-per-sample", str(block_length(plan, model)), *([] if arm.task in NO_BLOCKS else BLOCKS),
            "--batch-size", str(settings.batch_size),
            "--lr-scheduler", "polynomial_decay", "--lr", str(settings.lr), "--warmup-updates", str(updates // 10 + 1),
            "--total-num-update", str(updates), "--max-update", str(updates), "--seed", str(arm.draws(seed)),
            "--save-dir", str(unit_dir(plan, arm.name, seed) / "pretrain"), "--no-epoch-checkpoints",
            *keep_checkpoints(settings.score_every, updates), *start, *settings.options, *arm_words(plan, arm.options, seed)]


#: what ``sentence_prediction`` needs beyond the task's name (fairseq's RoBERTa GLUE configs; fairseq leaves the
#: LM head unused there: ``--find-unused-parameters``); another fine-tuning task (``joint_mlm_classification``)
#: takes the plan's ``[finetune] options`` as it is
SENTENCE_PREDICTION = ["--init-token", "0", "--separator-token", "2", "--shorten-method", "truncate",
                       "--find-unused-parameters"]


def finetune_schedule(plan: Plan) -> List[str]:
    """The fine-tuning's batch and schedule (``--batch-size B --lr-scheduler polynomial_decay --lr LR
    --warmup-updates W --max-epoch E --total-num-update T``): ``[finetune]``'s batch size, learning rate and
    epochs, polynomial decay over ``epochs x (train sentences // batch + 1)`` updates with 10% (+1) warm-up (the
    recipes' schedule; a produce command takes it as ``{finetune_schedule}``, e.g. selective masking's tagger)."""
    settings = plan.finetune
    steps = settings.epochs * (split_size(plan.labelled / "input0" / "train") // settings.batch_size + 1)
    return ["--batch-size", str(settings.batch_size), "--lr-scheduler", "polynomial_decay", "--lr", str(settings.lr),
            "--warmup-updates", str(steps // 10 + 1), "--max-epoch", str(settings.epochs), "--total-num-update",
            str(steps)]  # (the order fine-tuning commands had: a unit's record compares its words)


def finetune_command(plan: Plan, arm: Arm, seed: int, model: List[str], device: List[str]) -> List[str]:
    """``fairseq-maskplug-train`` arguments of the arm's fine-tuning: ``[finetune] task`` with the criterion of
    the same name, the best valid accuracy kept; ``[finetune] options``, then the arm's ``finetune_options``. It
    starts from the arm's pre-trained checkpoint or the plan's model, or (``from_scratch`` without pre-training) from
    a fresh model of the model's shape."""
    if plan.finetune_command:  # the plan's own (its tool's arguments), then the arm's options
        return [*filled(plan, plan.finetune_command, seed, model, device, arm)[1:],
                *arm_words(plan, arm.finetune_options, seed)]
    settings = plan.finetune
    start = start_checkpoint(plan, arm, seed)
    task = arm.finetune_task or settings.task
    extra = SENTENCE_PREDICTION if task == "sentence_prediction" else []
    data = unit_dir(plan, arm.name, seed) / NOISY_TASK if arm.label_noise else plan.labelled  # scored on the clean
    return [str(data), "--task", task, "--criterion", task,
            "--num-classes", str(label_count(plan.labelled)), *extra, *model, *COMMON, *device,
            *finetune_schedule(plan), "--seed", str(arm.draws(seed)), "--best-checkpoint-metric", "accuracy",
            "--maximize-best-checkpoint-metric", "--save-dir", str(unit_dir(plan, arm.name, seed) / "finetune"),
            "--no-epoch-checkpoints", *([] if arm.from_scratch and not arm.task else ["--finetune-from-model",
                                                                                    str(start)]),
            *settings.options, *arm_words(plan, arm.finetune_options, seed)]


def flip_command(plan: Plan, arm: Arm, seed: int) -> List[str]:
    """``fairseq-maskplug-flip-labels`` arguments of a unit of an arm with ``label_noise``: the task's train labels
    flipped at that share, drawn from the unit's seed (every seed its own flips), into the unit's
    :data:`~.plan.NOISY_TASK`, which its fine-tuning reads."""
    return ["--data", str(plan.labelled), "--share", str(arm.label_noise), "--seed", str(arm.draws(seed)),
            "--out", str(unit_dir(plan, arm.name, seed) / NOISY_TASK)]


def evaluate_command(plan: Plan, arm: Arm, seed: int) -> List[str]:
    """The scoring's command line: the plan's ``[evaluate] command``, or ``fairseq-maskplug-evaluate`` of the best
    fine-tuned checkpoint on valid and test."""
    if plan.evaluate_command:
        words = filled(plan, plan.evaluate_command, seed, arm=arm)
        return [tool(words[0]), *words[1:]]
    unit = unit_dir(plan, arm.name, seed)
    return [sys.executable, "-m", "fairseq_maskplug.evaluation.evaluate",
            "--checkpoint", str(unit / "finetune" / "checkpoint_best.pt"), "--data", str(plan.labelled),
            "--split", "valid,test", "--output", str(unit / "result.{split}.json")]
