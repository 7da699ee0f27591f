"""The TLM recipe's table: test scores (mean ± std over seeds), tokens and FLOPs per row, and
the differences that answer "did BM25 retrieval help", in standard errors.

    python recipes/tlm_table.py --results DIR --logs DIR --general-log LOG --checkpoint CK --seeds "1 2"

Tokens per run are read from fairseq's per-epoch ``train`` records (words per batch × updates
of the epoch), summed over stage 1 and stage 2 (for general-ft: the general MLM run and the
fine-tuning). FLOPs = 6 × parameters × tokens (the usual training estimate; the parameters
are counted in ``--checkpoint``).
"""

import argparse
import json
import math
import statistics
from pathlib import Path

from results_table import fmt  # recipes/ is on the path when this script runs

ROWS = ("task-only", "tlm-bm25", "tlm-dsir", "tlm-random", "general-ft")
COMPARISONS = (("tlm-bm25", "tlm-random"), ("tlm-dsir", "tlm-random"), ("tlm-bm25", "tlm-dsir"),
               ("tlm-bm25", "task-only"), ("tlm-bm25", "general-ft"))


def train_tokens(log: Path) -> int:
    """Σ over epochs of ``train_wpb`` × the epoch's updates, from a fairseq JSON log."""
    tokens, previous = 0.0, 0
    for line in log.read_text().splitlines():
        if "| train | " in line:
            record = json.loads(line.split("| train | ", 1)[1])
            updates = int(float(record["train_num_updates"]))
            tokens += float(record["train_wpb"]) * (updates - previous)
            previous = updates
    if previous == 0:
        raise SystemExit(f"{log}: no per-epoch train record")
    return int(tokens)


def parameters(checkpoint: Path) -> int:
    import torch

    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["model"]
    return sum(t.numel() for k, t in state.items() if t.is_floating_point() and "classification_heads" not in k)


def mean_sd(values):
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else float("nan"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--logs", type=Path, required=True)
    parser.add_argument("--general-log", type=Path, default=None,
                        help="log of the general MLM stage (absent with PRETRAINED: its tokens are not counted)")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--seeds", required=True)
    parser.add_argument("--external", type=Path, help="external.json of prepare_tlm_data (review shares)")
    args = parser.parse_args()
    seeds = args.seeds.split()
    n_params = parameters(args.checkpoint)
    score, tokens = {}, {}
    for row in ROWS:
        score[row] = {(split, key): [] for split in ("valid", "test") for key in ("accuracy", "macro_f1")}
        tokens[row] = []
        for seed in seeds:
            for split in ("valid", "test"):
                record = json.loads((args.results / f"{row}__seed{seed}.{split}.json").read_text())
                for key in ("accuracy", "macro_f1"):
                    score[row][(split, key)].append(record[key])
            if row == "general-ft":
                logs = [args.logs / f"tlm_general-ft__seed{seed}.log"]
                if args.general_log is not None and args.general_log.exists():
                    logs.insert(0, args.general_log)
            else:
                logs = [args.logs / f"tlm_s1_{row}__seed{seed}.log", args.logs / f"tlm_s2_{row}__seed{seed}.log"]
            tokens[row].append(sum(train_tokens(log) for log in logs))
    print(f"parameters (encoder + LM head): {n_params:,}")
    if args.general_log is None or not args.general_log.exists():
        print("general-ft: tokens and FLOPs count fine-tuning only (no general-stage log: a released model)")
    if args.external:
        shares = json.loads(args.external.read_text())
        print(f"review documents: {100 * shares['review_share_bm25']:.1f}% of BM25's {shares['retrieved']}, "
              f"{100 * shares['review_share_dsir']:.1f}% of DSIR's {shares['documents_dsir']}, "
              f"{100 * shares['review_share_random']:.1f}% of random's (corpus: {100 * shares['review_share_corpus']:.1f}%)")
    header = ["row", "seeds", "valid acc", "test acc", "test macro-F1", "tokens (M)", "FLOPs (1e12)"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for row in ROWS:
        s, t = score[row], statistics.mean(tokens[row])
        print(f"| {row} | {len(seeds)} | {fmt(s[('valid', 'accuracy')])} | {fmt(s[('test', 'accuracy')])} | "
              f"{fmt(s[('test', 'macro_f1')])} | {t / 1e6:.2f} | {6 * n_params * t / 1e12:.1f} |")
    print()
    for a, b in COMPARISONS:
        (ma, sa), (mb, sb) = (mean_sd(score[r][("test", "macro_f1")]) for r in (a, b))
        se = math.sqrt((sa ** 2 + sb ** 2) / len(seeds)) if len(seeds) > 1 else float("nan")
        z = (ma - mb) / se if se and not math.isnan(se) else float("nan")
        print(f"test macro-F1 {a} - {b}: {ma - mb:+.1f} points"
              + ("" if math.isnan(z) else f" ({z:+.1f} standard errors of the difference)"))


if __name__ == "__main__":
    main()
