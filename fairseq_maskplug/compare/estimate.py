"""What a plan's units will take on this machine, said before any of them runs (issue 106, item 2).

Each distinct training stage is *probed*: its own ``fairseq-maskplug-train`` command line, run for
:data:`PROBE_UPDATES` updates with nothing saved, logging every update, at the share of the cores a unit will have.
The times at which its update lines arrive give three figures (:class:`StageSpeed`): the start (process start to
the first update's end: imports, data, model), the seconds of one update after it, and the end (last update to the
process's exit: one validation pass). A stage of ``U`` updates over ``E`` epochs then takes about
``start + (U - 1) x update + E x end``; the scoring, about a start and one validation pass per split scored.

A stage that ran before in another unit with the same command but for its unit's folder, seed and start (a
fine-tuning of arm ``none`` for the same fine-tuning of arm ``taskpt``; a scoring of any arm) is estimated from its
measured times instead (:func:`measured_stages`); stages that neither ran nor are ``fairseq-maskplug-train`` (a
plan's own tool) are not estimated, and the figures say which. Stages with the same command line but for their
data, output folder, seed and starting checkpoint are probed once (a fine-tuning from an arm's pre-trained
checkpoint is probed from the plan's model: the same shape).
"""

import json
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from .commands import split_size
from .plan import Plan
from .units import parse_unit, stage_seconds, thread_share, unit_dir, unit_stages

#: updates of each probe: the first one's time is the start's (allocations, first batches); the others are timed
PROBE_UPDATES = 5

#: options whose values do not change what one update costs: the probe of one stage stands for all such stages
PER_UNIT_OPTIONS = ("--save-dir", "--seed", "--finetune-from-model")


@dataclass(frozen=True)
class StageSpeed:
    """A probe's timings in seconds: ``start`` (process start to the first update's end), ``update`` (one update
    after it), ``end`` (last update to exit: a validation pass and the process's teardown)."""

    start: float
    update: float
    end: float

    def stage(self, updates: int, epochs: int) -> float:
        """Seconds of a stage of ``updates`` updates and ``epochs`` validations."""
        if updates < 1 or epochs < 1:
            raise ValueError(f"a stage needs at least one update and one epoch, got {updates} and {epochs}")
        return self.start + (updates - 1) * self.update + epochs * self.end


def value_at(argv: Sequence[str], flag: str) -> Optional[int]:
    """The index of the value after the last ``flag`` in ``argv`` (argparse's: the last one given wins), or None."""
    at = [i for i, word in enumerate(argv[:-1]) if word == flag]
    return at[-1] + 1 if at else None


def option_value(argv: Sequence[str], flag: str) -> Optional[str]:
    """The value after the last ``flag`` in ``argv``, or None."""
    at = value_at(argv, flag)
    return None if at is None else argv[at]


def probe_key(argv: Sequence[str]) -> tuple:
    """``argv`` (a training stage's ``[tool, data, options...]``) less its data and :data:`PER_UNIT_OPTIONS`: two
    stages with one key cost the same per update."""
    words, skip = [], False
    for word in argv[2:]:
        if skip:
            skip = False
        elif word in PER_UNIT_OPTIONS:
            skip = True
        else:
            words.append(word)
    return (argv[0], *words)


def stage_size(argv: Sequence[str]) -> tuple:
    """``(updates, epochs)`` of a training stage: ``--max-update``, else ``--total-num-update`` (the fine-tuning's
    schedule length); ``--max-epoch`` or 1."""
    updates = option_value(argv, "--max-update") or option_value(argv, "--total-num-update")
    if updates is None or int(updates) < 1:
        raise ValueError("the stage names no --max-update or --total-num-update")
    return int(updates), int(option_value(argv, "--max-epoch") or 1)


def probe_command(argv: Sequence[str], model: Path, folder: str) -> List[str]:
    """The probe of stage ``argv``: :data:`PROBE_UPDATES` updates, every one logged, nothing saved (``folder``: a
    scratch save folder); a ``--finetune-from-model`` not written yet (an arm's pre-trained checkpoint) is the plan's
    ``model``, whose shape it has."""
    words = list(argv)
    start = value_at(words, "--finetune-from-model")
    if start is not None and not Path(words[start]).is_file():
        words[start] = str(model)
    return [*words, "--max-update", str(PROBE_UPDATES), "--no-save", "--save-dir", folder,
            "--log-format", "json", "--log-interval", "1", "--no-progress-bar"]


def probe(argv: Sequence[str], env: Optional[dict] = None) -> StageSpeed:
    """Run ``argv`` (a :func:`probe_command`) and time the arrival of its update lines; ValueError with the last
    line of its output where it fails or logs fewer than two updates."""
    started = time.monotonic()
    process = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=dict(env or os.environ, PYTHONUNBUFFERED="1"), errors="replace")
    arrivals, last = [], ""
    for line in process.stdout:
        if "| train_inner |" in line:
            arrivals.append(time.monotonic())
        elif line.strip():
            last = line.strip()
    code = process.wait()
    ended = time.monotonic()
    if code != 0 or len(arrivals) < 2:
        raise ValueError(f"exit status {code}, {len(arrivals)} update(s) logged: {last[-200:]}")
    return StageSpeed(start=arrivals[0] - started, update=(arrivals[-1] - arrivals[0]) / (len(arrivals) - 1),
                      end=ended - arrivals[-1])


def scoring_seconds(plan: Plan, finetune: StageSpeed) -> float:
    """The scoring stage (``fairseq-maskplug-evaluate`` on each split): a start (the fine-tuning's, less its first
    update) and a pass over each split at the fine-tuning's validation speed (its ``end``, a pass over valid)."""
    valid = split_size(plan.labelled / "input0" / "valid")
    items = sum(split_size(plan.labelled / "input0" / split) for split in plan.splits)
    return max(0.0, finetune.start - finetune.update) + finetune.end * items / max(1, valid)


def measured(plan: Plan, units: Sequence[str]) -> Dict[str, float]:
    """``{arm: mean wall seconds of a unit}`` over the arm's units outside ``units`` whose every stage was timed
    (through the scoring)."""
    times = {}
    for arm, seed in plan.units():
        seconds = stage_seconds(plan, arm, seed)
        if "evaluate" in seconds and f"{arm}:{seed}" not in units:
            times.setdefault(arm, []).append(sum(seconds.values()))
    return {arm: sum(values) / len(values) for arm, values in times.items()}


def stage_key(plan: Plan, arm: str, seed: int, stage: str, argv: Sequence[str]) -> tuple:
    """What a stage's cost depends on: a training stage's :func:`probe_key`; another stage's name and command with
    its unit's folder written ``{unit}`` and its ``--seed`` left out (the scoring of every arm has one key)."""
    if is_training(argv):
        return probe_key(argv)
    folder, words, skip = str(unit_dir(plan, arm, seed)), [], False
    for word in argv:
        if skip:
            skip = False
        elif word == "--seed":
            skip = True
        else:
            words.append(word.replace(folder, "{unit}"))
    return (stage, *words)


def measured_stages(plan: Plan, model: List[str], device: List[str]) -> Dict[tuple, float]:
    """``{stage_key: mean wall seconds}`` over every timed stage of the plan's units (finished or not)."""
    times = {}
    for arm, seed in plan.units():
        seconds = stage_seconds(plan, arm, seed)
        if not seconds:
            continue
        for stage, argv in unit_stages(plan, plan.arm(arm), seed, model, device):
            if stage in seconds:
                times.setdefault(stage_key(plan, arm, seed, stage, argv), []).append(seconds[stage])
    return {key: sum(values) / len(values) for key, values in times.items()}


@dataclass
class Estimate:
    """Seconds per unit (None: not estimated, with ``unknown[unit]`` saying why), and where they came from."""

    seconds: Dict[str, Optional[float]]
    unknown: Dict[str, str]
    sources: Dict[str, str]  # arm -> "measured" (stages timed in earlier units), "probed", or "measured and probed"

    def total(self, parallel: int) -> float:
        """Wall seconds of the estimated units, ``parallel`` at a time (their sum over ``parallel``)."""
        return sum(s for s in self.seconds.values() if s is not None) / parallel

    def estimated(self) -> int:
        """How many units have an estimate."""
        return sum(s is not None for s in self.seconds.values())

    def to_json(self, parallel: int) -> dict:
        return {"units_s": {unit: None if s is None else round(s, 1) for unit, s in self.seconds.items()},
                "unknown": self.unknown, "sources": self.sources, "parallel": parallel,
                "total_s": round(self.total(parallel), 1)}


def estimate_units(plan: Plan, units: Sequence[str], model: List[str], device: List[str], parallel: int,
                   say: Callable[[str], None] = print) -> Estimate:
    """The estimate of ``units`` (``ARM:SEED``), stage by stage: a stage that ran before in another unit
    (:func:`stage_key`) from its measured times, else from a probe (one per distinct training stage, ``parallel`` at
    a time, each at a unit's share of the cores); a unit's stages that finished before count nothing."""
    known = measured_stages(plan, model, device)
    stages, left = {}, {}  # unit -> [(stage, argv, key)]: all its stages, the ones left to run
    for unit in units:
        arm, seed = parse_unit(unit)
        done = unit_dir(plan, arm, seed) / ".done"
        stages[unit] = [(stage, argv, stage_key(plan, arm, seed, stage, argv))
                        for stage, argv in unit_stages(plan, plan.arm(arm), seed, model, device)]
        left[unit] = [item for item in stages[unit] if not (done / item[0]).exists()]
    keys = {}  # the training stages left and not measured, and the fine-tuning whose speed sizes a scoring left
    for unit in units:
        unmeasured = {stage for stage, _, key in left[unit] if key not in known}
        if unmeasured - {"finetune", "pretrain"}:
            unmeasured.add("finetune")
        for stage, argv, key in stages[unit]:
            if is_training(argv) and stage in unmeasured:
                keys.setdefault(key, argv)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", thread_share(parallel))
    speeds, failures = {}, {}
    if keys:
        say(f"[estimate] probing {len(keys)} training stage(s), {PROBE_UPDATES} updates each, {parallel} at a time")
        with tempfile.TemporaryDirectory(prefix="maskplug-probe-") as scratch:
            def one(item):
                index, (key, argv) = item
                try:
                    speeds[key] = probe(probe_command(argv, plan.model, str(Path(scratch) / str(index))), env)
                except (ValueError, OSError) as error:
                    failures[key] = str(error)
            with ThreadPoolExecutor(max_workers=parallel) as pool:
                list(pool.map(one, enumerate(keys.items())))
    out = Estimate({}, {}, {})
    for unit in units:
        arm = parse_unit(unit)[0]
        finetune = speeds.get(next(key for stage, _, key in stages[unit] if stage == "finetune"))
        total, how = 0.0, set()
        for stage, argv, key in left[unit]:
            if key in known:
                total += known[key]
                how.add("measured")
                continue
            how.add("probed")
            if stage == "evaluate" and finetune is not None and is_scoring(argv):
                total += scoring_seconds(plan, finetune)
            elif stage == "flip" and finetune is not None:  # a process's start, the labels read and written
                total += max(0.0, finetune.start - finetune.update)
            elif key in speeds and is_training(argv):
                total += speeds[key].stage(*stage_size(argv))
            else:
                out.unknown[unit] = (f"{stage}: its probe failed ({failures[key]})" if key in failures else
                                     f"{stage}: its command is the plan's own, and no unit has run it yet")
                total = None
                break
        out.seconds[unit] = total
        named = " and ".join(sorted(how)) or "measured"
        if out.sources.get(arm, named) != named:
            named = "measured and probed"
        out.sources[arm] = named
    return out


#: the module of the plugin's scoring stage (:func:`~.commands.evaluate_command`)
SCORING = "fairseq_maskplug.evaluation.evaluate"


def is_scoring(argv: Sequence[str]) -> bool:
    """Whether a stage's command is the plugin's scoring (``fairseq-maskplug-evaluate``, or the module the plan's
    default scoring runs)."""
    return Path(argv[0]).name == "fairseq-maskplug-evaluate" or SCORING in argv


def is_training(argv: Sequence[str]) -> bool:
    """Whether a stage's command is ``fairseq-maskplug-train`` (what a probe can time)."""
    return Path(argv[0]).name == "fairseq-maskplug-train"


def duration(seconds: float) -> str:
    """``seconds`` in words: seconds under 10 minutes, else minutes."""
    return f"{seconds:.0f} s" if seconds < 600 else f"{seconds / 60:.1f} min"


def describe(found: Estimate, parallel: int, budget: Optional[float] = None) -> List[str]:
    """Lines saying the estimate: each arm's seconds per unit and where they came from, the total ``parallel`` at a
    time, and what ``budget`` (seconds) leaves out."""
    lines, arms = [], {}
    for unit, seconds in found.seconds.items():
        arms.setdefault(parse_unit(unit)[0], []).append(seconds)
    for arm, values in arms.items():
        known = [v for v in values if v is not None]
        if len(known) < len(values):
            why = next(found.unknown[u] for u in found.seconds if parse_unit(u)[0] == arm and u in found.unknown)
            lines.append(f"[estimate] {arm}: {len(values) - len(known)} unit(s) not estimated ({why})")
        if known:
            lines.append(f"[estimate] {arm}: {len(known)} unit(s), about {duration(max(known))} each "
                         f"({found.sources[arm]})")
    total, estimated = found.total(parallel), found.estimated()
    if not estimated:
        lines.append(f"[estimate] none of the {len(found.seconds)} unit(s) estimated; the first finished units' "
                     "stage times estimate the others")
        return lines
    some = "" if estimated == len(found.seconds) else \
        f" (the {estimated} estimated of {len(found.seconds)}; the others not included)"
    lines.append(f"[estimate] about {total / 60:.0f} min in all for {estimated} unit(s){some}, {parallel} at a "
                 "time (the produce steps not included; a probe times this machine as it is now: other work "
                 "started later slows the units)")
    if budget is not None and total > budget:
        lines.append(f"[estimate] the budget ({budget:g} s) is shorter than the estimate ({total:.0f} s): the units "
                     "still running at its end are cut, and the same command resumes them")
    return lines


def write_estimate(plan: Plan, found: Estimate, parallel: int) -> Path:
    """``OUT/estimate.json`` (written whole): the estimate made before this run's units, for comparison with their
    measured times (the report's compute table)."""
    from ..common.atomic import write_text

    path = plan.out / "estimate.json"
    write_text(str(path), json.dumps(dict(found.to_json(parallel), date=time.strftime("%Y-%m-%d %H:%M:%S %Z")),
                                     indent=1) + "\n")
    return path
