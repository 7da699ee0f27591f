"""``fairseq-maskplug-train``: ``fairseq-train`` with the plugin loaded and bad input caught early.

- adds ``--user-dir <package>`` unless the user gave one (their module then imports the
  plugin): the flag, not only this process's import, is what worker processes load;
- adds the criterion a package task trains with when ``--criterion`` is left out
  (fairseq's default, ``cross_entropy``, would predict every token);
- ``--help`` lists the options of the chosen task, its mask policies, model and criterion
  with their defaults (:mod:`.train_help`);
- forms one data-parallel run under ``torchrun`` and ``srun`` on CPUs and GPUs
  (:mod:`.launch`), with ``gloo`` on CPUs;
- before fairseq prints its configuration, checks what can be checked without data:
  the task's options (a package task's ``setup_task``: policy options, dictionaries,
  data layout) and that ``--save-dir`` is writable;
- stops at once when ``--save-dir`` holds a run that has reached ``--max-update`` (fairseq
  would train one more update and overwrite its checkpoints);
- names the replacement of a flag that is gone (``integration/renamed_options.py``);
- stops on bad input with one line ``fairseq-maskplug-train: error: ...`` and exit status 2,
  also when a checkpoint's parameters do not fit the model (the line names the shape options or
  the dictionary that differ: ``integration/model_mismatch.py``) (``MASKPLUG_TRACEBACK=1`` shows the
  traceback instead).
"""

import logging
import os
import sys

from ..tools.cli import package_dir, quiet_fairseq_import, quiet_third_party

quiet_fairseq_import()
quiet_third_party()
from .. import plugin  # noqa: E402,F401  (registrations in this process and in the workers that re-import it)
from ..integration.launch import configure_launch  # noqa: E402
from ..integration.renamed_options import removed_flag  # noqa: E402
from ..tasks.criterion_check import check_criterion  # noqa: E402
from .train_help import training_help, wants_help  # noqa: E402


def _given(argv, *flags) -> bool:
    """Whether one of ``flags`` is on the command line (``--flag value`` or ``--flag=value``)."""
    return any(a in flags or a.startswith(tuple(f + "=" for f in flags)) for a in argv)


def with_user_dir(argv):
    """Add ``--user-dir <package>`` unless the user gave one (their module then imports us)."""
    if _given(argv, "--user-dir"):
        return list(argv)
    return ["--user-dir", package_dir(), *argv]


def package_task(name):
    """The class of the task registered as ``name`` if this package registered it, else None."""
    from fairseq.tasks import TASK_REGISTRY

    task_cls = TASK_REGISTRY.get(name)
    return task_cls if task_cls is not None and task_cls.__module__.startswith("fairseq_maskplug.") else None


def with_task_criterion(argv):
    """Add ``--criterion C`` (the first of the task's ``criteria``) for a package task when it is left out."""
    import argparse

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--task", default=None)
    task_cls = package_task(pre.parse_known_args(argv)[0].task)
    if _given(argv, "--criterion") or task_cls is None or not getattr(task_cls, "criteria", ()):
        return list(argv)
    return [*argv, "--criterion", task_cls.criteria[0]]


def check_task_name(argv) -> None:
    """An unknown ``--task`` is named first (fairseq's parser would ask for ``--arch`` before it)."""
    import argparse
    import difflib

    from fairseq import utils
    from fairseq.tasks import TASK_REGISTRY

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--task", default=None)
    pre.add_argument("--user-dir", default=None)
    given = pre.parse_known_args(argv)[0]
    if given.user_dir is not None and not os.path.exists(given.user_dir):
        raise FileNotFoundError(f"--user-dir not found: {given.user_dir}")
    utils.import_user_module(given)  # a plugin's tasks register on import
    name = given.task
    if name in TASK_REGISTRY:
        for flag, reason in getattr(TASK_REGISTRY[name], "refused_options", {}).items():
            if _given(argv, flag):
                raise ValueError(f"--task {name} has no {flag}: {reason}")
        return
    if name is None:
        return
    close = difflib.get_close_matches(name, list(TASK_REGISTRY), n=1)
    ours = sorted(n for n in TASK_REGISTRY if package_task(n) is not None)
    raise ValueError(f"--task {name} is not a registered task{f' (did you mean {close[0]}?)' if close else ''}; "
                     f"this package's: {', '.join(ours)} (a plugin's tasks need its --user-dir)")


def require_arch(argv) -> None:
    """fairseq fails on a missing ``--arch`` with a bare RuntimeError; say what to add."""
    if not _given(argv, "--arch", "-a"):
        raise ValueError("--arch is required: e.g. --arch roberta_tiny (the demo's shape, 4 layers, dim 128) or "
                         "--arch roberta_base")


def check_batch_size(cfg) -> None:
    """fairseq needs ``--batch-size`` or ``--max-tokens`` (its own check is a bare assertion)."""
    if cfg.dataset.max_tokens is None and cfg.dataset.batch_size is None:
        raise ValueError("give --batch-size N (sentences per batch) or --max-tokens N (tokens per batch): "
                         "fairseq needs one of them")


def check_save_dir(cfg) -> None:
    """``--save-dir`` exists or can be made, and a file can be written in it (before any training)."""
    if cfg.checkpoint.no_save:
        return
    save_dir = cfg.checkpoint.save_dir
    try:
        os.makedirs(save_dir, exist_ok=True)
        probe = os.path.join(save_dir, f".maskplug-write-test-{os.getpid()}")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as error:
        raise PermissionError(f"--save-dir {save_dir} is not writable: {error.strerror or error}") from None


def check_task(cfg) -> None:
    """Run a package task's ``setup_task`` (options, dictionaries, layout) and check its
    criterion before fairseq's main."""
    task_cls = package_task(cfg.task._name)
    if task_cls is not None:
        if getattr(task_cls, "criteria", ()):
            check_criterion(cfg.task._name, task_cls.criteria, cfg.criterion._name)
        task_cls.setup_task(cfg.task)


def finished_updates(cfg):
    """The updates of ``--save-dir``'s ``checkpoint_last.pt`` when the run it resumes has already
    reached ``--max-update`` (fairseq would take one more update and overwrite its checkpoints), else None.
    The checkpoint is memory-mapped where its format allows: its weights are not read."""
    ck, opt = cfg.checkpoint, cfg.optimization
    if not opt.max_update or ck.restore_file != "checkpoint_last.pt" or ck.reset_optimizer:
        return None
    path = os.path.join(ck.save_dir, "checkpoint_last.pt")
    if not os.path.isfile(path):
        return None
    from ..common.checkpoint_files import load_state

    state = load_state(path)  # a damaged or unsafe one is named here; the safe loader, with the plugin's globals
    history = state.get("optimizer_history") or [{}]
    updates = history[-1].get("num_updates", 0)
    return updates if updates >= opt.max_update else None


def shut_down_process_group() -> bool:
    """Close this process's data-parallel group once training is done (under torchrun or srun the
    group lives in this process). Left open, gloo's threads met the interpreter's exit: a worker
    sometimes aborted after training had finished ("terminate called without an active
    exception", SIGABRT, a failed torchrun). True when a group was open."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        return True
    return False


def leave_worker(code: int) -> None:
    """End a data-parallel worker whose group is closed without the interpreter's teardown. Closing
    the group was not enough: once in CI, a torchrun worker still aborted at exit after training and
    saving had finished (SIGABRT, "terminate called without an active exception"; torch's objects
    that hold the group were being finalised while the interpreter shut down). The exit handlers run
    first (fairseq's tensorboard writers close there), logs and streams are flushed, then the
    process ends with ``code``."""
    import atexit

    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def user_error_message(error: BaseException):
    """The one line for an error caused by the input (options, data, files, a checkpoint of
    another shape); None for anything else, which keeps its traceback."""
    from omegaconf.errors import MissingMandatoryValue

    cause = error.__context__
    if isinstance(cause, RuntimeError) and "size mismatch for " in str(cause):  # fairseq wraps torch's error
        first = str(cause).split("size mismatch for ", 1)[1].splitlines()[0].strip()
        return f"{error} (size mismatch for {first})"
    if str(error).startswith("Cannot load model parameters from checkpoint"):  # fairseq, any other cause
        detail = str(cause).splitlines()[0][:200] if cause is not None else ""
        return (f"{str(error).split(';')[0]}: its parameters belong to another architecture "
                f"({type(cause).__name__}: {detail})")
    if str(error).startswith("The dataset is empty"):  # fairseq's bare Exception
        return ("a split gives no batch: fairseq skipped every item or the split has fewer items than "
                "--required-batch-size-multiple (default 8); with tiny data add --required-batch-size-multiple 1, "
                "else check --max-tokens against --tokens-per-sample")
    if isinstance(error, MissingMandatoryValue):
        key = str(getattr(error, "key", "") or "").split(".")[-1]
        return f"--{key.replace('_', '-')} is required" if key else str(error).splitlines()[0]
    if isinstance(error, (ValueError, OSError)):
        return str(error)
    return None


def main(argv=None, in_process: bool = True) -> int:
    """``fairseq-maskplug-train`` with ``argv``; 0 when training ran, 2 for bad input. With
    ``in_process=False`` (the console command) the process ends here once training ran (:func:`leave_worker`).
    ``--version`` prints the package's version (every command's :func:`~..tools.cli.version_line`)."""
    if "--version" in (sys.argv[1:] if argv is None else argv):
        from ..tools.cli import version_line
        print(version_line("fairseq-maskplug-train"))
        return 0
    from fairseq.distributed import utils as distributed_utils
    from fairseq_cli.train import main as fairseq_main
    import torch

    # Importing fairseq runs a logging.basicConfig in fairseq.tasks.text_to_speech first;
    # restore fairseq-train's own log format.
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        datefmt="%Y-%m-%d %H:%M:%S", level=os.environ.get("LOGLEVEL", "INFO").upper(),
                        stream=sys.stdout, force=True)
    if not in_process:  # the console command: one share of the cores unless OMP_NUM_THREADS is set
        from ..tools.threads import choose_threads

        choose_threads()
    lock = None
    try:
        argv = prepared_argv(sys.argv[1:] if argv is None else argv)
        if wants_help(argv):
            print(training_help(argv))
            return 0
        cfg = parsed_config(argv)
        configure_launch(cfg.distributed_training, os.environ, cpu=cfg.common.cpu or not torch.cuda.is_available())
        check_config(cfg)
        check_save_dir(cfg)
        lock = lock_save_dir(cfg)
        done = finished_updates(cfg)
        if done is not None:
            print(f"fairseq-maskplug-train: {cfg.checkpoint.save_dir}/checkpoint_last.pt has trained {done} updates "
                  f"(--max-update {cfg.optimization.max_update}): nothing to do; raise --max-update to go on")
            return 0
        distributed_utils.call_main(cfg, fairseq_main)
        shut_down_process_group()
        if not in_process:  # the console command, a data-parallel worker or one process: out without finalization
            if lock is not None:  # only the save directory's writer (rank 0) holds it
                lock.release()
                lock = None
            leave_worker(0)
    except Exception as error:  # noqa: BLE001  (bad input becomes one line; anything else keeps its traceback)
        message = user_error_message(error)
        if message is None or os.environ.get("MASKPLUG_TRACEBACK"):
            raise
        print(f"fairseq-maskplug-train: error: {message}", file=sys.stderr)
        return 2
    finally:
        if lock is not None:
            lock.release()
    return 0


def prepared_argv(argv):
    """``argv`` as fairseq's parser gets it from ``fairseq-maskplug-train`` (the package's ``--user-dir``, a package
    task's criterion) after the checks that need no parse: removed flags and the task's name (ValueError)."""
    argv = with_user_dir([str(a) for a in argv])
    gone = removed_flag(argv)
    if gone is not None:
        raise ValueError(gone)
    check_task_name(argv)
    return with_task_criterion(argv)


def parsed_config(argv, quiet: bool = False):
    """fairseq's configuration of the prepared ``argv`` (:func:`prepared_argv`), ``--arch`` required first. fairseq's
    parser prints its usage and exits on bad options; with ``quiet`` that is a ValueError holding its last line."""
    import contextlib
    import io

    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    require_arch(argv)
    if not quiet:
        return convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            args = options.parse_args_and_arch(options.get_training_parser(), argv)
    except SystemExit:
        lines = [line for line in said.getvalue().splitlines() if line.strip()]
        raise ValueError(lines[-1].split("error: ", 1)[-1] if lines else "fairseq's parser refused the options") \
            from None
    return convert_namespace_to_omegaconf(args)


def check_config(cfg) -> None:
    """The checks of a parsed configuration before any work: the task's ``setup_task`` and the batch size."""
    check_task(cfg)
    check_batch_size(cfg)


def checked_config(argv):
    """fairseq's configuration of the training command line ``argv`` after every check :func:`main` makes before
    any work (:func:`prepared_argv`, :func:`parsed_config` quietly, :func:`check_config`); bad input is a
    ValueError or OSError in one line, also where fairseq's parser would print its usage and exit. For commands
    that check training runs before starting them (``fairseq-maskplug-compare``)."""
    cfg = parsed_config(prepared_argv(argv), quiet=True)
    check_config(cfg)
    return cfg


def lock_save_dir(cfg):
    """The lock on ``--save-dir`` for this run (:mod:`...common.locks`): one writer of its checkpoints. Rank 0
    takes it for the run's ranks (the others write no checkpoint); None with ``--no-save`` or on another rank."""
    from ..common.locks import lock_output

    if cfg.checkpoint.no_save or cfg.distributed_training.distributed_rank != 0:
        return None
    return lock_output(cfg.checkpoint.save_dir, "fairseq-maskplug-train", directory=True,
                       log=lambda line: logging.getLogger("fairseq_maskplug.train").warning(line))


def console_main() -> None:
    """The console script. Once training ran, :func:`main` ends the process as a worker leaves (:func:`leave_worker`),
    without the interpreter's finalization, in one process too: fairseq's batch iterator prefetches in a daemon thread
    (``--data-buffer-size``, 10 by default), alive when training stops inside an epoch; finalization ends it wherever
    it is, and where that is inside torch's C++ code (collating a batch) the process aborts after training finished and
    saved ("terminate called without an active exception", exit status 134): seen in 5 of 8 runs of a
    ``selective_mlm`` stage of the QUICK quickstart on 2 busy cores, and in none of 8 with ``--data-buffer-size 0``.
    ``--version``, ``--help``, nothing to do and bad input return here and leave as ``sys.exit`` does."""
    sys.exit(main(in_process=False))


def build_in_process(argv):
    """``(task, model, criterion, optimizer, cfg)`` as fairseq-train builds them from ``argv`` (train
    and valid loaded, torch seeded with 0): one training step in this process, for tests and
    benchmarks."""
    import torch
    from fairseq import optim, options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(),
                                                                     [str(a) for a in argv]))
    torch.manual_seed(0)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    for split in ("train", "valid"):
        task.load_dataset(split)
    optimizer = optim.build_optimizer(cfg.optimizer, [p for p in model.parameters() if p.requires_grad])
    return task, model, criterion, optimizer, cfg
