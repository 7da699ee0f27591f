"""What each masking policy masks (Ye, Li et al. 2021: "learned masks are more customised"):
over the first ``--lines`` sentences of the recipe's corpus, one policy draw per sentence
(seed 1, epoch 1, as ``guided_denoising`` would draw it for a one-sentence block):

* share of chosen spans (runs of chosen tokens) that are exactly a named entity of the
  corpus's spaCy NER (``text/news.train.spans.tsv``), and share of chosen tokens inside one;
* entity-type mix of the entities the chosen spans overlap;
* token frequency: the Zipf rank of every chosen token (its rank in ``dict.txt``, which
  fairseq-preprocess sorts by count), as a histogram with logarithmic bins.

Policies: ``rand`` (random 15%), ``ssm`` (salient_span), and learned span policies named by
their tracks ``span_start_NAME``/``span_end_NAME`` (``preprocess.score_spans``). Prints one
JSON summary and writes a PNG (matplotlib, the ``[plot]`` extra)::

    python recipes/mask_analysis.py --data work/bart/data --output masks.png --policies rand ssm sup meta
"""

import argparse
import dataclasses
import json
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def policy_config(**overrides):
    """Every registered policy's options at their defaults, with ``overrides``."""
    from fairseq_maskplug.masking import policy_option_dataclasses

    values = {"mask_prob": 0.15}
    for options in policy_option_dataclasses():
        for f in dataclasses.fields(options):
            values[f.name] = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    return SimpleNamespace(**{**values, **overrides})


def build_policy(name: str):
    from fairseq_maskplug.masking import build_mask_policy

    if name == "rand":
        return build_mask_policy("random", policy_config())
    if name == "ssm":
        return build_mask_policy("salient_span", policy_config())
    return build_mask_policy("learned_span", policy_config(learned_start_track=f"span_start_{name}",
                                                           learned_end_track=f"span_end_{name}"))


def read_entities(path: Path, lines: int):
    """``{line: {(start, end): label}}`` (token positions, end exclusive) for the first ``lines`` lines."""
    entities = {}
    for row in path.read_text(encoding="utf-8").splitlines()[1:]:
        line, start, end, label = row.split("\t")
        if int(line) < lines:
            entities.setdefault(int(line), {})[(int(start), int(end))] = label
    return entities


def analyse(policy, tokens, side, entities, nspecial: int, special_ids):
    from fairseq_maskplug.masking import maskable_positions
    from fairseq_maskplug.masking.seq2seq import chosen_runs

    spans = exact = chosen_tokens = inside = 0
    labels, ranks = Counter(), []
    for line in range(len(tokens)):
        ids = tokens[line]
        maskable = maskable_positions(ids, special_ids)
        mask = policy.choose(ids, maskable, {k: v[line] for k, v in side.items()}, np.random.default_rng((1, 1, line)))
        ents = entities.get(line, {})
        covered = np.zeros(len(ids), dtype=bool)
        for (s, e) in ents:
            covered[s:e] = True
        chosen_tokens += int(mask.sum())
        inside += int((mask & covered).sum())
        ranks.extend((ids[mask] - nspecial + 1).tolist())
        for start, end in zip(*chosen_runs(mask)):
            spans += 1
            exact += (int(start), int(end)) in ents
            for (s, e), label in ents.items():
                if s < end and start < e:
                    labels[label] += 1
    return {"spans": spans, "entity_spans": round(exact / max(spans, 1), 4),
            "tokens_in_entities": round(inside / max(chosen_tokens, 1), 4), "tokens": chosen_tokens,
            "labels": dict(labels.most_common()), "median_rank": float(np.median(ranks)) if ranks else None}, ranks


def plot(results, ranks, output: Path, vocabulary: int):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    x = np.arange(len(names))
    axes[0].bar(x - 0.2, [100 * results[n]["entity_spans"] for n in names], 0.4, label="chosen spans = an entity")
    axes[0].bar(x + 0.2, [100 * results[n]["tokens_in_entities"] for n in names], 0.4,
                label="chosen tokens in an entity")
    axes[0].set_xticks(x, names)
    axes[0].set_ylabel("%")
    axes[0].legend()
    axes[0].set_title("named entities")
    top = [label for label, _ in Counter({k: v for n in names for k, v in results[n]["labels"].items()}).most_common(6)]
    bottom = np.zeros(len(names))
    for label in top + ["other"]:
        shares = []
        for n in names:
            counts = results[n]["labels"]
            total = max(sum(counts.values()), 1)
            value = counts.get(label, 0) if label != "other" else sum(v for k, v in counts.items() if k not in top)
            shares.append(100 * value / total)
        axes[1].bar(x, shares, 0.6, bottom=bottom, label=label)
        bottom += np.array(shares)
    axes[1].set_xticks(x, names)
    axes[1].set_ylabel("% of entity overlaps")
    axes[1].legend(fontsize=8)
    axes[1].set_title("entity types of chosen spans")
    bins = np.logspace(0, np.log10(vocabulary), 25)
    for n in names:
        axes[2].hist(ranks[n], bins=bins, histtype="step", density=True, label=n)
    axes[2].set_xscale("log")
    axes[2].set_xlabel("Zipf rank of chosen tokens (1 = most frequent)")
    axes[2].set_ylabel("density")
    axes[2].legend()
    axes[2].set_title("token frequency")
    fig.tight_layout()
    fig.savefig(output, dpi=110)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="prepare_bart_data output (news/, text/)")
    parser.add_argument("--output", type=Path, required=True, help="PNG to write")
    parser.add_argument("--policies", nargs="+", default=["rand", "ssm", "sup", "meta"])
    parser.add_argument("--lines", type=int, default=3000, help="corpus sentences analysed")
    args = parser.parse_args(argv)
    from fairseq.data import Dictionary
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    from fairseq_maskplug.data import load_side_info

    split = str(args.data / "news" / "train")
    d = Dictionary.load(str(args.data / "news" / "dict.txt"))
    dataset = MMapIndexedDataset(split)
    n = min(args.lines, len(dataset))
    tokens = [dataset[i].numpy() for i in range(n)]
    entities = read_entities(args.data / "text" / "news.train.spans.tsv", n)
    results, ranks = {}, {}
    for name in args.policies:
        policy = build_policy(name)
        side = {}
        for track in policy.side_info_names:
            loaded = load_side_info(split, track, dataset, "train", policy.side_info_rules[track])
            side[track] = [loaded[i].numpy() for i in range(n)]
        results[name], ranks[name] = analyse(policy, tokens, side, entities, d.nspecial,
                                             (d.bos(), d.eos(), d.pad(), d.unk()))
    plot(results, ranks, args.output, len(d))
    print(json.dumps({"lines": n, "png": str(args.output), "policies": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
