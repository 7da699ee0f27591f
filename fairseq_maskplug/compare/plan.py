"""A comparison plan: the file ``fairseq-maskplug-compare`` reads (TOML; ``docs/compare.md`` shows a commented
example; ``recipes/compare_plans/`` holds the five papers' stored comparisons as plans).

A plan names the data (a binarized unlabelled corpus and a labelled task, as ``fairseq-maskplug-prepare-text``
writes them), the model every arm starts from, the seeds, and the **arms**: each a continued pre-training stage
(a task, ``--mask-policy`` and its options, a number of updates; on other data or from scratch) or none, followed
by the fine-tuning (``[finetune]``, which an arm may extend) and the scoring. Commands that write what the arms
read run once (an arm's or the plan's ``produce``) or for each seed (``seed_produce``). Where the task is not a
sentence classifier, ``[finetune] command`` and ``[evaluate]`` are the plan's own. One arm is the **baseline**;
every other arm is compared to it over the same seeds and items (:mod:`fairseq_maskplug.evaluation.paired_comparison`).

Only the file's syntax, its keys and their types and ranges are read here (:func:`read_plan`, pure); whether the
options parse, the data exists and the dictionaries match is :mod:`.checks`'s work, before any training.
"""

import dataclasses
import math
import re
import tomllib
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..common.option_ranges import option, out_of_range, declared_range


#: an arm's name: a folder name and a table row, never an option
ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")


class PlanError(ValueError):
    """A plan refused before any work, in one line naming the file and the key (or the arm and option)."""


@dataclasses.dataclass
class PretrainSettings:
    """``[pretrain]``: the continued pre-training every arm with a stage shares (an arm may change ``task``,
    ``updates`` and add ``options``)."""

    task: str = option("guided_mlm", "the pre-training task (a fairseq or plugin task training a masked LM)")
    updates: int = option(400, "updates of each arm's continued pre-training", range="[1, inf)",
                          source="ours (the recipes' quickstart TaskPT length, recipes/selective_masking.sh)")
    lr: float = option(1e-3, "peak learning rate (polynomial decay, 10% warm-up)", range="(0, inf)",
                       source="ours (the recipes' MASKPLUG_PRETRAIN_LR)")
    tokens_per_sample: int = option(0, "tokens per block (at most the model's positions); 0: the model's positions, "
                                    "at most 128", range="[0, inf)",
                                    source="ours (the recipes' MASKPLUG_TOKENS, 128, cut to a smaller model's "
                                    "positions: QUICK=1's has 64)")
    batch_size: int = option(32, "sequences per batch", range="[1, inf)", source="ours (the recipes' MASKPLUG_BATCH)")
    score_every: int = option(0, "keep a checkpoint every this many updates and score each on the pre-training "
                              "data's valid split under one fixed set of random masks (validation loss against "
                              "updates, a diagnostic of ours; the report's curve table); 0: no curve", range="[0, inf)",
                              source="ours (off; recipes/fe_mlm.sh scores every FE_VALID_EVERY updates)")
    options: List[str] = dataclasses.field(default_factory=list, metadata={
        "help": "further fairseq-maskplug-train options of every arm's stage"})


@dataclasses.dataclass
class FinetuneSettings:
    """``[finetune]``: the fine-tuning and evaluation every arm ends with (an arm may add ``finetune_options``)."""

    task: str = option("sentence_prediction", "the fine-tuning task, trained with the criterion of the same name: "
                       "sentence_prediction, joint_mlm_classification (L3's and RTM's auxiliary MLM) or tlm "
                       "(TLM's stage 2)")
    epochs: int = option(3, "fine-tuning epochs; the checkpoint with the best valid accuracy is scored",
                         range="[1, inf)", source="ours (the recipes' SM_FINETUNE_EPOCHS)")
    lr: float = option(2e-4, "peak learning rate (polynomial decay, 10% warm-up)", range="(0, inf)",
                       source="ours (the recipes' MASKPLUG_FINETUNE_LR)")
    batch_size: int = option(32, "sentences per batch", range="[1, inf)", source="ours (the recipes' MASKPLUG_BATCH)")
    options: List[str] = dataclasses.field(default_factory=list, metadata={
        "help": "further fairseq-maskplug-train options of the fine-tuning"})


@dataclasses.dataclass
class ReportSettings:
    """``[report]``: the family the report reads together and the difference its verdicts size the design for
    (:mod:`fairseq_maskplug.evaluation.reading_rule`)."""

    family: List[List[str]] = dataclasses.field(default_factory=list, metadata={
        "help": "the pairs [A, B] compared (A − B), each on every compared split, with Holm's adjustment over them "
                "all; default: every arm − the baseline"})
    effect: float = option(2.0, "the difference (points) the verdicts say the seeds and items needed for",
                           range="(0, inf)", source="ours (the size of the papers' reported gains: Gu et al. 2020 "
                           "0.5 to 1.2 points, Yao et al. 2022 0.1 to 2.9)")


@dataclasses.dataclass(frozen=True)
class Arm:
    """One arm: ``task`` None for no continued pre-training (the model fine-tuned as it is)."""

    name: str
    task: Optional[str]
    updates: int
    options: Tuple[str, ...]
    #: commands that write the tracks the arm's policy reads, run once before its units (:data:`PLACEHOLDERS`)
    produce: Tuple[Tuple[str, ...], ...] = ()
    #: options the arm adds to ``[finetune]``'s (STL, RTM and L3 differ only there)
    finetune_options: Tuple[str, ...] = ()
    #: the arm's fine-tuning task where it is not ``[finetune]``'s (TLM's stage 2 against general-ft's)
    finetune_task: Optional[str] = None
    #: the pre-training stage's data where it is not the corpus (TLM's stage 1 reads the labelled task)
    data: Optional[Path] = None
    #: pre-train from a fresh initialisation of the model's shape, not from its weights (TLM); with no pre-training,
    #: fine-tune a fresh model (a classifier from scratch: what the model's own pre-training is worth)
    from_scratch: bool = False
    #: added to the seed every training stage of the arm's units draws from (``--seed``): an arm identical to
    #: another but for its offset is an independent replicate of it (a null control, issue 88); ``{seed}`` (the
    #: tracks' names) stays the unit's seed
    seed_offset: int = 0
    #: the share of the task's train labels its fine-tuning reads flipped (``fairseq-maskplug-flip-labels``, each unit's
    #: own stage ``flip``, drawn from the unit's seed, into :data:`NOISY_TASK`): a known harm, the positive control of
    #: issue 88, whose flips are redrawn in every seed (issue 101, item 4)
    label_noise: float = 0.0

    def draws(self, seed: int) -> int:
        """The seed the unit ``(this arm, seed)``'s training stages draw from."""
        return seed + self.seed_offset


@dataclasses.dataclass(frozen=True)
class Plan:
    """A read plan; paths are absolute (a relative path in the file is relative to the file's folder)."""

    path: Path
    name: str
    out: Path
    corpus: Optional[Path]  # None where no arm pre-trains and no produce command names it
    labelled: Path
    model: Path
    seeds: Tuple[int, ...]
    baseline: str
    arms: Tuple[Arm, ...]
    pretrain: PretrainSettings
    finetune: FinetuneSettings
    parallel: int
    #: commands run for each seed before that seed's units (selective masking's classifier -> tagger -> track)
    seed_produce: Tuple[Tuple[str, ...], ...] = ()
    #: commands run once before any unit, for every arm (TLM's retrieval, selection and binarized external data)
    produce: Tuple[Tuple[str, ...], ...] = ()
    #: ``[finetune] command``: the fine-tuning's whole command line where it is not a classifier's (BART's
    #: closed-book QA probe), :data:`FINETUNE_PLACEHOLDERS`
    finetune_command: Tuple[str, ...] = ()
    #: ``[evaluate] command``: the scoring's command line, writing ``{unit}/result.SPLIT.json`` for each split
    evaluate_command: Tuple[str, ...] = ()
    #: the splits every unit is scored on, and those whose differences the report reads (the first: the plot's)
    splits: Tuple[str, ...] = ("valid", "test")
    compared: Tuple[str, ...] = ("test",)
    #: ``[report]``: how the report reads the units
    report: "ReportSettings" = dataclasses.field(default_factory=lambda: ReportSettings())
    #: the user's corpus and task folders where the plan reads its own views of them (:mod:`.views`), else None
    given: Optional[Tuple[Optional[Path], Path]] = None

    def family(self) -> List[Tuple[str, str]]:
        """The pairs ``(A, B)`` the report reads as one family on every compared split: ``[report] family``, else
        every arm − the baseline."""
        if self.report.family:
            return [tuple(pair) for pair in self.report.family]
        return [(arm.name, self.baseline) for arm in self.arms if arm.name != self.baseline]

    def arm(self, name: str) -> Arm:
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise PlanError(f"{self.path}: no arm named {name!r} (arms: {', '.join(a.name for a in self.arms)})")

    def seed_units(self) -> List[str]:
        """The arms whose unit of a seed ``seed_produce`` reads (``{unit:ARM}``): run before it, seed by seed."""
        names = []
        for command in self.seed_produce:
            for word in command:
                names += [name for name in UNIT.findall(word) if name not in names]
        return names

    def units(self) -> List[Tuple[str, int]]:
        """Every ``(arm, seed)``, seed by seed: a run cut short has whole seeds to compare."""
        return [(arm.name, seed) for seed in self.seeds for arm in self.arms]


#: the keys a plan may hold, each table's with its type (dataclass tables read through :func:`_settings`)
TOP_KEYS = {"name": str, "out": str, "seeds": list, "baseline": str, "parallel": int, "data": dict, "model": dict,
            "pretrain": dict, "finetune": dict, "arms": dict, "seed_produce": list, "produce": list,
            "evaluate": dict, "report": dict}
EVALUATE_KEYS = {"command": list, "splits": list, "compared": list}
DATA_KEYS = {"corpus": str, "task": str}
MODEL_KEYS = {"checkpoint": str}
ARM_KEYS = {"pretrain": bool, "task": str, "updates": int, "options": list, "produce": list,
            "finetune_options": list, "finetune_task": str, "data": str, "from_scratch": bool, "seed_offset": int,
            "label_noise": float}
#: where a unit of an arm with ``label_noise`` writes and reads its noisy copy of the task (in the unit's folder)
NOISY_TASK = "noisy-task"
#: what a ``produce`` command's words may name: the corpus, the labelled task's folder, the plan's model, the
#: plan's output folder (where a produce command writes data an arm reads)
PLACEHOLDERS = ("{corpus}", "{task}", "{model}", "{out}")
#: what a ``seed_produce`` command may name besides: the seed, the seed's producers' folder, the folder of an
#: arm's unit of that seed (``{unit:ARM}``, run first) and, as whole words, the model's architecture options and
#: the device's (``--cpu``, or ``--fp16`` with a GPU)
SEED_PLACEHOLDERS = ("{seed}", "{seed_dir}", "{unit:ARM}", "{model_options}", "{device}")
#: what every produce command may name to size itself to the plan's data and settings (a tagger trained on the
#: labelled task as the arms are fine-tuned, a block as the arms' blocks): ``{finetune_schedule}`` the words of
#: the fine-tuning's batch and schedule (``--batch-size B --lr-scheduler polynomial_decay --lr LR
#: --warmup-updates W --max-epoch E --total-num-update T``, from ``[finetune]`` and the task's train split), and
#: ``{tokens_per_sample}`` ``[pretrain]``'s block length
SIZE_PLACEHOLDERS = ("{finetune_schedule}", "{tokens_per_sample}")
#: what an arm's ``options`` and ``finetune_options`` may name: the unit's seed (a track written per seed), the
#: plan's output folder (data a produce command wrote there)
OPTION_PLACEHOLDERS = ("{seed}", "{out}")
#: what ``[finetune] command`` may name besides: the unit's seed and folder, the checkpoint it starts from (the
#: arm's pre-trained one, or the plan's model), the model's architecture options and the device's
FINETUNE_PLACEHOLDERS = PLACEHOLDERS + ("{seed}", "{unit}", "{start}", "{model_options}", "{device}")
#: what ``[evaluate] command`` may name besides: the unit's seed and folder, and ``{split}``, left for the command
#: to fill (as ``fairseq-maskplug-evaluate --output result.{split}.json`` does)
EVALUATE_PLACEHOLDERS = PLACEHOLDERS + ("{seed}", "{unit}", "{split}")
#: words that expand to several words: they stand alone
WHOLE_WORDS = ("{model_options}", "{device}", "{finetune_schedule}")
PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_:.-]*\}")
UNIT = re.compile(r"\{unit:([^{}]+)\}")
DEFAULT_SEEDS = (1, 2, 3, 4, 5)


def _type_name(kind) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list",
            dict: "a table"}[kind]


def _check_table(where: str, table: dict, keys: Dict[str, type]) -> None:
    for key, value in table.items():
        if key not in keys:
            raise PlanError(f"{where}: unknown key {key!r} (known: {', '.join(keys)})")
        kind = keys[key]
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok:
            raise PlanError(f"{where}.{key}: must be {_type_name(kind)}, got {value!r}")


def _option_list(where: str, value) -> Tuple[str, ...]:
    if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        raise PlanError(f"{where}: must be a list of command-line words, e.g. [\"--mask-policy\", \"pmi\"]")
    return tuple(str(v) for v in value)


def _settings(where: str, table: dict, settings: type):
    """A ``[pretrain]``, ``[finetune]`` or ``[report]`` table as its dataclass, each value checked against its range."""
    fields = {f.name: f for f in dataclasses.fields(settings)}
    lists = ("options", "family")
    kinds = {name: (list if name in lists else float if f.type is float else f.type)
             for name, f in fields.items()}
    _check_table(where, table, kinds)
    values = {}
    for name, f in fields.items():
        if name not in table:
            values[name] = [] if name in lists else f.default
            continue
        value = table[name]
        if name == "options":
            value = list(_option_list(f"{where}.options", value))
        elif f.type is float:
            value = float(value)
            if not math.isfinite(value):
                raise PlanError(f"{where}.{name}: must be finite, got {value}")
        problem = out_of_range(name, value, declared_range(f))
        if problem:
            raise PlanError(f"{where}.{name} must lie in {f.metadata['range']}, got {value}")
        values[name] = value
    return settings(**values)


def _check_placeholders(where: str, words, allowed) -> None:
    """Every ``{name}`` in ``words`` is one of ``allowed`` (``{unit:ARM}`` for any arm); whole-word ones alone."""
    for word in words:
        for found in PLACEHOLDER.findall(word):
            known = found in allowed or ("{unit:ARM}" in allowed and UNIT.fullmatch(found))
            if not known:
                raise PlanError(f"{where}: unknown placeholder {found} in {word!r} (known: {', '.join(allowed)})")
            if found in WHOLE_WORDS and word != found:
                raise PlanError(f"{where}: {found} stands for several words: give it as a word of its own")


def uses_seed(arm: "Arm") -> bool:
    """Whether the arm's options name its unit's seed (a track ``seed_produce`` writes)."""
    return any("{seed}" in word for word in (*arm.options, *arm.finetune_options))


def _path(plan_file: Path, where: str, text: str) -> Path:
    if not text.strip():
        raise PlanError(f"{where}: an empty path")
    path = Path(text).expanduser()
    return path if path.is_absolute() else (plan_file.parent / path).resolve()


def _commands(where: str, listed, allowed) -> Tuple[Tuple[str, ...], ...]:
    """A list of produce commands, each a non-empty list of words whose placeholders are ``allowed``."""
    if not isinstance(listed, list) or not all(isinstance(command, list) and command for command in listed):
        raise PlanError(f"{where}: must be a list of commands, each a list of words, e.g. "
                        '[["fairseq-maskplug-pmi-units", "--data", "{corpus}", "--splits", "train,valid"]]')
    commands = tuple(_option_list(where, command) for command in listed)
    for command in commands:
        _check_placeholders(where, command, allowed)
    return commands


def _command(where: str, words, allowed) -> Tuple[str, ...]:
    """One command line (a list of words, its first a console command), its placeholders ``allowed``."""
    if not isinstance(words, list):
        raise PlanError(f"{where}: must be a list of words")
    command = _option_list(where, words)
    _check_placeholders(where, command, allowed)
    return command


def _read_evaluate(where: str, table, finetune_command: Tuple[str, ...]) -> dict:
    """``[evaluate]``: a scoring command of the plan's own, its splits and those compared (defaults:
    ``fairseq-maskplug-evaluate`` of the best checkpoint on valid and test, test compared). A fine-tuning
    command of the plan's own needs one: the default scores a classifier."""
    _check_table(where, table, EVALUATE_KEYS)
    if not table:
        if finetune_command:
            raise PlanError(f"{where}: [finetune] command needs an [evaluate] command that scores what it trains "
                            "(writing {unit}/result.SPLIT.json for each of its splits)")
        return {}
    if "command" not in table:
        raise PlanError(f"{where}: missing 'command'")
    splits = table.get("splits", [])
    named = all(isinstance(split, str) and ARM_NAME.match(split) for split in splits)
    if not splits or not named or len(set(splits)) != len(splits):
        raise PlanError(f"{where}.splits: must be a list of distinct split names, e.g. [\"seen\", \"heldout\"]")
    compared = table.get("compared", splits)
    if not compared or not set(compared) <= set(splits):
        raise PlanError(f"{where}.compared: {compared!r} must name some of the splits {splits!r}")
    return {"evaluate_command": _command(f"{where} command", table["command"], EVALUATE_PLACEHOLDERS),
            "splits": tuple(splits), "compared": tuple(compared)}


def _read_arm(path: Path, at: str, name: str, table, pretrain: PretrainSettings, labelled: Path, out: Path) -> Arm:
    """One ``[arms.NAME]`` table as an :class:`Arm` (``at``: where, for the errors; ``labelled``: the task's
    folder, what ``data = "{task}"`` names; ``out``: the plan's output folder, what ``data = "{out}/..."`` starts
    with: data a produce command writes there)."""
    if not isinstance(table, dict):
        raise PlanError(f"{at}: must be a table")
    if not ARM_NAME.match(name):
        raise PlanError(f"{at}: an arm's name must be letters, digits, '_', '.' or '-'")
    _check_table(at, table, ARM_KEYS)
    stage = table.get("pretrain", True)
    ignored = set(table) - {"pretrain", "produce", "finetune_options", "finetune_task", "seed_offset", "label_noise",
                            "from_scratch"}
    if not stage and ignored:
        raise PlanError(f"{at}: pretrain = false, so {', '.join(sorted(ignored))} would be ignored; remove them")
    updates = table.get("updates", pretrain.updates)
    if updates < 1:
        raise PlanError(f"{at}.updates must lie in [1, inf), got {updates}")
    if table.get("seed_offset", 0) < 0:
        raise PlanError(f"{at}.seed_offset must lie in [0, inf), got {table['seed_offset']}")
    noise = table.get("label_noise", 0.0)
    if not 0 <= noise <= 1:
        raise PlanError(f"{at}.label_noise must lie in [0, 1], got {noise}")
    for key in ("options", "finetune_options"):
        _check_placeholders(f"{at}.{key}", map(str, table.get(key, [])), OPTION_PLACEHOLDERS)
    return Arm(name, table.get("task", pretrain.task) if stage else None, updates if stage else 0,
               _option_list(f"{at}.options", table.get("options", [])) if stage else (),
               produce=_commands(f"{at}.produce", table.get("produce", []), PLACEHOLDERS + SIZE_PLACEHOLDERS),
               finetune_options=_option_list(f"{at}.finetune_options", table.get("finetune_options", [])),
               finetune_task=table.get("finetune_task"),
               data=_arm_data(path, f"{at}.data", table["data"], labelled, out) if "data" in table else None,
               from_scratch=table.get("from_scratch", False), seed_offset=table.get("seed_offset", 0),
               label_noise=noise)


def _placeholder_data(text: str) -> bool:
    """Whether an arm's ``data`` names a plan folder by placeholder: ``"{task}"`` or ``"{out}/REST"`` (resolved by
    :func:`_arm_data`, kept as written by a ``--set``)."""
    return text == "{task}" or (text.startswith("{out}/") and bool(text[len("{out}/"):].strip("/")))


def _arm_data(path: Path, where: str, text: str, labelled: Path, out: Path) -> Path:
    """An arm's ``data``: ``"{task}"`` (the labelled task's folder), ``"{out}/REST"`` (below the plan's output
    folder, written by a produce command) or a path."""
    if not _placeholder_data(text):
        return _path(path, where, text)
    return labelled if text == "{task}" else out / text[len("{out}/"):]


def _read_commands(where: str, raw: dict, arms: List[Arm]) -> Dict[str, Tuple[Tuple[str, ...], ...]]:
    """The plan's ``produce`` and ``seed_produce``; a ``{unit:ARM}`` names an arm that needs no per-seed track."""
    commands = {"produce": _commands(f"{where}: produce", raw.get("produce", []), PLACEHOLDERS + SIZE_PLACEHOLDERS),
                "seed_produce": _commands(f"{where}: seed_produce", raw.get("seed_produce", []),
                                          PLACEHOLDERS + SEED_PLACEHOLDERS + SIZE_PLACEHOLDERS)}
    by_name = {arm.name: arm for arm in arms}
    for command in commands["seed_produce"]:
        for unit_arm in (found for word in command for found in UNIT.findall(word)):
            if unit_arm not in by_name:
                raise PlanError(f"{where}: seed_produce names {{unit:{unit_arm}}}, not an arm")
            if uses_seed(by_name[unit_arm]):
                raise PlanError(f"{where}: seed_produce reads {{unit:{unit_arm}}}, whose options need "
                                "seed_produce's tracks ({seed}): it would wait on itself")
    seeded = [arm.name for arm in arms if uses_seed(arm)]
    if seeded and not commands["seed_produce"]:
        raise PlanError(f"{where}: arm {seeded[0]} names {{seed}} in its options, but no seed_produce command "
                        "writes a track per seed")
    return commands


#: keys whose value is a folder or file: relative in the file, relative to the file's folder; relative in a
#: ``--set``, relative to the current folder (``ARM``: any arm)
PATH_KEYS = ("out", "data.corpus", "data.task", "model.checkpoint", "arms.ARM.data")


def _key_parts(key: str) -> List[str]:
    """A dotted key's parts; an arm's name may hold dots (``arms.a.b.options`` is arm ``a.b``'s options)."""
    parts = key.split(".")
    if parts[0] == "arms" and len(parts) > 3:
        parts = ["arms", ".".join(parts[1:-1]), parts[-1]]
    return parts


def parse_setting(text: str, cwd: Path) -> Tuple[str, object, str]:
    """One ``--set KEY=VALUE``: the dotted key, its value, and the setting as one word for a unit's command line.

    The value is read as a TOML value where it is one (``3``, ``1e-3``, ``true``, ``["--mask-policy", "pmi"]``),
    else as text. A path key's (:data:`PATH_KEYS`) relative value is made absolute from ``cwd``, so the word
    means the same from any folder; ``{task}`` and ``{out}/...`` (an arm's data: the labelled task, the plan's
    output) stay as they are."""
    key, sep, value_text = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise PlanError(f"--set {text}: must be KEY=VALUE with a dotted key, e.g. --set finetune.epochs=3")
    try:
        value = tomllib.loads(f"v = {value_text}")["v"]
    except tomllib.TOMLDecodeError:
        value = value_text
    parts = _key_parts(key)
    if ".".join(["arms", "ARM", parts[-1]] if parts[0] == "arms" and len(parts) == 3 else parts) in PATH_KEYS:
        value = value if isinstance(value, str) else value_text
        if value.strip() and not _placeholder_data(value) and not Path(value).expanduser().is_absolute():
            value = str((cwd / Path(value).expanduser()).resolve())
        value_text = value
    return key, value, f"{key}={value_text}"


def apply_setting(raw: dict, key: str, value) -> None:
    """Set the dotted ``key`` of the plan's table ``raw`` to ``value`` (the tables on the way made as needed);
    whether the key is known and the value right is :func:`read_plan`'s check, as for a key in the file."""
    parts = _key_parts(key)
    table = raw
    for depth, part in enumerate(parts[:-1]):
        table = table.setdefault(part, {})
        if not isinstance(table, dict):
            raise PlanError(f"--set {key}: {'.'.join(parts[:depth + 1])} is not a table")
    table[parts[-1]] = value


def keep_arms(raw: dict, names: Sequence[str]) -> None:
    """Keep only the arms ``names`` of the plan's table ``raw`` (``--arms``), and the pairs of ``[report] family``
    that lie within them; an unknown name, or a family left with no pair, is refused."""
    arms = raw.get("arms")
    if not isinstance(arms, dict):
        return  # (read_plan names the missing [arms])
    unknown = [name for name in names if name not in arms]
    if unknown:
        raise PlanError(f"--arms {unknown[0]}: no such arm (arms: {', '.join(arms)})")
    if len(set(names)) < 2:
        raise PlanError(f"--arms {' '.join(names)}: a comparison needs at least two arms, got {len(set(names))}")
    if raw.get("baseline") not in names:
        raise PlanError(f"--arms {' '.join(names)}: the baseline {raw.get('baseline')!r} is not among them (add it, or "
                        "--set baseline=ARM)")
    raw["arms"] = {name: table for name, table in arms.items() if name in names}
    family = raw.get("report", {}).get("family") if isinstance(raw.get("report"), dict) else None
    if isinstance(family, list) and family:
        kept = [pair for pair in family if isinstance(pair, list) and all(arm in names for arm in pair)]
        if not kept:
            raise PlanError(f"--arms {' '.join(names)}: no pair of [report] family lies within them (family: "
                            f"{family!r})")
        raw["report"]["family"] = kept


def read_plan(path, overrides: Optional[dict] = None, settings=(), arms: Sequence[str] = ()) -> Plan:
    """The plan in the TOML file ``path`` (``overrides``: top-level keys given on the command line, e.g.
    ``{"seeds": [1, 2]}``; ``settings``: ``(key, value)`` of each ``--set``, :func:`parse_setting`; ``arms``: only
    these arms, :func:`keep_arms`), or a :class:`PlanError` naming the file and the key."""
    path = Path(path).resolve()
    try:
        with open(path, "rb") as handle:
            raw = tomllib.load(handle)
    except FileNotFoundError:
        raise PlanError(f"{path}: no such plan file") from None
    except tomllib.TOMLDecodeError as error:  # two arms with one name land here: "Cannot overwrite a value"
        raise PlanError(f"{path}: not a valid plan (TOML): {error}") from None
    for key, value in settings:
        apply_setting(raw, key, value)
    raw.update(overrides or {})
    if arms:
        keep_arms(raw, arms)
    where = str(path)
    _check_table(where, raw, TOP_KEYS)
    for key in ("data", "model", "baseline", "arms"):
        if key not in raw:
            raise PlanError(f"{where}: missing {'[' + key + ']' if key in ('data', 'model', 'arms') else key!r}")
    _check_table(f"{where} [data]", raw["data"], DATA_KEYS)
    _check_table(f"{where} [model]", raw["model"], MODEL_KEYS)
    for table, key in (("data", "task"), ("model", "checkpoint")):
        if key not in raw[table]:
            raise PlanError(f"{where} [{table}]: missing {key!r}")
    name = raw.get("name", path.stem)
    if not ARM_NAME.match(name):
        raise PlanError(f"{where}: name {name!r} must be letters, digits, '_', '.' or '-'")
    seeds = raw.get("seeds", list(DEFAULT_SEEDS))
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in seeds):
        raise PlanError(f"{where}: seeds must be a non-empty list of positive integers, got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise PlanError(f"{where}: seeds {seeds!r} repeat a seed")
    parallel = raw.get("parallel", 1)
    if parallel < 1:
        raise PlanError(f"{where}: parallel must be at least 1, got {parallel}")
    pretrain = _settings(f"{where} [pretrain]", raw.get("pretrain", {}), PretrainSettings)
    finetune_table = dict(raw.get("finetune", {}))
    finetune_command = _command(f"{where} [finetune] command", finetune_table.pop("command", []),
                                FINETUNE_PLACEHOLDERS)
    if finetune_command and finetune_command[0] != "fairseq-maskplug-train":
        raise PlanError(f"{where} [finetune] command: must start with fairseq-maskplug-train (its options are checked "
                        f"by its parser before any work), not {finetune_command[0]!r}")
    if finetune_command and finetune_table:
        raise PlanError(f"{where} [finetune]: command is the whole fine-tuning, so {', '.join(sorted(finetune_table))} "
                        "would be ignored; remove them")
    finetune = _settings(f"{where} [finetune]", finetune_table, FinetuneSettings)
    evaluate = _read_evaluate(f"{where} [evaluate]", raw.get("evaluate", {}), finetune_command)
    labelled = _path(path, f"{where} [data]: task", raw["data"]["task"])
    out = _path(path, f"{where}: out", raw.get("out", name))
    arms = [_read_arm(path, f"{where} [arms.{arm_name}]", arm_name, table, pretrain, labelled, out)
            for arm_name, table in raw["arms"].items()]
    if len(arms) < 2:
        raise PlanError(f"{where}: a comparison needs at least two arms, got {len(arms)}")
    commands = _read_commands(where, raw, arms)
    fresh = [arm for arm in arms if arm.from_scratch and not arm.task]
    if finetune_command and fresh:
        raise PlanError(f"{where}: [finetune] command is the whole fine-tuning, starting from {{start}}, so arm "
                        f"{fresh[0].name}'s from_scratch without pre-training would be ignored")
    for key in ("finetune_task", "seed_offset", "label_noise"):
        if finetune_command and any(getattr(arm, key) for arm in arms):
            raise PlanError(f"{where}: [finetune] command is the whole fine-tuning, so arm "
                            f"{next(a.name for a in arms if getattr(a, key))}'s {key} would be ignored")
    corpus = raw["data"].get("corpus")
    needs = [f"arm {a.name}" for a in arms
             if (a.task and not a.data) or any("{corpus}" in w for c in a.produce for w in c)]
    needs += [key for key in ("produce", "seed_produce") if any("{corpus}" in w for c in commands[key] for w in c)]
    if corpus is None and needs:
        raise PlanError(f"{where} [data]: missing 'corpus' ({needs[0]} uses it: a pre-training stage or a "
                        "produce command)")
    short = [a.name for a in arms if a.task and pretrain.score_every > a.updates]
    if short:
        raise PlanError(f"{where} [pretrain]: score_every {pretrain.score_every} is more than arm {short[0]}'s "
                        f"{next(a.updates for a in arms if a.name == short[0])} updates: no checkpoint to score")
    baseline = raw["baseline"]
    if baseline not in {a.name for a in arms}:
        raise PlanError(f"{where}: baseline {baseline!r} is not an arm (arms: {', '.join(a.name for a in arms)})")
    report = _settings(f"{where} [report]", raw.get("report", {}), ReportSettings)
    names = {a.name for a in arms}
    for pair in report.family:
        if (not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(x, str) and x in names for x in pair)
                or pair[0] == pair[1]):
            raise PlanError(f"{where} [report] family: {pair!r} must be two different arms [A, B] (arms: "
                            f"{', '.join(sorted(names))})")
    return Plan(path=path, name=name, out=out,
                corpus=_path(path, f"{where} [data]: corpus", corpus) if corpus is not None else None,
                labelled=labelled,
                model=_path(path, f"{where} [model]: checkpoint", raw["model"]["checkpoint"]),
                seeds=tuple(seeds), baseline=baseline, arms=tuple(arms), pretrain=pretrain, finetune=finetune,
                parallel=parallel, seed_produce=commands["seed_produce"], produce=commands["produce"],
                finetune_command=finetune_command, report=report, **evaluate)
