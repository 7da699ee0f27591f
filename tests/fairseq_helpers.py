"""Run real fairseq-preprocess / fairseq-train on tiny generated data.

:func:`run` runs a command of fairseq or of this package (``fairseq-train``,
``fairseq-preprocess``, ``fairseq-maskplug-*``, ``python -m MODULE``) through its own Python
entry point in this process: the same parser, checks and training loop as the command, without
the 3.5 s of imports a new Python process pays. Anything else, or ``new_process=True``, starts
a real process (torchrun, recipes, a test of the installed console command itself).
"""

import contextlib
import importlib
import importlib.metadata
import io
import json
import logging
import math
import os
import random
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

import numpy as np
import torch

import subprocess_guard

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXAMPLE_PLUGIN = REPO / "examples" / "flagged_policy"

TINY_ROBERTA = [
    "--arch", "roberta_base", "--encoder-layers", "2", "--encoder-embed-dim", "32",
    "--encoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
    "--max-positions", "64",
]
CPU_RUN = [
    "--cpu", "--num-workers", "0", "--required-batch-size-multiple", "1",
    "--distributed-world-size", "1", "--no-progress-bar", "--log-format", "json",
    "--log-interval", "1", "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "8",
]


def write_corpus(path: Path, n_lines: int, seed: int, vocab: int = 40) -> Path:
    """Lines of 3..15 random words ``w0 .. w{vocab-1}``."""
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n_lines):
            f.write(" ".join(f"w{i}" for i in rng.integers(0, vocab, rng.integers(3, 16))) + "\n")
    return path


def run(args, new_process: bool = False, **kwargs) -> subprocess.CompletedProcess:
    """Run ``args`` from the repository root (or ``cwd``) and return its exit status and output.

    In this process when :func:`entry_point` knows the program, else as a child process; ``new_process``
    or any ``kwargs`` (they go to :func:`subprocess.run`, e.g. ``timeout``) ask for a child process."""
    args = [str(a) for a in args]
    main = None if new_process or kwargs else entry_point(args)
    if main is None:
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        return subprocess.run(args, capture_output=True, text=True, env=env, **{"cwd": REPO, **kwargs})
    return run_in_process(args, main)


def entry_point(args):
    """``(name, function)`` that the command line ``args`` would run, for the Python entry points
    of fairseq and this package (console scripts in this environment's ``bin/``, and ``BIN/python -m
    MODULE`` of a module whose ``__main__`` block is ``sys.exit(main())``); None for anything else."""
    program = Path(args[0])
    if program.parent != BIN:
        return None
    if program.name == "python" and len(args) > 2 and args[1] == "-m":
        module = importlib.import_module(args[2])
        return (args[2], module.main) if callable(getattr(module, "main", None)) else None
    if program.name == "fairseq-maskplug-train":  # its console_main is sys.exit(main())
        from fairseq_maskplug.commands.train_cli import main
        return program.name, main
    if program.name == "fairseq-hydra-train":  # hydra's ConfigStore and GlobalHydra live on between runs
        return None
    scripts = {e.name: e for e in importlib.metadata.entry_points(group="console_scripts")}
    if program.name in scripts and program.name.startswith("fairseq"):
        return program.name, scripts[program.name].load()
    return None


def _reset_fairseq_state() -> None:
    """What fairseq keeps between runs of one process: the best validation score that decides
    checkpoint_best.pt and early stopping lives on function attributes."""
    from fairseq import checkpoint_utils
    from fairseq_cli import train

    for function, names in ((checkpoint_utils.save_checkpoint, ("best",)),
                            (train.should_stop_early, ("best", "num_runs"))):
        for name in names:
            if hasattr(function, name):
                delattr(function, name)


def _loggers():
    root = logging.getLogger()
    return [root] + [lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)]


def run_in_process(args, main) -> subprocess.CompletedProcess:
    """Run ``main`` (:func:`entry_point`) as its command would with ``sys.argv = args``: stdout,
    stderr and fairseq's log captured, warnings ignored (the subprocesses' PYTHONWARNINGS), a
    ``SystemExit`` or the returned int as the exit status, an uncaught exception as status 1 with
    its traceback on stderr. fairseq's cross-run state is reset first; the root logger, the
    working directory, ``sys.argv`` and the global random states are restored after."""
    name, function = main
    subprocess_guard.check_current_test(args)
    _reset_fairseq_state()
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers = {lg: lg.handlers[:] for lg in _loggers()}  # fairseq-preprocess adds a file handler per run
    saved = (root.level, sys.argv, os.getcwd(), torch.get_rng_state(), np.random.get_state(), random.getstate())
    returncode = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # fairseq-train's log format, to the captured stdout (its modules configure it at import)
            logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO,
                                stream=sys.stdout, force=True)
            sys.argv = [name, *args[3:]] if args[1:2] == ["-m"] else [name, *args[1:]]
            os.chdir(REPO)
            try:
                status = function()
                returncode = status if isinstance(status, int) else 0
            except SystemExit as exit_:
                returncode = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                if exit_.code is not None and not isinstance(exit_.code, int):
                    print(exit_.code, file=sys.stderr)
            except Exception:  # noqa: BLE001  (as the process would: traceback on stderr, status 1)
                traceback.print_exc()
                returncode = 1
    finally:
        for lg in _loggers():
            for handler in lg.handlers:
                if handler not in handlers.get(lg, ()) and isinstance(handler, logging.FileHandler):
                    handler.close()
            lg.handlers[:] = handlers.get(lg, [])
        root.setLevel(saved[0])
        sys.argv = saved[1]
        os.chdir(saved[2])
        torch.set_rng_state(saved[3])
        np.random.set_state(saved[4])
        random.setstate(saved[5])
    return subprocess.CompletedProcess(args, returncode, out.getvalue(), err.getvalue())


#: the producers' code before issue 54 moved them onto shared steps: what they write must stay the same bytes (a
#: change meant to change a producer's output moves this to the commit that makes it, and says why)
PRODUCERS_BEFORE = "d684dbb"


def run_producer_before(tmp_path: Path, module: str, *args) -> subprocess.CompletedProcess:
    """``python -m preprocess.MODULE ARGS`` of commit :data:`PRODUCERS_BEFORE` (its ``preprocess/`` and
    ``fairseq_maskplug/``, from this clone's history, imported ahead of the installed package), run on this
    machine, whose kernels then round as the current code's do; skips where the clone lacks that commit."""
    import pytest

    code = tmp_path / "code-before"
    if not code.is_dir():
        archive = subprocess.run(["git", "-C", REPO, "archive", PRODUCERS_BEFORE, "preprocess", "fairseq_maskplug"],
                                 capture_output=True)
        if archive.returncode:
            pytest.skip(f"commit {PRODUCERS_BEFORE} is not in this clone: {archive.stderr.decode().strip()}")
        code.mkdir()
        subprocess.run(["tar", "-x", "-C", code], input=archive.stdout, check=True)
    return check(run([sys.executable, "-m", f"preprocess.{module}", *args], cwd=code))


def written_files(directory: Path, pattern: str) -> dict:
    """``{name: bytes}`` of the files of ``directory`` matching ``pattern``, each track record (``.json``) without the
    version that wrote it (the code of :data:`PRODUCERS_BEFORE` recorded none): what the producers wrote, to compare
    with that code's output byte for byte."""
    files = {}
    for path in sorted(Path(directory).glob(pattern)):
        data = path.read_bytes()
        if path.suffix == ".json":
            record = json.loads(data)
            if isinstance(record, dict):
                record.pop("fairseq_maskplug_version", None)
            data = json.dumps(record, indent=1).encode()
        files[path.name] = data
    return files


def check(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"command failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return result


def one_line_error(result, *fragments):
    """Exit status 2, one error line on stderr holding every fragment, no traceback."""
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def preprocess(destdir: Path, trainpref: Path, validpref: Path = None) -> Path:
    args = [BIN / "fairseq-preprocess", "--only-source", "--trainpref", trainpref,
            "--destdir", destdir, "--workers", "1"]
    if validpref:
        args += ["--validpref", validpref]
    check(run(args))
    return destdir


def w0_task(root: Path, sizes=(("train", 200, 1), ("valid", 40, 2), ("test", 40, 3))) -> Path:
    """Under ``root``: ``corpus/`` (the train and valid lines of :func:`write_corpus`, binarized) and the labelled task
    ``task/`` (``input0/`` with the corpus's dictionary, ``label/``: whether the line holds ``w0``), one split per
    ``(name, lines, seed)`` of ``sizes``."""
    for split, n, seed in sizes:
        write_corpus(root / f"{split}.txt", n, seed=seed)
        lines = (root / f"{split}.txt").read_text().splitlines()
        (root / f"{split}.label").write_text("\n".join("yes" if "w0" in l.split() else "no" for l in lines) + "\n")
    preprocess(root / "corpus", root / "train.txt", root / "valid.txt")
    splits = [f"--{split}pref" for split, _, _ in sizes]
    for part, suffix, extra in (("input0", "txt", ["--srcdict", root / "corpus" / "dict.txt"]), ("label", "label", [])):
        check(run([BIN / "fairseq-preprocess", "--only-source",
                   *(word for flag, (split, _, _) in zip(splits, sizes) for word in (flag, root / f"{split}.{suffix}")),
                   *extra, "--destdir", root / "task" / part, "--workers", "1"]))
    return root


def merge_gives_the_whole_tracks(capsys, data: Path, tracks, whole) -> None:
    """``fairseq-maskplug-merge-shards data`` merges a counting producer's parts into ``whole`` (as ``tracks(data)``
    reads them) and removes the parts and the shards' counts."""
    from preprocess import merge_shards

    assert merge_shards.main([str(data)]) == 0
    assert "removed the shards' counts" in capsys.readouterr().out
    assert tracks(data) == whole and not list(data.glob("*shard*"))


def refuses_a_shard_made_otherwise(capsys, main, data: Path, args: list, other_option: list) -> None:
    """Shard 0 of 2 written by ``main`` with ``args`` in ``data``; run again with ``other_option`` added, it stops
    in one line: its parts were made with other options."""
    shard = ["--data", str(data), *args, "--num-shards", "2", "--shard-id", "0"]
    assert main(shard) == 0
    assert main([*shard, *other_option]) == 2
    err = capsys.readouterr().err.strip()
    assert "was made with other options or inputs" in err and len(err.splitlines()) == 1


def sentencepiece_data(root: Path, sentences, vocab_size: int, valid_lines: int = 0) -> Path:
    """``root`` with a sentencepiece model of ``sentences`` (``spm``), their encoding (``train.tok``, and the first
    ``valid_lines`` as ``valid.tok``), the text (``train.txt``) and real fairseq-preprocess output (``bin/``)."""
    from fairseq_maskplug.tools.binarize import encode, train_sentencepiece, write_fairseq_dict, write_lines

    model = train_sentencepiece(sentences, root / "spm", vocab_size)
    encoded = encode(model, sentences, "test")
    write_fairseq_dict(model, encoded, root / "dict.txt")
    write_lines(root / "train.tok", encoded)
    write_lines(root / "train.txt", sentences)
    if valid_lines:
        write_lines(root / "valid.tok", encoded[:valid_lines])
    preprocess(root / "bin", root / "train.tok", root / "valid.tok" if valid_lines else None)
    return root


def train(data: Path, save_dir: Path, *extra, user_dir: Path = None,
          task: str = "guided_mlm") -> subprocess.CompletedProcess:
    """``fairseq-train --task TASK`` on a tiny roberta; returns the finished process."""
    user_dir = user_dir or REPO / "fairseq_maskplug"
    return run([BIN / "fairseq-train", data, "--user-dir", user_dir, "--task", task,
                "--criterion", "masked_lm", "--tokens-per-sample", "32", "--save-dir", save_dir,
                *TINY_ROBERTA, *CPU_RUN, *extra])


TINY_BART = [
    "--arch", "bart_tiny", "--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "32",
    "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
    "--max-source-positions", "64", "--max-target-positions", "64",
]


def train_bart(data: Path, save_dir: Path, *extra) -> subprocess.CompletedProcess:
    """``fairseq-train --task guided_denoising`` on a tiny BART; returns the finished process."""
    return run([BIN / "fairseq-train", data, "--user-dir", REPO / "fairseq_maskplug", "--task", "guided_denoising",
                "--criterion", "cross_entropy", "--tokens-per-sample", "32", "--save-dir", save_dir,
                *TINY_BART, *CPU_RUN, *extra])


def json_logs(result: subprocess.CompletedProcess, tag: str):
    """The JSON records fairseq logged under ``| tag |`` (train_inner, valid, train)."""
    records = []
    for line in (result.stdout + result.stderr).splitlines():
        if f"| {tag} |" in line:
            records.append(json.loads(line.split(f"| {tag} |", 1)[1]))
    return records


#: fairseq's dynamic loss scaling in half precision, on CPU (the model in float16)
HALF_PRECISION = ["--memory-efficient-fp16", "--fp16-init-scale", "128", "--no-save"]


def assert_half_precision_run(result: subprocess.CompletedProcess, updates: int) -> None:
    """A run with :data:`HALF_PRECISION` (and ``--log-interval 1``) took ``updates`` updates (an
    overflowing one is skipped and not counted) with finite losses, its loss scale above
    fairseq's minimum at the end: the scale settled instead of overflowing at every step."""
    records = json_logs(check(result), "train_inner")
    assert [int(r["num_updates"]) for r in records] == list(range(1, updates + 1))
    assert all(math.isfinite(float(r["loss"])) for r in records), records
    assert float(records[-1]["loss_scale"]) >= 1.0, records[-1]


def model_params(checkpoint: Path):
    return torch.load(checkpoint, map_location="cpu")["model"]


def assert_same_params(a: Path, b: Path) -> None:
    pa, pb = model_params(a), model_params(b)
    assert pa.keys() == pb.keys()
    for k in pa:
        assert torch.equal(pa[k], pb[k]), f"parameter {k} differs between {a} and {b}"


def build_in_process(argv):
    """``(task, model, criterion, optimizer, cfg)`` as fairseq-train builds them (the package's helper)."""
    from fairseq_maskplug.commands.train_cli import build_in_process as build

    return build(argv)


def binarize_with_reordered_dictionary(dictionary: Path, text: Path, destdir: Path) -> Path:
    """``text`` binarized into ``destdir`` with a copy of ``dictionary`` whose first two symbols are
    swapped: the same size, so every shape fits while token ids mean other words."""
    lines = dictionary.read_text().splitlines()
    lines[0], lines[1] = lines[1], lines[0]
    swapped = destdir.parent / f"{destdir.name}.dict.txt"
    swapped.write_text("\n".join(lines) + "\n")
    check(run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", text, "--srcdict", swapped,
               "--destdir", destdir, "--workers", "1"]))
    return destdir


def transformers_or_skip():
    """``transformers`` (through the plugin's import, which hides a broken torchaudio), or the calling test
    module skipped: the ``[hf]`` extra is optional (CI installs it)."""
    import pytest

    from fairseq_maskplug.interop import import_transformers
    try:
        return import_transformers()
    except ImportError as error:
        pytest.skip(f"Hugging Face extra not installed ({error})", allow_module_level=True)
