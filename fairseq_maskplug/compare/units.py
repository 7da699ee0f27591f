"""One unit of a comparison, ``(arm, seed)``: its own folder ``OUT/units/ARM__seedS/`` holding its stages'
checkpoints and logs, and its results ``result.valid.json`` and ``result.test.json``
(``fairseq-maskplug-evaluate``'s, with each test sentence's outcome), and with ``[pretrain] score_every`` its
pre-training's validation loss curve ``curve.jsonl``.

A unit is resumable: a finished stage leaves ``.done/STAGE`` and is skipped; a stage cut short resumes from
its ``checkpoint_last.pt`` (fairseq's own resume). Two runs of one unit at once are refused: the unit's folder
is locked for the run (:mod:`~fairseq_maskplug.common.locks`), the second stops naming the first.
"""

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

from ..common.locks import lock_output
from ..tools.cli import console_command as tool
from .commands import (curve_command, device_name, evaluate_command, filled, finetune_command, flip_command,
                       pretrain_command, producers_dir, seed_dir, unit_dir)
from . import records
from .plan import Plan, PlanError, uses_seed

COMMAND = "fairseq-maskplug-compare"


def readable_result(path: Path) -> bool:
    """Whether a unit's result file is there and whole (a JSON object)."""
    try:
        return isinstance(json.loads(path.read_text(encoding="utf-8")), dict)
    except (OSError, ValueError):
        return False


def finished(plan: Plan, arm: str, seed: int) -> bool:
    """Whether the unit's results are written, whole (one per split of the plan's)."""
    unit = unit_dir(plan, arm, seed)
    curve = not (plan.pretrain.score_every and plan.arm(arm).task) or (unit / "curve.jsonl").is_file()
    return curve and all(readable_result(unit / f"result.{split}.json") for split in plan.splits)


class StageFailed(RuntimeError):
    """A stage's command ended with an error: the unit, the stage, its log and its last error line."""


def _last_error(log: Path) -> str:
    try:
        lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
                 if line.strip()]
    except OSError:
        return ""
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or [""])[-1][:300]


def run_stage(unit: Path, stage: str, argv: List[str], say: Callable[[str], None], record: Optional[tuple] = None) -> None:
    """Run ``argv`` as the unit's ``stage`` (log ``unit/logs/STAGE.log``) unless it finished before; ``record``:
    ``(command, inputs)`` written first (:mod:`.records`)."""
    marker = unit / ".done" / stage
    if marker.exists():
        say(f"{unit.name}: {stage} done before")
        return
    if record is not None:
        records.record_stage(unit, stage, *record)
    (unit / "logs").mkdir(parents=True, exist_ok=True)
    log = unit / "logs" / f"{stage}.log"
    say(f"{unit.name}: {stage} (log {log})")
    started = time.time()
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"$ {shlex.join(map(str, argv))}\n")  # what ran, first
        out.flush()
        code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    if code.returncode != 0:
        raise StageFailed(f"unit {unit.name}: {stage} failed (exit status {code.returncode}; log {log}): "
                          f"{_last_error(log)}")
    seconds = time.time() - started
    marker.parent.mkdir(exist_ok=True)
    marker.write_text(f"{seconds:.1f}\n", encoding="utf-8")  # the stage's wall time: the report's meta, estimates
    say(f"{unit.name}: {stage} finished in {seconds:.0f} s")


def unit_stages(plan: Plan, arm, seed: int, model: List[str], device: List[str]) -> List[tuple]:
    """``(stage, argv)`` of the unit's recorded stages, in order (the curve's scoring, derived from the pre-training's
    checkpoints, is not recorded)."""
    train = tool("fairseq-maskplug-train")
    stages = [("pretrain", [train, *pretrain_command(plan, arm, seed, model, device)])] if arm.task else []
    if arm.label_noise:  # the unit's own noisy copy of the task, before its fine-tuning reads it
        stages.append(("flip", [tool("fairseq-maskplug-flip-labels"), *flip_command(plan, arm, seed)]))
    return stages + [("finetune", [train, *finetune_command(plan, arm, seed, model, device)]),
                     ("evaluate", evaluate_command(plan, arm, seed))]


def check_unit(plan: Plan, arm_name: str, seed: int, model: List[str], device: List[str],
               prints: Optional[records.Fingerprints] = None) -> dict:
    """``{stage: (argv, (command, inputs))}`` of the unit as the plan gives it now (its command line, and the record
    :func:`run_stage` writes), after refusing (:class:`~.records.UnitChanged`) a unit whose recorded stages ran with
    another command or other data."""
    arm = plan.arm(arm_name)
    unit = unit_dir(plan, arm.name, seed)
    prints = prints or records.Fingerprints(plan)
    now = {}
    for stage, argv in unit_stages(plan, arm, seed, model, device):
        command = records.placeholders(plan, argv)
        record = (command, records.stage_inputs(plan, arm, stage, command, prints))
        records.check_stage(unit, stage, *record)
        now[stage] = (argv, record)
    return now


def check_units(plan: Plan, model: List[str], device: List[str], units=None) -> None:
    """:func:`check_unit` for every unit that has begun (its folder exists), before any work."""
    prints = records.Fingerprints(plan)
    for arm, seed in units or plan.units():
        if unit_dir(plan, arm, seed).is_dir():
            check_unit(plan, arm, seed, model, device, prints)


def run_unit(plan: Plan, arm_name: str, seed: int, model: List[str], device: List[str],
             say: Callable[[str], None] = print) -> Path:
    """Run (or resume) one unit; its folder. Refused while another run holds the unit, and where it ran with
    another plan or other data (:func:`check_unit`). A result file that is not whole is scored again."""
    if seed not in plan.seeds:
        raise PlanError(f"{plan.path}: seed {seed} is not one of the plan's seeds {list(plan.seeds)}")
    arm = plan.arm(arm_name)
    unit = unit_dir(plan, arm.name, seed)
    unit.mkdir(parents=True, exist_ok=True)
    lock = lock_output(str(unit), COMMAND, directory=True, log=say)
    try:
        now = check_unit(plan, arm.name, seed, model, device)
        if finished(plan, arm.name, seed):
            say(f"{unit.name}: finished before" + ("" if (unit / records.RAN).is_dir() else
                                                   " (it recorded nothing of what it ran: made by an earlier version; "
                                                   "reused as it is)"))
            return unit
        damaged = [split for split in plan.splits if (unit / f"result.{split}.json").exists()
                   and not readable_result(unit / f"result.{split}.json")]
        if damaged:
            say(f"{unit.name}: result.{damaged[0]}.json is not whole: scoring again")
            (unit / ".done" / "evaluate").unlink(missing_ok=True)  # this unit's own marker
        for stage, (argv, record) in now.items():  # in order: pretrain (where the arm has one), finetune, evaluate
            run_stage(unit, stage, argv, say, record)
            if stage == "pretrain" and plan.pretrain.score_every:
                try:
                    scoring = curve_command(plan, arm, seed)
                except ValueError as error:
                    raise StageFailed(str(error)) from None
                run_stage(unit, "curve", scoring, say)
        (unit / "device.txt").write_text(device_name() + "\n", encoding="utf-8")  # the report's provenance
        return unit
    finally:
        lock.release()


def stage_seconds(plan: Plan, arm: str, seed: int) -> Dict[str, float]:
    """``{stage: wall seconds}`` of the unit's finished stages (a stage marked done before stages were timed has
    none)."""
    done = unit_dir(plan, arm, seed) / ".done"
    out = {}
    for marker in sorted(done.iterdir()) if done.is_dir() else []:
        try:
            out[marker.name] = float(marker.read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            continue
    return out


def parse_unit(text: str) -> tuple:
    """``ARM:SEED`` -> ``(arm, seed)``."""
    arm, sep, seed = text.rpartition(":")
    if not sep or not arm or not seed.isdigit():
        raise PlanError(f"--unit {text}: give ARM:SEED, e.g. pmi:1")
    return arm, int(seed)


def missing_units(plan: Plan) -> List[str]:
    """``ARM:SEED`` of every unit whose results are not written."""
    return [f"{arm}:{seed}" for arm, seed in plan.units() if not finished(plan, arm, seed)]


def unit_result(plan: Plan, arm: str, seed: int, split: str) -> Optional[Path]:
    path = unit_dir(plan, arm, seed) / f"result.{split}.json"
    return path if path.is_file() else None


def seed_produced(plan: Plan, seed: int) -> bool:
    """Whether the plan's ``seed_produce`` commands have run for ``seed`` (or it has none)."""
    return not plan.seed_produce or (producers_dir(plan) / ".done" / f"seed{seed}").exists()


def produced(plan: Plan, arm) -> bool:
    """Whether what the arm reads is written: the plan's ``produce`` commands and the arm's have run (or there
    are none) and, where its options name ``{seed}``, the plan's ``seed_produce`` commands for every seed."""
    return (plan_produced(plan) and own_produced(plan, arm)
            and (not uses_seed(arm) or all(seed_produced(plan, seed) for seed in plan.seeds)))


def plan_produced(plan: Plan) -> bool:
    """Whether the plan's own ``produce`` commands (every arm's) have run (or it has none)."""
    return not plan.produce or (producers_dir(plan) / ".done" / "plan").exists()


def own_produced(plan: Plan, arm) -> bool:
    """Whether the arm's own ``produce`` commands have run (or it has none)."""
    return not arm.produce or (producers_dir(plan) / ".done" / arm.name).exists()


def run_commands(folder: Path, name: str, commands, words_of: Callable, done: Path,
                 say: Callable[[str], None], plan: Optional[Plan] = None) -> None:
    """Run ``commands`` (each filled by ``words_of``) as the stages ``NAME.1``, ``NAME.2``, ... of ``folder``
    under its lock, then mark them all done with the file ``done``; with ``plan``, each stage records its command
    first (:func:`~.records.check_producer` compares it)."""
    folder.mkdir(parents=True, exist_ok=True)
    lock = lock_output(str(folder), COMMAND, directory=True, log=say)
    try:
        for number, command in enumerate(commands, 1):
            words = words_of(command)
            argv = [tool(words[0]), *words[1:]]
            run_stage(folder, f"{name}.{number}", argv, say,
                      None if plan is None else (records.placeholders(plan, argv), {}))
        done.parent.mkdir(parents=True, exist_ok=True)
        done.touch()
    finally:
        lock.release()


def produce_plan(plan: Plan, say: Callable[[str], None] = print) -> None:
    """Run the plan's own ``produce`` commands once (:func:`filled`), each a stage ``plan.N`` of the folder
    ``OUT/producers/``, unless they ran before."""
    if not plan_produced(plan):
        run_commands(producers_dir(plan), "plan", plan.produce, lambda command: filled(plan, command),
                     producers_dir(plan) / ".done" / "plan", say, plan)


def produce(plan: Plan, arm, say: Callable[[str], None] = print) -> None:
    """Run the arm's ``produce`` commands once (:func:`filled`), each a stage of the folder ``OUT/producers/``
    (log ``ARM.N.log``), unless they ran before."""
    if not own_produced(plan, arm):
        run_commands(producers_dir(plan), arm.name, arm.produce, lambda command: filled(plan, command),
                     producers_dir(plan) / ".done" / arm.name, say, plan)


def thread_share(parallel: int) -> str:
    """``OMP_NUM_THREADS`` for one of ``parallel`` processes run at once: its share of the cores, at least 1."""
    import os

    return str(max(1, (os.cpu_count() or 1) // parallel))


def produce_seeds(plan: Plan, seeds: List[int], model: List[str], device: List[str], parallel: int = 1,
                  say: Callable[[str], None] = print) -> None:
    """:func:`produce_seed` for each of ``seeds``, ``parallel`` at a time: the chains are independent (each reads its
    own seed's units and writes its own seed's folder and tracks), so ``--parallel`` runs them side by side as it
    runs units, each process taking a share of the cores (``OMP_NUM_THREADS``, unless set). The first failure is
    raised once every started chain has ended."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    left = [seed for seed in seeds if not seed_produced(plan, seed)]
    if parallel <= 1 or len(left) <= 1:
        for seed in left:
            produce_seed(plan, seed, model, device, say)
        return
    unset = "OMP_NUM_THREADS" not in os.environ
    if unset:  # the chains' processes inherit it (set in this process, for the chains only)
        os.environ["OMP_NUM_THREADS"] = thread_share(parallel)
    try:
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            chains = [pool.submit(produce_seed, plan, seed, model, device, say) for seed in left]
            for chain in chains:
                chain.result()
    finally:
        if unset:
            del os.environ["OMP_NUM_THREADS"]


def produce_seed(plan: Plan, seed: int, model: List[str], device: List[str],
                 say: Callable[[str], None] = print) -> None:
    """Run the plan's ``seed_produce`` commands for ``seed`` (:func:`filled`), each a stage of the folder
    ``OUT/producers/seedS/``, after the units they read (``{unit:ARM}``, run or resumed here), unless they ran
    before. Selective masking's chain: the seed's fine-tuned classifier scores the task, a tagger learns its
    labels, the tagger writes the corpus's track under the seed's name."""
    if seed_produced(plan, seed):
        return
    for arm in plan.seed_units():
        run_unit(plan, arm, seed, model, device, say)
    run_commands(seed_dir(plan, seed), f"seed{seed}", plan.seed_produce,
                 lambda command: filled(plan, command, seed, model, device),
                 producers_dir(plan) / ".done" / f"seed{seed}", say, plan)


def check_producers(plan: Plan, model: List[str], device: List[str]) -> None:
    """:func:`~.records.check_producer` for the plan's produce commands, each arm's and ``seed_produce``'s for each
    seed, before any work."""
    def recorded(seed=None):
        def words(command):
            filled_words = filled(plan, command, seed, model, device) if seed is not None else filled(plan, command)
            return records.placeholders(plan, [tool(filled_words[0]), *filled_words[1:]])
        return words
    folder = producers_dir(plan)
    if plan.produce:
        records.check_producer(folder, "plan", plan.produce, recorded(), folder / ".done" / "plan")
    for arm in plan.arms:
        if arm.produce:
            records.check_producer(folder, arm.name, arm.produce, recorded(), folder / ".done" / arm.name)
    for seed in plan.seeds if plan.seed_produce else ():
        records.check_producer(seed_dir(plan, seed), f"seed{seed}", plan.seed_produce, recorded(seed),
                               folder / ".done" / f"seed{seed}")
