"""Exact match of a fine-tuned probe checkpoint on the probe's seen (test) and held-out (test1) splits.

Runs ``fairseq-generate --task translation -s q -t a`` (beam search) on each split, compares
each hypothesis with its reference answer after :func:`fairseq_maskplug.evaluation.probe.normalise_answer`
(pieces joined, case-folded) and writes ``{"seen": EM, "heldout": EM, "n_seen": ..., ...}``
(EM in percent) and ``correct_seen`` / ``correct_heldout`` (one 0 or 1 per question, in corpus order)
to ``--output``.

    python recipes/probe_em.py --checkpoint CK/checkpoint_best.pt --data work/bart/data/probe --output r.json
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fairseq.data.indexed_dataset import MMapIndexedDataset  # noqa: E402

from fairseq_maskplug.common.atomic import write_text  # noqa: E402
from fairseq_maskplug.evaluation.probe import exact_match, normalise_answer  # noqa: E402

SPLITS = {"seen": "test", "heldout": "test1"}


def detokenize(pieces: str) -> str:
    return pieces.replace(" ", "").replace("\u2581", " ").strip()


def generate(checkpoint: Path, data: Path, split: str, extra) -> tuple:
    """``(hypotheses, references)`` of ``split``, detokenized, in corpus order."""
    args = [str(Path(sys.executable).parent / "fairseq-generate"), str(data), "--user-dir", str(REPO / "fairseq_maskplug"),
            "--task", "translation", "-s", "q", "-t", "a", "--path", str(checkpoint), "--gen-subset", split,
            "--beam", "4", "--max-len-b", "24", "--batch-size", "64",
            # with its default multiple of 8, fairseq-generate silently leaves some items out
            "--required-batch-size-multiple", "1", *extra]
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"fairseq-generate failed on {split}:\n{result.stderr[-3000:]}")
    hyps, refs = {}, {}
    for line in result.stdout.splitlines():
        if line.startswith("H-"):
            key, _, text = line.split("\t", 2)
            hyps[int(key[2:])] = detokenize(text)
        elif line.startswith("T-"):
            key, text = line.split("\t", 1)
            refs[int(key[2:])] = detokenize(text)
    expected = len(MMapIndexedDataset(str(data / f"{split}.q-a.a")))
    if set(hyps) != set(refs) or len(refs) != expected:
        raise RuntimeError(f"fairseq-generate on {split}: {len(hyps)} hypotheses and {len(refs)} references "
                           f"for {expected} questions")
    order = sorted(refs)
    return [hyps[i] for i in order], [refs[i] for i in order]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True, help="the probe's binarized q -> a data")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--cpu", action="store_true", help="generate on the CPU (without a GPU: always)")
    parser.add_argument("--split-output", metavar="PATTERN",
                        help="also write each split's record as fairseq-maskplug-evaluate does (split, n, accuracy "
                             "= EM in percent, correct) to PATTERN with {split} its name: the files "
                             "fairseq-maskplug-compare's [evaluate] command writes")
    args = parser.parse_args()
    import torch

    cpu = args.cpu or not torch.cuda.is_available()
    result = {}
    for name, split in SPLITS.items():
        hyps, refs = generate(args.checkpoint, args.data, split, ["--cpu"] if cpu else [])
        result[name] = round(exact_match(hyps, refs), 2)
        result[f"n_{name}"] = len(refs)
        # per question, in corpus order: the paired tests over seeds x questions (benchmarks/gpu_science.py)
        result[f"correct_{name}"] = "".join("1" if normalise_answer(h) == normalise_answer(r) else "0"
                                            for h, r in zip(hyps, refs))
        result[f"examples_{name}"] = [{"hypothesis": h, "reference": r} for h, r in list(zip(hyps, refs))[:5]]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_text(str(args.output), json.dumps(result, indent=1) + "\n")  # atomically: the harness reads it as it lands
    for name in SPLITS if args.split_output else ():
        record = {"split": name, "n": result[f"n_{name}"], "accuracy": result[name], "units": "percent",
                  "correct": result[f"correct_{name}"]}
        write_text(args.split_output.replace("{split}", name), json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if not k.startswith(("examples", "correct"))}))


if __name__ == "__main__":
    main()
