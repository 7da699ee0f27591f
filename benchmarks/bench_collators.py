"""Every mask policy's Hugging Face collator (``fairseq_maskplug.hf.PolicyCollator``) against ``transformers``'
``DataCollatorForLanguageModeling``, in one run, one thread: rows per second of batches of ``--batch`` examples of
up to ``--tokens`` tokens (issue 78, item 4: the collators loop over rows in Python, on the training process's
critical path).

Two tokenizers made here, each a row set: ``word`` (``tokenizers``' WordLevel over Zipf words, ``<s> ... </s>``)
and ``bytebpe`` (a byte-level BPE of 5,000 ids trained by ``tokenizers`` on the same kind of text, as RoBERTa's;
issue 92, item 6: HF's collator draws its random tokens over the whole vocabulary, ours over the non-special
ids). Every policy's stand-in track values as columns (``stand_in_tracks.py``'s ranges; a draw's cost depends on their shape, not their
values); each collator is timed over the same batches, repeats interleaved, median. PTW's collator draws with its
initial statistics (no training here).

Last line: ``ratio_random=<PolicyCollator random / HF rows per second> ratio_min=<slowest policy / HF> ...`` over
every row set (the smaller ratio of the two).
With ``--out FILE`` the rows per second of every repeat are stored (``"kind": "collator_speed"``, written
atomically); ``pages.py --update`` makes the Hugging Face page's table from it (:func:`summary_parts`).

    python benchmarks/bench_collators.py [--batches 20] [--repeats 5] [--out FILE] [--smoke]
"""

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from smoke import benchmark_parser, shrink  # noqa: E402

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]


def word_tokenizer(vocab: int):
    """A fast tokenizer over the words ``w0 ... w{vocab-1}`` with fairseq's four specials first and ``<mask>`` last."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = {token: i for i, token in enumerate(SPECIALS + [f"w{w}" for w in range(vocab)] + ["<mask>"])}
    tokenizer = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[
        ("<s>", words["<s>"]), ("</s>", words["</s>"])])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>", mask_token="<mask>")


def zipf_text(words: int, rng: np.random.Generator, vocab: int = 5000) -> str:
    """``words`` Zipf-distributed words ``w0 ... w{vocab-1}``, spaced."""
    return " ".join(f"w{w}" for w in rng.zipf(1.3, words) % vocab)


def byte_bpe_tokenizer(vocab: int):
    """A byte-level BPE of ``vocab`` ids trained by ``tokenizers`` on Zipf text, fairseq's four specials first and
    ``<mask>`` added last (the order fairseq's dictionaries give), wrapped as RoBERTa's fast tokenizer."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    rng = np.random.default_rng(1)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator((zipf_text(64, rng) for _ in range(3000)), vocab_size=vocab, show_progress=False,
                            special_tokens=SPECIALS)
    bpe.add_special_tokens(["<mask>"])
    return RobertaTokenizerFast(tokenizer_object=bpe._tokenizer)


TOKENIZERS = {"word": lambda: word_tokenizer(5000), "bytebpe": lambda: byte_bpe_tokenizer(5000)}


def examples(tokenizer, count: int, tokens: int, rng: np.random.Generator) -> list:
    """``count`` examples of 8 to ``tokens`` - 2 Zipf words (a byte-level BPE's pieces cut to ``tokens``, its
    ``</s>`` kept) with every built-in policy's track as a column."""
    from fairseq_maskplug.masking.salient import span_ids

    out = []
    for i in range(count):
        ids = tokenizer(zipf_text(int(rng.integers(8, tokens - 1)), rng))["input_ids"]
        ids = ids[:tokens - 1] + ids[-1:] if len(ids) > tokens else ids
        n = len(ids)
        spans = span_ids(n, [(1, 3)])  # one salient span of 2 tokens
        out.append({"input_ids": ids, "idx": i, "plt": rng.uniform(0.01, 1.0, n), "importance": rng.random(n),
                    "salient_spans": spans, "span_start": rng.normal(size=n), "span_end": rng.normal(size=n),
                    "pmi_units": np.append((rng.random(n - 1) < 0.6) | (np.arange(n - 1) == 0), 0).astype(np.uint8),
                    "pos": rng.integers(0, 17, n), "informask_rate": rng.uniform(0.0, 0.3, n),
                    "token_likelihood": rng.uniform(0.8, 1.0, n), "difference_score": rng.random(n)})
    return out


def rows_per_second(collate, batches) -> float:
    began = time.perf_counter()
    rows = 0
    for batch in batches:
        collate(batch)
        rows += len(batch)
    return rows / (time.perf_counter() - began)


#: the targets: ``random`` at HF's rows per second on either tokenizer (issues 78 and 92), the other policies at 0.6
#: of it (issue 92; 0.5 in issue 78)
TARGET_RANDOM, TARGET_TRACKS = 1.0, 0.6


def summary_parts(data: dict) -> dict:
    """``collators``: every policy's median rows per second against HF's collator and the targets, as lines, the
    first a ``## `` heading (``pages.py --update`` writes it into the pages)."""
    meta = data["meta"]
    sets = data["rows"] if "hf" not in data["rows"] else {"word": data["rows"]}  # older results: one row set
    medians = {kind: {name: statistics.median(values) for name, values in rows.items()} for kind, rows in sets.items()}
    kinds = list(medians)
    lines = [f"## rows per second of every policy's collator against transformers' DataCollatorForLanguageModeling "
             f"({meta['batch']}-row batches of up to {meta['tokens']} tokens, {meta['batches']} batches, median of "
             f"{meta['repeats']} interleaved repeats, one thread; tokenizers: {', '.join(kinds)})", "",
             "| collator | " + " | ".join(f"{kind} rows/s | vs HF" for kind in kinds) + " | target |",
             "| --- | " + " | ".join("--- | ---" for _ in kinds) + " | --- |",
             "| HF DataCollatorForLanguageModeling | " + " | ".join(f"{medians[k]['hf']:,.0f} | 1.00" for k in kinds)
             + " | |"]
    below = []
    for name in sorted(n for n in medians[kinds[0]] if n != "hf"):
        target = TARGET_RANDOM if name == "random" else TARGET_TRACKS
        ratios = {kind: medians[kind][name] / medians[kind]["hf"] for kind in kinds}
        below += [f"{name} ({kind})" for kind, ratio in ratios.items() if ratio < target]
        lines.append(f"| {name} | " + " | ".join(f"{medians[k][name]:,.0f} | {ratios[k]:.2f}" for k in kinds)
                     + f" | {target:.1f} |")
    lines += ["", "Below target: " + (", ".join(below) if below else "none") + "."]
    return {"collators": lines}


def main() -> int:
    parser = benchmark_parser(__doc__, repeats="interleaved repeats; the median is reported")
    parser.add_argument("--batch", type=int, default=32, help="examples per batch")
    parser.add_argument("--tokens", type=int, default=128, help="most tokens of an example")
    parser.add_argument("--batches", type=int, default=20, help="batches timed per repeat")
    parser.add_argument("--out", help="store every repeat's rows per second here (JSON, written atomically)")
    parser.add_argument("--tokenizers", default=",".join(TOKENIZERS), help=f"row sets, of {', '.join(TOKENIZERS)}")
    args = shrink(parser.parse_args(), batches=2, repeats=1, batch=4, tokens=24)
    import torch
    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers import DataCollatorForLanguageModeling

    import fairseq_maskplug.plugin  # noqa: F401  (the policies' registrations)
    from fairseq_maskplug.hf import PolicyCollator
    from fairseq_maskplug.masking import MASK_POLICY_REGISTRY

    if args.out:  # before any work
        from fairseq_maskplug.common.atomic import check_writable
        try:
            check_writable(args.out)
        except OSError as error:
            parser.error(str(error))
    kinds = [kind for kind in args.tokenizers.split(",") if kind]
    if not kinds or any(kind not in TOKENIZERS for kind in kinds):
        parser.error(f"--tokenizers takes a comma-separated list of {', '.join(TOKENIZERS)}, got {args.tokenizers!r}")
    began = time.perf_counter()
    policies = sorted(name for name, cls in MASK_POLICY_REGISTRY.items()
                      if cls.__module__.startswith("fairseq_maskplug."))
    times, ratios = {}, {name: [] for name in policies}
    for kind in kinds:
        tokenizer = TOKENIZERS[kind]()
        data = examples(tokenizer, args.batch * args.batches, args.tokens, np.random.default_rng(0))
        batches = [data[i:i + args.batch] for i in range(0, len(data), args.batch)]
        hf = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
        plain = [[{"input_ids": e["input_ids"]} for e in batch] for batch in batches]  # what HF's collator takes
        collators = {name: PolicyCollator(tokenizer, name, {}) for name in policies}
        print(f"bench_collators ({kind}, {len(tokenizer)} ids): {len(policies)} policies and HF's collator, "
              f"{len(batches)} batches of {args.batch} examples of up to {args.tokens} tokens, {args.repeats} repeats, "
              "one thread", flush=True)
        rows_per_second(hf, plain[:1])  # one untimed batch each: first-call costs out of the timing
        for collator in collators.values():
            rows_per_second(collator, batches[:1])
        times[kind] = {name: [] for name in ["hf", *policies]}
        for _ in range(args.repeats):
            times[kind]["hf"].append(rows_per_second(hf, plain))
            for name, collator in collators.items():
                times[kind][name].append(rows_per_second(collator, batches))
        median = {name: statistics.median(values) for name, values in times[kind].items()}
        for name, value in median.items():
            ratio = "" if name == "hf" else f"  {value / median['hf']:.3f}x HF's"
            print(f"{name:>16}: {value:9,.0f} rows/s{ratio}")
            if name != "hf":
                ratios[name].append(value / median["hf"])
    if args.out:
        store(args, times, time.perf_counter() - began)
    worst = {name: min(values) for name, values in ratios.items()}
    print(f"ratio_random={worst['random']:.3f} ratio_min={min(worst.values()):.3f} "
          + " ".join(f"ratio_{name}={value:.3f}" for name, value in worst.items() if name != "random"))
    return 0


def store(args, times: dict, elapsed: float) -> None:
    """The run's rows per second with its provenance (the commit, the date, the command), written atomically."""
    import json

    from fairseq_maskplug import __version__
    from fairseq_maskplug.common.atomic import write_text
    from fairseq_maskplug.compare.report import source_commit

    meta = {"kind": "collator_speed", "device": "CPU, one thread", "commit": source_commit() or "unknown",
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "elapsed_s": round(elapsed, 1), "batch": args.batch,
            "tokens": args.tokens, "batches": args.batches, "repeats": args.repeats, "version": __version__,
            "tokenizers": list(times),
            "command": ["python", "benchmarks/bench_collators.py", *sys.argv[1:]]}
    write_text(args.out, json.dumps({"meta": meta, "rows": times}, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
