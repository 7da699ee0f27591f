"""Masked-LM loss of checkpoints under one fixed masking, so that runs trained with
different masking (MLM, FE-MLM subword or span, guided policies) compare fairly.

    python -m fairseq_maskplug.evaluate_mlm --data data-bin --split valid ck/checkpoint_1_50.pt ...

Every checkpoint is scored on the same blocks (the checkpoint's own blocking options)
with the same ``guided_mlm --mask-policy random`` masks (``--mask-prob``, ``--seed``,
epoch 1); prints one JSON line per checkpoint: ``{"checkpoint", "updates", "loss"}``,
the loss in base 2 as fairseq logs it.
"""

import argparse
import json
import math
import sys

import torch


@torch.no_grad()
def mlm_loss(checkpoint: str, data: str, split: str = "valid", mask_prob: float = 0.15,
             seed: int = 1, batch_size: int = 32) -> dict:
    import fairseq_maskplug  # noqa: F401
    from fairseq import checkpoint_utils, options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)
    models, saved, _ = checkpoint_utils.load_model_ensemble_and_task([checkpoint], arg_overrides={"data": data})
    model = models[0].eval()
    args = options.parse_args_and_arch(options.get_training_parser(), [
        data, "--task", "guided_mlm", "--mask-policy", "random", "--mask-prob", str(mask_prob),
        "--seed", str(seed), "--arch", "roberta_base",
        "--tokens-per-sample", str(saved.task.tokens_per_sample),
        "--sample-break-mode", str(saved.task.sample_break_mode),
        "--shorten-method", str(saved.task.shorten_method)])
    task = tasks.setup_task(convert_namespace_to_omegaconf(args).task)
    task.load_dataset(split)
    batches = task.get_batch_iterator(task.dataset(split), max_sentences=batch_size, seed=seed,
                                      epoch=1).next_epoch_itr(shuffle=False)
    total, count = 0.0, 0
    for sample in batches:
        if torch.cuda.is_available():
            model, sample = model.cuda(), utils.move_to_cuda(sample)
        masked = sample["target"].ne(task.source_dictionary.pad())
        logits = model(**sample["net_input"], masked_tokens=masked)[0]
        total += float(torch.nn.functional.cross_entropy(logits.float(), sample["target"][masked],
                                                         reduction="sum"))
        count += int(masked.sum())
    return {"checkpoint": checkpoint, "updates": int(state["optimizer_history"][-1]["num_updates"]),
            "loss": total / count / math.log(2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--data", required=True, help="binarized masked-LM data directory")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--mask-prob", type=float, default=0.15)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    for checkpoint in args.checkpoints:
        print(json.dumps(mlm_loss(checkpoint, args.data, args.split, args.mask_prob, args.seed)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
