"""Whether each unit of a comparison measured anything (docs/compare.md, "Reading a report"): an arm
whose realised mask rate is far below its baseline's (a tagger that tagged almost nothing), a track the policy
read that cannot tell tokens apart, a classifier that predicts fewer classes than the task has. Each is read
from what the unit left (its logs and results) when the report is collected, and stored with the report
(``health``: one record per arm and seed), so a page renders it from the stored file alone.

The thresholds are ours, each stated beside its check: a comparison is not refused for them, it is marked.
"""

import json
import re
from pathlib import Path
from typing import Dict, List, Optional

#: an arm-seed whose realised mask rate is below this share of its reference's (the baseline's in that seed, or
#: where the baseline does not pre-train the largest of that seed's arms) is marked: ours, "far from its
#: baseline's" made a number (a third; issue 86's case: 0.6% against 15%)
LOW_MASK_SHARE = 1 / 3

#: fairseq's JSON log line of a training interval, epoch or validation: ``... | train_inner | {...}``, ``train``,
#: ``valid``
LOG_RECORD = re.compile(r"\| (train_inner|train|valid) \| (\{.*\})\s*$")
#: the line a degenerate track leaves in a producer's or a training's log (fairseq_maskplug/data/side_info.py)
DEGENERATE = "masks as if it had no information"


def mask_rate(log: Path, key: str = "mask_rate") -> Optional[float]:
    """The realised mask rate of a pre-training log (``mask_rate``, the share of maskable tokens chosen, logged by
    the package's MLM tasks; with ``key="unit_mask_rate"`` the share of the policy's own units chosen, logged where
    a unit spans several tokens: whole words, PMI n-grams, spans, entities): the mean of its epoch records, else of
    its interval records; None where the log has neither (no pre-training, or a task that does not log it)."""
    found = log_records(log)
    epochs = [float(r[f"train_{key}"]) for kind, r in found if kind == "train" and f"train_{key}" in r]
    intervals = [float(r[key]) for kind, r in found if kind == "train_inner" and key in r]
    values = epochs or intervals
    return sum(values) / len(values) if values else None


def log_records(log: Path) -> List[tuple]:
    """``(kind, record)`` of every JSON record of a fairseq log (kind ``train_inner``, ``train`` or ``valid``), in
    order; none where the log is absent."""
    if not log.is_file():
        return []
    out = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        found = LOG_RECORD.search(line)
        if found:
            try:
                out.append((found.group(1), json.loads(found.group(2))))
            except json.JSONDecodeError:
                continue
    return out


def best_valid_f1(log: Path) -> Optional[float]:
    """The best validation F1 (in %) a producer's training logged (the selective-masking tagger's
    ``token_importance`` criterion logs ``f1``); None where it logged none."""
    values = [float(r["valid_f1"]) for kind, r in log_records(log) if kind == "valid" and "valid_f1" in r]
    return max(values) if values else None


def degenerate_lines(logs: List[Path]) -> List[str]:
    """The degenerate-track lines of ``logs`` (each once, the log's own words after its level)."""
    found = []
    for log in logs:
        if log.is_file():
            for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
                if DEGENERATE in line:
                    text = line.split(" | ")[-1].strip()
                    found += [text] if text not in found else []
    return found


def task_classes(labelled: Path) -> Optional[int]:
    """The labelled task's classes (:func:`~.commands.label_count`, what its fine-tuning's ``--num-classes`` is);
    None where it has no ``label/dict.txt`` (a task that is not a classifier's)."""
    from .commands import label_count

    return (label_count(labelled) or None) if (labelled / "label" / "dict.txt").is_file() else None


def reference_rates(records: List[dict], baseline: str) -> Dict[int, Optional[float]]:
    """Each seed's reference mask rate: the baseline's where it pre-trains, else the largest of that seed's."""
    out = {}
    for seed in sorted({r["seed"] for r in records}):
        rates = {r["row"]: r["mask_rate"] for r in records if r["seed"] == seed and r["mask_rate"] is not None}
        out[seed] = rates.get(baseline, max(rates.values()) if rates else None)
    return out


def problems(records: List[dict], baseline: str) -> List[dict]:
    """``records`` (``row``, ``seed``, ``mask_rate``, ``classes``, ``classes_predicted``, ``warnings``) with each
    one's ``problems``: the sentences saying what it did not measure (empty where healthy)."""
    reference = reference_rates(records, baseline)
    for r in records:
        found = []
        ref = reference.get(r["seed"])
        if r["mask_rate"] is not None and ref and r["mask_rate"] < LOW_MASK_SHARE * ref:
            found.append(f"masked {100 * r['mask_rate']:.1f}% of tokens against {100 * ref:.1f}% "
                         f"({'the baseline' if r['row'] != baseline else 'its seed'}'s), under a third")
        if r.get("classes") and r.get("classes_predicted") is not None and r["classes_predicted"] < r["classes"]:
            found.append(f"its classifier predicted {r['classes_predicted']} of the task's {r['classes']} classes")
        found += [f"degenerate track: {w}" for w in r.get("warnings", [])]
        r["problems"] = found
    return records


def failing(data: dict) -> Dict[str, List[int]]:
    """``{row: [seeds whose health failed]}`` of a stored report (its ``health``)."""
    out = {}
    for r in data.get("health", []):
        if r.get("problems"):
            out.setdefault(r["row"], []).append(r["seed"])
    return out
