"""What each stage of a unit ran with, so that a unit is reused only for the plan and the data it ran with.

When a stage starts it writes ``UNIT/.ran/STAGE.json``: its command line with the plan's paths written as their
placeholders (``{out}``, ``{corpus}``, ``{task}``, ``{model}``; the tool and the device's options left out, so a
unit may move between machines and folders) and the fingerprints of what it reads (the binarized splits, the
tracks beside them and the dictionaries of its data folders, sampled as
:func:`~fairseq_maskplug.data.side_info.token_fingerprint` samples tokens; the plan's checkpoint likewise). Before a
unit runs, every stage it recorded is compared with what the plan gives now: a change refuses the run in one
line naming the unit, the stage and the first option or input that changed (:class:`UnitChanged`). The report
refuses to pair units whose scoring read different items (:func:`check_same_items`).
"""

import hashlib
import json
import re
from pathlib import Path
from typing import Dict, List, Optional

from ..common.atomic import write_text
from .plan import Plan, PlanError

RAN = ".ran"
#: the options a unit's commands take from the machine, not the plan (commands.device_options)
DEVICE_WORDS = {"--cpu": 0, "--fp16": 0, "--num-workers": 1}


class UnitChanged(PlanError):
    """A finished or part-finished unit whose plan or data has changed since it ran."""


def placeholders(plan: Plan, words: List[str]) -> List[str]:
    """``words`` less the tool and the device's options, the plan's paths written as their placeholders."""
    from .views import given_parents

    paths = [(str(plan.out), "{out}"), (str(plan.labelled), "{task}"), (str(plan.model), "{model}")]
    if plan.corpus is not None:
        paths.append((str(plan.corpus), "{corpus}"))
    paths += [(str(parent), name) for name, parent in given_parents(plan).items()]  # commands.filled's parents
    paths.sort(key=lambda pair: -len(pair[0]))  # the longest first: a folder inside another
    out, skip = [], 0
    for word in list(words)[1:]:
        if skip:
            skip -= 1
            continue
        if word in DEVICE_WORDS:
            skip = DEVICE_WORDS[word]
            continue
        for path, name in paths:
            word = word.replace(path, name)
        out.append(word)
    return out


def file_fingerprint(path: Path) -> str:
    """SHA-256 of a file's size and its bytes, a large one (a checkpoint) read in part
    (:func:`~fairseq_maskplug.data.side_info.sampled_digest`)."""
    from ..data.side_info import sampled_digest

    digest = hashlib.sha256(str(path.stat().st_size).encode())
    return sampled_digest(str(path), digest, chunks=64).hexdigest()[:16]


def read_by(name: str, splits: List[str], words: List[str]) -> bool:
    """Whether a stage whose command holds ``words`` reads the data file ``name`` of one of ``splits``: a dictionary,
    a split's tokens or labels (``SPLIT.bin``/``.idx``, a translation pair's ``SPLIT.SRC-TGT.LANG.bin``), or a
    track beside them (``SPLIT.TRACK.*``) that the command names (``--selective-track importance_s1``): a track
    that a producer writes later for another arm is not this stage's input."""
    if name.startswith("dict"):
        return True
    split, _, rest = name.partition(".")
    if split not in splits or not rest:
        return False
    if rest in ("bin", "idx") or re.fullmatch(r"[^.]+-[^.]+\.[^.]+\.(bin|idx)", rest):
        return True
    track = rest.split(".")[0]
    return any(track == word or word.endswith(f"/{track}") for word in words)


def folder_fingerprints(folder: Path, splits: List[str], label: str, words: List[str]) -> Dict[str, str]:
    """``{label/FILE: fingerprint}`` of what a stage (its command's ``words``) reads of a binarized data folder and
    its ``input0/`` and ``label/`` (sentence_prediction's): :func:`read_by`."""
    found = {}
    for sub in (folder, folder / "input0", folder / "label"):
        if not sub.is_dir():
            continue
        for path in sorted(sub.iterdir()):
            if path.is_file() and read_by(path.name, splits, words):
                found[f"{label}/{path.relative_to(folder)}"] = file_fingerprint(path)
    return found


class Fingerprints:
    """The fingerprints of a plan's inputs, each computed once."""

    def __init__(self, plan: Plan):
        self.plan, self.cache = plan, {}

    def of(self, key: str, compute) -> Dict[str, str]:
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]

    def data(self, folder: Path, splits: List[str], label: str, words: List[str]) -> Dict[str, str]:
        return self.of(f"{folder}|{','.join(splits)}|{label}|{' '.join(words)}",
                       lambda: folder_fingerprints(folder, splits, label, words))

    def model(self) -> Dict[str, str]:
        return self.of("model", lambda: {"{model}": file_fingerprint(self.plan.model)})


def stage_inputs(plan: Plan, arm, stage: str, words: List[str], prints: Fingerprints) -> Dict[str, str]:
    """What a stage of an arm's unit (its command's ``words``) reads, fingerprinted: pre-training its data's train
    and valid splits and the plan's checkpoint (unless from scratch); fine-tuning the task's train and valid splits
    (and the checkpoint where the arm does not pre-train); a label-noise unit's flip the task's train split; scoring
    the task's scored splits."""
    if stage == "pretrain":
        data = arm.data or plan.corpus
        label = "{task}" if arm.data == plan.labelled else "{corpus}" if data == plan.corpus else str(data)
        return {**prints.data(Path(data), ["train", "valid"], label, words),
                **({} if arm.from_scratch else prints.model())}
    if stage == "finetune":
        return {**prints.data(plan.labelled, ["train", "valid"], "{task}", words),
                **({} if arm.task or arm.from_scratch else prints.model())}
    if stage == "evaluate":
        return prints.data(plan.labelled, list(plan.splits), "{task}", words)
    if stage == "flip":  # the labels it flips (its share and seed are in its command)
        return prints.data(plan.labelled, ["train"], "{task}", words)
    return {}


def first_difference(was: List[str], now: List[str]) -> str:
    """The first word where two command lines differ, with the option it belongs to, in words."""
    for i, (a, b) in enumerate(zip(was, now)):
        if a != b:
            option = next((w for w in reversed(now[:i]) if w.startswith("--")), None) if not b.startswith("--") else None
            return f"{option + ' ' if option else ''}{a!r} is now {b!r}"
    longer, which = (was, "ran with") if len(was) > len(now) else (now, "now adds")
    return f"it {which} {' '.join(longer[min(len(was), len(now)):])!r}"


def check_stage(unit: Path, stage: str, command: List[str], inputs: Dict[str, str], who: Optional[str] = None,
                remove: Optional[str] = None) -> None:
    """Refuse (:class:`UnitChanged`) where the stage ran, or began, with another command or other inputs; ``who``
    and ``remove`` (what to remove to run it again) say it of a producers' folder (:func:`check_producer`)."""
    path = unit / RAN / f"{stage}.json"
    if not path.is_file():
        return
    who, remove = who or f"unit {unit.name}", remove or f"the unit's folder {unit}"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        raise UnitChanged(f"{who}: its record {path} is damaged: remove {remove} to run it again") from None
    again = f"remove {remove} to run it again under the plan as it is now, or give the plan back its earlier settings"
    if record.get("command") != command:
        raise UnitChanged(f"{who}: its {stage} ran with other settings "
                          f"({first_difference(record.get('command', []), command)}); {again}")
    changed = sorted(key for key in set(record.get("inputs", {})) | set(inputs)
                     if record.get("inputs", {}).get(key) != inputs.get(key))
    if changed:
        raise UnitChanged(f"{who}: its {stage} read {changed[0]} with other contents than the plan's data "
                          f"has now{f' (and {len(changed) - 1} more files)' if len(changed) > 1 else ''}; {again}")


def check_producer(folder: Path, name: str, commands: list, recorded, done: Path) -> None:
    """Refuse (:class:`UnitChanged`) where the produce commands ``NAME.1``, ``NAME.2``, ... of a producers' folder
    ran, or began, with other settings than ``commands`` give now (``recorded(command)``: its :func:`placeholders`'
    form, computed only for a command that recorded a run): a task copy with other flipped labels, a subset of
    another size or seed, a track of other options is never reused as if the plan had made it (issue 104, item 3).
    ``done``: the marker of them all (:func:`~.units.run_commands`')."""
    remove = (f"{done}, {folder / '.done' / name}.* and {folder / RAN / name}.*.json (what they ran; they rewrite "
              "their outputs)")
    for number, command in enumerate(commands, 1):
        if (folder / RAN / f"{name}.{number}.json").is_file():
            check_stage(folder, f"{name}.{number}", recorded(command), {}, who=f"{folder.name} {name}", remove=remove)


def record_stage(unit: Path, stage: str, command: List[str], inputs: Dict[str, str]) -> None:
    """Write what the stage runs with, before it runs (a stage cut short is checked as a finished one)."""
    (unit / RAN).mkdir(parents=True, exist_ok=True)
    write_text(str(unit / RAN / f"{stage}.json"), json.dumps({"command": command, "inputs": inputs}, indent=1) + "\n")


def scored_items(unit: Path) -> Optional[Dict[str, str]]:
    """The fingerprints of what the unit's scoring read (None for a unit scored before units recorded it)."""
    path = unit / RAN / "evaluate.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("inputs")
    except (OSError, json.JSONDecodeError):
        return None


def check_same_items(units: List[Path]) -> None:
    """Refuse to pair units whose scoring read different items (the task's scored splits changed between them)."""
    seen = [(unit, scored_items(unit)) for unit in units]
    seen = [(unit, items) for unit, items in seen if items is not None]
    for unit, items in seen[1:]:
        first, reference = seen[0]
        if items != reference:
            key = next(k for k in sorted(set(items) | set(reference)) if items.get(k) != reference.get(k))
            raise UnitChanged(f"units {first.name} and {unit.name} scored different items ({key} differs): the "
                              "task's data changed between them, and their outcomes cannot be paired; remove the "
                              "units scored on the old data and run them again")

