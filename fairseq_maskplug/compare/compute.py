"""What each unit's training cost, so that a comparison is read at its compute as TLM's is (Yao et al. 2022 report
each model's training FLOPs beside its score; issue 90): the tokens each stage trained on, from its log (fairseq's
per-epoch ``train_wpb``, tokens per batch, times the updates of that epoch), and an estimate of the training
FLOPs, 6 N D (Kaplan et al. 2020, Section 2.1: about 6 floating-point operations per parameter and token for the
forward and backward passes; N here counts every parameter of the model, embeddings included, D the tokens)."""

import json
from pathlib import Path
from typing import Dict, Optional

#: the stages whose tokens are counted (a unit's ``logs/STAGE.log``)
STAGES = ("pretrain", "finetune")
#: training FLOPs per parameter and token (forward and backward)
FLOPS_PER_PARAMETER_TOKEN = 6


def stage_tokens(log: Path) -> Optional[int]:
    """The tokens a fairseq training read, from its log's per-epoch ``train`` records (``--log-format json``):
    the sum over epochs of ``train_wpb`` times that epoch's updates; None without such a record."""
    if not log.is_file():
        return None
    tokens, updates, found = 0.0, 0, False
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if "| train | {" not in line:
            continue
        record = json.loads(line.split("| train | ", 1)[1])
        if "train_wpb" not in record or "train_num_updates" not in record:
            continue
        done = int(float(record["train_num_updates"]))
        tokens += float(record["train_wpb"]) * (done - updates)
        updates, found = done, True
    return round(tokens) if found else None


def unit_compute(unit: Path) -> Dict[str, Optional[int]]:
    """``{STAGE_tokens: tokens or None}`` of one unit's stages."""
    return {f"{stage}_tokens": stage_tokens(unit / "logs" / f"{stage}.log") for stage in STAGES}


def model_parameters(checkpoint: Path) -> Optional[int]:
    """The parameters of the model a plan starts from (its checkpoint's ``model`` state), or None unreadable."""
    import torch

    try:
        state = torch.load(str(checkpoint), map_location="cpu", weights_only=False)["model"]
    except (OSError, KeyError, RuntimeError, ValueError):
        return None
    return int(sum(tensor.numel() for tensor in state.values()))


def compute_lines(data: dict) -> list:
    """The report's compute table: per arm, the mean tokens of its pre-training and fine-tuning over its units, the
    FLOPs estimate of both (6 N D), with N the model's parameters (``meta.parameters``), and the mean wall time of a
    unit, its stages summed (``meta.stage_seconds``; in brackets how many units were timed)."""
    parameters = data["meta"].get("parameters")
    seconds = data["meta"].get("stage_seconds") or {}
    lines = ["| arm | units | pre-training tokens | fine-tuning tokens | training FLOPs (6 N D) | wall time a unit "
             "(s, mean of its timed units, stages summed) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for arm in [a["name"] for a in data["meta"]["arms"]]:
        units = [c for c in data.get("compute", []) if c["row"] == arm]
        mean = {}
        for stage in STAGES:
            counted = [c[f"{stage}_tokens"] for c in units if c.get(f"{stage}_tokens") is not None]
            mean[stage] = sum(counted) / len(counted) if counted else None
        total = sum(v for v in mean.values() if v is not None)
        flops = f"{FLOPS_PER_PARAMETER_TOKEN * parameters * total:.2e}" if parameters and total else "-"
        cells = [f"{mean[s]:,.0f}" if mean[s] is not None else "-" for s in STAGES]
        walls = [sum(stages.values()) for unit, stages in seconds.items() if unit.rsplit(":", 1)[0] == arm and stages]
        wall = f"{sum(walls) / len(walls):,.0f} ({len(walls)})" if walls else "-"
        lines.append(f"| {arm} | {len(units)} | {cells[0]} | {cells[1]} | {flops} | {wall} |")
    lines.append("")
    lines.append(f"N = {parameters:,} parameters (every one, embeddings included); tokens: each stage's tokens per "
                 "batch times its updates, from its log." if parameters else "N: the model was not readable.")
    return lines
