"""Continue pre-training a RoBERTa-shaped model from a local Hugging Face directory with PMI-Masking, the PMI units
computed on a ``datasets.Dataset`` with the model's own tokenizer (no fairseq data needed).

    python examples/hf_dataset_pmi.py --model HF_DIR --text FILE [--lines 2000] [--min-count 5] [--steps 20]

HF_DIR is a local model directory (an export of this project, ``fairseq-maskplug-convert --to hf``, or any
RoBERTa-shaped model whose tokenizer numbers ``<s> <pad> </s> <unk>`` 0 to 3 and holds ``<mask>`` last, as
``roberta-base``'s does); FILE holds raw text, one line per example (``--pieces FILE`` reads sentencepiece pieces,
as the demo keeps its text, and spells them back with the tokenizer). The lines become a ``datasets.Dataset``,
tokenized with ``map``; :func:`fairseq_maskplug.hf_tracks.with_track` runs ``fairseq-maskplug-pmi-units`` on them
and adds the ``pmi_units`` column; :class:`fairseq_maskplug.hf.PolicyCollator` masks whole PMI units. Without
``datasets`` installed (the ``[datasets]`` extra) the same rows are a list of dicts, from
:func:`fairseq_maskplug.hf_tracks.track_values`.
"""

import argparse


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a local Hugging Face model directory")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="raw text, one example per line")
    source.add_argument("--pieces", help="sentencepiece pieces, one example per line (the demo's $W/data/text)")
    parser.add_argument("--lines", type=int, default=2000, help="the first this many lines")
    parser.add_argument("--min-count", type=int, default=5, help="pmi-units --min-count (the paper's lexicon counts "
                        "a corpus of billions of words; a small one needs a lower count)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--num-proc", type=int, default=None, help="datasets.map worker processes")
    parser.add_argument("--out", default=None, help="where the Trainer writes (default: MODEL-pmi-trainer)")
    args = parser.parse_args()

    from fairseq_maskplug.hf import PolicyCollator
    from fairseq_maskplug.hf_tracks import track_values, with_track
    from hf_trainer import train_steps  # the other example's loop (examples/ is this script's folder)
    from fairseq_maskplug.interop import import_transformers

    transformers = import_transformers()  # transformers, with the torchaudio fairseq pulls hidden
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    model = transformers.AutoModelForMaskedLM.from_pretrained(args.model)
    with open(args.text or args.pieces, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for _, line in zip(range(args.lines), f)]
    if args.pieces:
        lines = [tokenizer.convert_tokens_to_string(line.split()) for line in lines]
    options = ["--min-count", str(args.min_count)]
    try:
        import datasets
    except ImportError:
        datasets = None
    if datasets is not None:
        rows = datasets.Dataset.from_dict({"text": lines})
        rows = rows.map(lambda batch: tokenizer(batch["text"], truncation=True), batched=True, num_proc=args.num_proc)
        rows = with_track(rows, tokenizer, "pmi-units", options)
        rows = rows.remove_columns([c for c in rows.column_names if c not in ("input_ids", "pmi_units")])
        units = sum(map(sum, rows["pmi_units"]))
    else:  # the same columns as a list of rows
        ids = [tokenizer(line, truncation=True)["input_ids"] for line in lines]
        values = track_values(lines, tokenizer, "pmi-units", options, input_ids=ids).values
        rows = [{"input_ids": i, "pmi_units": v} for i, v in zip(ids, values)]
        units = int(sum(v.sum() for v in values))
    collator = PolicyCollator(tokenizer, "pmi", seed=1)
    print(f"{len(rows)} lines of {args.text or args.pieces} with their PMI units ({units} units; "
          f"{'a datasets.Dataset' if datasets is not None else 'a list: datasets is not installed'})")

    train_steps(transformers, model, rows, collator, args.steps, args.out or f"{args.model}-pmi-trainer", "pmi")

if __name__ == "__main__":
    main()
