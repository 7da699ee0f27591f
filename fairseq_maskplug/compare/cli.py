"""``fairseq-maskplug-compare``: does a masking policy help on *my* data? Any arms against a baseline on one's own
corpus and labelled task, over seeds, with paired statistics (``docs/compare.md``).

    fairseq-maskplug-compare plan.toml                  check the plan, run every unit not finished, report
    fairseq-maskplug-compare plan.toml --parallel 2     two units at once on this machine
    fairseq-maskplug-compare plan.toml --print-jobs     one command per unfinished unit (a Slurm array, any
                                                        scheduler, a shell loop), after the same checks
    fairseq-maskplug-compare plan.toml --unit pmi:3     run one unit (what --print-jobs prints)
    fairseq-maskplug-compare plan.toml --produce        run the arms' produce commands and seed_produce's for
                                                        each seed only (once, before --print-jobs' units)
    fairseq-maskplug-compare plan.toml --collect        the report of whatever finished; names what is missing
    fairseq-maskplug-compare plan.toml --budget 3600    stop the units still running after an hour, record them as
                                                        cut, report what finished; the same command resumes
    fairseq-maskplug-compare plan.toml --set data.task=my/task --set finetune.epochs=3
                                                        the plan with these keys changed (any of the above)
    fairseq-maskplug-compare plan.toml --arms a b base  these arms only (any of the above)

The plan (TOML, :mod:`fairseq_maskplug.compare.plan`) names the data, the starting model, the seeds and the arms;
each ``(arm, seed)`` is one resumable unit in ``OUT/units/ARM__seedS`` (:mod:`.units`). Before any work the
whole plan is checked, every arm through the real training parsers and its splits loaded
(:mod:`.checks`); a refusal is one line naming the arm and option. The report (:mod:`.report`) is
``OUT/report-vs-BASELINE.{json,md,png}``: what it found first, a verdict per comparison.
"""

import argparse
import os
import shlex
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..common.option_ranges import number
from ..common.text_lines import LINE_BREAKS
from ..tools.cli import HelpFormatter, add_version, command_main
from .units import COMMAND, thread_share


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("plan", type=Path, help="the plan file (TOML; docs/compare.md shows an example)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--print-jobs", action="store_true",
                      help="check the plan, then print one command per unit not finished, and stop")
    what.add_argument("--unit", metavar="ARM:SEED", help="run (or resume) this one unit")
    what.add_argument("--produce", action="store_true",
                      help="check the plan, run the arms' produce commands and seed_produce's for each seed "
                           "(once; before --print-jobs' units), and stop")
    what.add_argument("--collect", action="store_true",
                      help="write the report of the finished units (no training); name the missing ones")
    parser.add_argument("--parallel", type=int, default=None,
                        help="units run at once on this machine (default: the plan's parallel, else 1); each gets "
                             "one share of the cores unless OMP_NUM_THREADS is set")
    parser.add_argument("--budget", type=number("(0, inf)"), default=None, metavar="SECONDS",
                        help="stop at this many seconds after the start (a time-limited allocation): units still "
                             "running are stopped and recorded as cut (OUT/cut.json), none is started after it, "
                             "the report reads what finished; the same command later resumes the rest")
    parser.add_argument("--no-estimate", action="store_true",
                        help="before the units (a run, --print-jobs), do not probe this machine's speed: each "
                             "distinct training stage runs a few updates first (seconds each) to estimate every "
                             "unit's wall time; arms with finished units are estimated from their measured times")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="override the plan's seeds")
    parser.add_argument("--arms", nargs="+", default=None, metavar="ARM",
                        help="only these arms of the plan (its baseline among them); [report] family keeps the pairs "
                             "of them. A unit is the same whichever arms are run, so a later run of more arms "
                             "resumes")
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="settings",
                        help="override one key of the plan (repeatable): a dotted key as in the file, e.g. "
                             "finetune.epochs=3, data.task=my/task, arms.pmi.updates=800; the value a TOML value "
                             "where it is one, else text; a relative path is relative to the current folder")
    add_version(parser)
    args = parser.parse_args(argv)
    if args.parallel is not None and args.parallel < 1:
        parser.error(f"--parallel must be at least 1, got {args.parallel}")
    if args.no_estimate and (args.unit or args.produce or args.collect):
        parser.error("--no-estimate: only a run of the units or --print-jobs estimates them")
    if args.budget is not None and (args.print_jobs or args.unit or args.produce or args.collect):
        parser.error("--budget bounds a run of the units: not with --print-jobs, --unit, --produce or --collect")
    return args


def this_command() -> list:
    """How to start this command again from here (a unit's process)."""
    return [sys.executable, "-m", "fairseq_maskplug.compare.cli"]


def check_out(plan) -> None:
    """The output folder is new, empty, or an earlier run's of this plan's command."""
    from ..common.atomic import check_output_directory

    check_output_directory(plan.out, f"{plan.path}: out", COMMAND,
                           others=[("[data] corpus", str(plan.corpus) if plan.corpus else None),
                                   ("[data] task", str(plan.labelled)), ("[model] checkpoint", str(plan.model))])


def claim_out(plan) -> None:
    """Mark the output folder as this command's (:func:`check_out`); written whole, as two units started at once
    may read it while the other writes it."""
    import json

    from ..common.atomic import OWNER_FILE, write_text

    plan.out.mkdir(parents=True, exist_ok=True)
    if not (plan.out / OWNER_FILE).exists():
        write_text(str(plan.out / OWNER_FILE), json.dumps({"command": COMMAND}) + "\n")


def estimate(plan, units, parallel: int, found=None) -> str:
    """What ``units`` (``ARM:SEED``) will take, ``parallel`` at a time, in words: a unit of an arm with finished units
    at their mean wall time (their timed stages), else at ``found``'s figure (:class:`~.estimate.Estimate`, made
    before the run) where it has one; the units with neither are named as not estimated."""
    from .estimate import measured
    from .units import parse_unit

    each = measured(plan, units)
    total, estimated, how = 0.0, 0, set()
    for unit in units:
        arm = parse_unit(unit)[0]
        if arm in each:
            total, estimated = total + each[arm], estimated + 1
            how.add("measured times")
        elif found is not None and found.seconds.get(unit) is not None:
            total, estimated = total + found.seconds[unit], estimated + 1
            how.add("the estimate above")
    if not estimated:
        return "no estimate yet (no unit of these arms has finished; each stage is timed, and the next estimate " \
               "uses them)"
    text = f"about {total / parallel / 60:.0f} min ({estimated} unit(s), {parallel} at a time, from " \
           f"{' and '.join(sorted(how))})"
    return text + (f"; {len(units) - estimated} unit(s) not estimated yet" if estimated < len(units) else "")


#: seconds a unit stopped at the budget has to end its stage after SIGTERM, before SIGKILL
STOP_GRACE = 30


def stop_group(process: subprocess.Popen) -> None:
    """End ``process`` and everything it started (its own session): SIGTERM, then SIGKILL after
    :data:`STOP_GRACE` seconds."""
    import signal

    for sig, wait in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def record_cut(plan, cut: list, budget: float) -> None:
    """``OUT/cut.json``: the units the last run stopped or did not start at its ``--budget`` of ``budget`` seconds
    (written whole; removed by a run that cuts nothing)."""
    import json
    import time

    from ..common.atomic import write_text

    path = plan.out / "cut.json"
    if not cut:
        path.unlink(missing_ok=True)
        return
    write_text(str(path), json.dumps({"budget_s": budget, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                                      "units": sorted(cut)}, indent=1) + "\n")


def run_units(plan, units, parallel: int, argv_tail: list, budget: float = None, found=None) -> tuple:
    """Run ``units`` (``ARM:SEED``), ``parallel`` at a time, each as its own process (its own session, so that a
    stop reaches its training); ``(failed lines, cut units)``. With ``budget`` (seconds from now), a unit still
    running then is stopped (:func:`stop_group`) and none starts after it: those are cut, to resume later.
    ``found``: the estimate made before the run (:class:`~.estimate.Estimate`), said for the units of arms not
    measured yet."""
    import time

    env = dict(os.environ)
    if "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = thread_share(parallel)
    failed, cut, done, lock, live, stopping = [], [], [0], threading.Lock(), set(), threading.Event()
    deadline = None if budget is None else time.monotonic() + budget

    def one(unit):
        if deadline is not None and time.monotonic() >= deadline:
            with lock:
                cut.append(unit)
            return
        log = plan.out / "logs" / f"{unit.replace(':', '__seed')}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as out:
            process = subprocess.Popen([*this_command(), str(plan.path), "--unit", unit, *argv_tail], stdout=out,
                                       stderr=subprocess.STDOUT, env=env, start_new_session=True)
            with lock:
                live.add(process)
            try:
                code = process.wait(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                stop_group(process)
                with lock:
                    cut.append(unit)
                    print(f"unit {unit} stopped at the budget: cut, to resume", flush=True)
                return
            finally:
                with lock:
                    live.discard(process)
        if stopping.is_set():  # this command is being stopped: the unit was stopped with it, not failed
            return
        with lock:
            done[0] += 1
            if code != 0:
                lines = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line]
                failed.append(f"unit {unit} failed: {lines[-1] if lines else f'exit status {code}'} (log {log})")
            left = units[done[0]:]
            print(f"[{done[0]}/{len(units)}] unit {unit} {'finished' if code == 0 else 'FAILED'}"
                  + (f"; left: {estimate(plan, left, parallel, found)}" if left else ""), flush=True)

    print(f"{len(units)} unit(s) to run, {parallel} at a time; logs in {plan.out / 'logs'}; "
          f"{estimate(plan, units, parallel, found)}", flush=True)
    pool = ThreadPoolExecutor(max_workers=parallel)
    previous = stop_on_sigterm()
    try:
        list(pool.map(one, units))
    except BaseException:  # Ctrl-C or SIGTERM here ends the units too: they run in sessions of their own
        stopping.set()
        with lock:
            running = list(live)
        for process in running:
            stop_group(process)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return failed, cut


def stop_on_sigterm():
    """Make SIGTERM to this process raise :class:`SystemExit` (status 143) in its main thread, so that
    :func:`run_units` stops the units it started before ending; the handler it replaced (None off the main thread,
    where no handler can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, stop)


def work(args) -> int:
    from .checks import check_plan
    from .plan import PlanError, parse_setting, read_plan
    from .report import write_report
    from .units import (StageFailed, check_producers, check_units, missing_units, parse_unit, produce, produce_plan,
                        produce_seeds, produced, run_unit, seed_produced)
    from .views import build_views, check_views, on_views, views_built

    import time

    started = time.monotonic()  # --budget counts from here: the checks and produce steps (run whole) count too
    overrides = {"seeds": args.seeds} if args.seeds else None
    settings = [parse_setting(text, Path.cwd()) for text in args.settings]
    given = read_plan(args.plan, overrides, [(key, value) for key, value, _ in settings], args.arms or ())
    # the plan reads its own views of the corpus and task (.views): made when it claims its output folder, so that
    # its producers never write the user's folders
    check_views(given)
    plan = on_views(given) if views_built(given) else given

    def claim():
        nonlocal plan
        claim_out(given)
        build_views(given)
        plan = on_views(given)
    argv_tail = ["--seeds", *map(str, args.seeds)] if args.seeds else []
    argv_tail += ["--arms", *args.arms] if args.arms else []
    for _, _, word in settings:  # a unit's process, or a printed job, reads the plan as this one did
        argv_tail += ["--set", word]
    if args.print_jobs:  # a job is one line: refused before any work (the unit names are ARM_NAME's)
        for word in [str(plan.path), *argv_tail]:
            if any(mark in word for mark in LINE_BREAKS):
                raise PlanError(f"--print-jobs: {word!r} holds a line break, and a jobs file is one job a line (a "
                                "scheduler's `sed -n Np` would run half a job): rename the file or folder")
    if args.collect:
        from .commands import device_options, model_options
        check_units(plan, model_options(plan.model), device_options())  # no report of units the plan did not run
        data = write_report(plan, [COMMAND, str(plan.path), "--collect", *argv_tail])
        return 0 if data["scores"] else 1
    unproduced = [arm.name for arm in plan.arms if not produced(plan, arm)]
    if unproduced:  # the first real problem first: the data the producers read, before "produce first"
        from .checks import check_corpus, check_task
        check_task(plan)
        if not plan.produce:  # a plan-level produce may write the corpus
            check_corpus(plan)
    first = (f"run `{COMMAND} {plan.path} --produce` first, once: it writes the tracks of arm(s) "
             f"{', '.join(unproduced)} (the plan's produce commands, their own, or seed_produce's for each seed)")
    if args.unit:
        arm, seed = parse_unit(args.unit)
        if arm in unproduced:
            raise PlanError(f"{plan.path} [arms.{arm}]: {first}")
        plan.arm(arm)
        check_out(given)
        model = check_plan(plan, [arm])
        claim()
        from .commands import device_options
        try:
            run_unit(plan, arm, seed, model, device_options(), say=lambda line: print(line, flush=True))
        except StageFailed as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        return 0
    if args.print_jobs and unproduced:
        raise PlanError(f"{plan.path}: {first}")
    check_out(given)
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731  (stdout: --print-jobs' commands)
    model = check_plan(plan, say=say)
    from .commands import device_options
    check_units(plan, model, device_options())  # a unit that ran with another plan or data: refused before any work
    check_producers(plan, model, device_options())  # and a produce command that ran with other settings
    if unproduced or not all(seed_produced(plan, seed) for seed in plan.seeds):
        claim()
        try:
            produce_plan(plan, say)
            for arm in plan.arms:
                produce(plan, arm, say)
            produce_seeds(plan, list(plan.seeds), model, device_options(), args.parallel or plan.parallel, say)
        except StageFailed as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        check_plan(plan, unproduced, say)  # now with the tracks
    if args.produce:
        print(f"the arms' produce commands have run (logs in {plan.out / 'producers'})")
        return 0
    todo = missing_units(plan)
    parallel = args.parallel or plan.parallel
    found = None
    if todo and not args.no_estimate:  # before any unit: what each will take, from a probe of this machine
        from .estimate import describe, estimate_units
        found = estimate_units(plan, todo, model, device_options(), parallel, say)
        for line in describe(found, parallel, args.budget):
            say(line)
    if args.print_jobs:
        for unit in todo:
            print(shlex.join([COMMAND, str(plan.path), "--unit", unit, *argv_tail]))
        if not todo:  # (stderr: a jobs file stays empty)
            say(f"--print-jobs: every unit of {plan.path} has run ({len(plan.units())}); nothing left to schedule: "
                f"{shlex.join([COMMAND, str(plan.path), '--collect'])} writes the report")
        return 0
    claim()
    if found is not None:
        from .estimate import write_estimate
        write_estimate(plan, found, parallel)
    left = None if args.budget is None else max(0.0, args.budget - (time.monotonic() - started))
    failed, cut = run_units(plan, todo, parallel, argv_tail, left, found) if todo else ([], [])
    record_cut(plan, cut, args.budget)  # (a run that cut nothing removes an earlier run's record)
    write_report(plan, [COMMAND, str(plan.path), *argv_tail])
    if cut:
        print(f"the budget ({args.budget:g} s) cut {len(cut)} unit(s): {', '.join(sorted(cut))} (recorded in "
              f"{plan.out / 'cut.json'}); the report reads the finished ones; run the same command again to resume "
              "them", flush=True)
    for line in failed:
        print(f"error: {line}", file=sys.stderr)
    return 1 if failed else 0


main = command_main(parse_args, work)


def console_main() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console_main()
