"""Continue pre-training an exported model with Hugging Face's Trainer and one of this project's mask policies.

    python examples/hf_trainer.py --model HF_DIR --data DATA_DIR [--split train] [--policy selective] [--steps 20]

HF_DIR is a model exported by ``fairseq-maskplug-convert --from-fairseq ... --to hf HF_DIR`` (its
``tokenizer.json`` gives the ids the fairseq data holds); DATA_DIR a masked-LM data directory of
that model written with sentencepiece (``$W/data/indomain``, the demo's) with the tracks the policy reads beside its split
(``train.importance`` for ``selective``). The raw text of each line is rebuilt from its pieces,
tokenized by the exported tokenizer (which gives the line's ids back), and given the policy's
tracks as columns; :class:`fairseq_maskplug.hf.PolicyCollator` masks each batch with fresh masks (the policy's
positions drawn as ``fairseq-train --task guided_mlm --sample-break-mode eos`` draws them), and
:func:`fairseq_maskplug.hf.PolicyTrainer` keeps the track columns under the Trainer's default arguments.
"""

import argparse
import math

from fairseq_maskplug.hf import PolicyCollator, PolicyTrainer, track_column
from fairseq_maskplug.interop import import_transformers


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="an exported HF model directory")
    parser.add_argument("--data", required=True, help="the masked-LM data directory (dict.txt, SPLIT.bin/.idx, tracks)")
    parser.add_argument("--split", default="train")
    parser.add_argument("--policy", default="selective", help="a registered mask policy")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", default=None, help="where the Trainer writes (default: MODEL-trainer)")
    args = parser.parse_args()

    transformers = import_transformers()  # transformers, with the torchaudio fairseq pulls hidden
    from fairseq.data import Dictionary, data_utils

    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    model = transformers.AutoModelForMaskedLM.from_pretrained(args.model)
    collator = PolicyCollator(tokenizer, args.policy, seed=1)

    prefix = f"{args.data}/{args.split}"
    dictionary = Dictionary.load(f"{args.data}/dict.txt")
    lines = data_utils.load_indexed_dataset(prefix, dictionary)
    columns = {name: track_column(prefix, name, tokenizer=tokenizer) for name in collator.tracks}
    rows, width = [], tokenizer.model_max_length  # a longer line is cut, as --shorten-method truncate cuts it
    for i in range(len(lines)):
        text = tokenizer.convert_tokens_to_string([dictionary[t] for t in lines[i][:-1].tolist()])
        ids = tokenizer(text)["input_ids"]
        if ids[1:] != lines[i].tolist():  # <s> + the line's pieces and </s>: a line the tokenizer reads otherwise
            continue
        rows.append({"input_ids": ids[:width], "idx": i, **{n: column[i][:width] for n, column in columns.items()}})
    print(f"{len(rows)} of {len(lines)} lines of {prefix} tokenized back to their ids; policy {args.policy} "
          f"reads {list(collator.tracks) or 'no track'}")
    if not rows:
        raise SystemExit(f"error: no line of {prefix} tokenizes back to its ids: is {args.model} this data's model?")

    train_steps(transformers, model, rows, collator, args.steps, args.out or f"{args.model}-trainer", args.policy)


def train_steps(transformers, model, rows, collator, steps: int, out: str, policy: str) -> None:
    """``steps`` Trainer steps on ``rows`` with ``collator`` (batches of 8, lr 1e-4, on the CPU); an error unless every
    logged loss is finite; the first and last loss printed. (examples/hf_dataset_pmi.py trains with it too.)"""
    trainer = PolicyTrainer(
        model=model, train_dataset=rows, data_collator=collator,
        args=transformers.TrainingArguments(
            output_dir=out, max_steps=steps, per_device_train_batch_size=8, learning_rate=1e-4,
            logging_steps=max(1, steps // 4), save_strategy="no", report_to=[], use_cpu=True))
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    if not losses or not all(math.isfinite(x) for x in losses):
        raise SystemExit(f"error: training logged no finite loss ({losses})")
    print(f"trained {steps} steps with the {policy} collator: loss {losses[0]:.3f} -> {losses[-1]:.3f}")


if __name__ == "__main__":
    main()
