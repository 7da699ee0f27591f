"""Run real fairseq-preprocess / fairseq-train on tiny generated data."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

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


def run(args, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env,
                          cwd=REPO, **kwargs)


def check(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"command failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return result


def preprocess(destdir: Path, trainpref: Path, validpref: Path = None) -> Path:
    args = [BIN / "fairseq-preprocess", "--only-source", "--trainpref", trainpref,
            "--destdir", destdir, "--workers", "1"]
    if validpref:
        args += ["--validpref", validpref]
    check(run(args))
    return destdir


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


def model_params(checkpoint: Path):
    return torch.load(checkpoint, map_location="cpu")["model"]


def assert_same_params(a: Path, b: Path) -> None:
    pa, pb = model_params(a), model_params(b)
    assert pa.keys() == pb.keys()
    for k in pa:
        assert torch.equal(pa[k], pb[k]), f"parameter {k} differs between {a} and {b}"


def build_in_process(argv):
    """``(task, model, criterion, optimizer, cfg)`` as fairseq-train builds them from ``argv``
    (train and valid loaded, torch seeded with 0)."""
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
