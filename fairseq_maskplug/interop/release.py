"""fairseq release directories: ``model.pt`` (weights and the ``args`` it was trained with),
``dict.txt``, and for GPT-2 BPE models ``encoder.json`` and ``vocab.bpe`` (``roberta.base``,
``bart.base`` and the others fairseq publishes).

``python -m fairseq_maskplug.interop.release DIR`` prints the ``fairseq-train`` model options
that rebuild the release's architecture, for ``--finetune-from-model DIR/model.pt``
(``recipes/lib.sh`` reads them when ``PRETRAINED=DIR``).
"""

import sys
from argparse import Namespace
from pathlib import Path
from typing import List

from ..tools.cli import command_main

#: architecture options copied from a release, by model family (fairseq argument names)
SHAPE = {
    "roberta": ("encoder_layers", "encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_attention_heads",
                "max_positions", "activation_fn", "pooler_activation_fn", "dropout", "attention_dropout",
                "activation_dropout", "pooler_dropout", "layernorm_eps"),
    "bart": ("encoder_layers", "encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_attention_heads",
             "decoder_layers", "decoder_embed_dim", "decoder_ffn_embed_dim", "decoder_attention_heads",
             "max_source_positions", "max_target_positions", "activation_fn", "dropout", "attention_dropout",
             "activation_dropout"),
}
#: store_true options a release may have switched on
SWITCHES = ("encoder_normalize_before", "decoder_normalize_before", "untie_weights_roberta",
            "share_all_embeddings", "share_decoder_input_output_embed")


def release_files(directory: Path) -> Path:
    """``model.pt`` of a release directory, after checking that ``dict.txt`` is beside it."""
    directory = Path(directory)
    for name in ("model.pt", "dict.txt"):
        if not (directory / name).is_file():
            raise FileNotFoundError(f"{directory / name}: no such file (a fairseq release holds model.pt and dict.txt)")
    return directory / "model.pt"


def read_model_args(checkpoint: Path) -> Namespace:
    """The model options a checkpoint was trained with (old releases: ``args``; newer: ``cfg.model``)."""
    from ..integration.compat import allow_fairseq_checkpoint_globals
    from ..common.checkpoint_files import load_state
    allow_fairseq_checkpoint_globals()
    state = load_state(str(checkpoint))
    if state.get("args") is not None:
        return state["args"]
    model = (state.get("cfg") or {}).get("model")
    if model is None:
        raise ValueError(f"{checkpoint}: neither 'args' nor 'cfg.model': not a fairseq checkpoint")
    return model if isinstance(model, Namespace) else Namespace(**dict(model))


def model_options(args: Namespace) -> List[str]:
    """``fairseq-train`` options rebuilding the architecture of ``args`` (RoBERTa or BART)."""
    arch = getattr(args, "arch", None) or getattr(args, "_name", None)
    family = "bart" if arch and arch.startswith("bart") else "roberta" if arch and arch.startswith("roberta") else None
    if family is None:
        raise ValueError(f"architecture {arch!r}: only fairseq's roberta_* and bart_* releases are supported")
    options = ["--arch", arch]
    for name in SHAPE[family]:
        value = getattr(args, name, None)
        if value is not None:
            options += ["--" + name.replace("_", "-"), str(value)]
    options += ["--" + name.replace("_", "-") for name in SWITCHES if getattr(args, name, False) is True]
    return options


def build_model(model_args: List[str], data_dir: Path, head: str = None, num_classes: int = None):
    """``(model, args)``: a model built as ``fairseq-train`` builds it (task masked_lm on ``data_dir``'s
    ``dict.txt``, on the CPU), with the classification head ``head`` if given, in eval mode. Its blocks are its
    positions long (``--tokens-per-sample`` = ``--max-positions``, as in fairseq's releases; masked_lm's default,
    1,024, would outrun a 512-position model in a reader that blocks by the release's own options)."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    blocks = []
    if "--max-positions" in model_args and "--tokens-per-sample" not in model_args:
        blocks = ["--tokens-per-sample", model_args[model_args.index("--max-positions") + 1]]
    args = options.parse_args_and_arch(options.get_training_parser(),
                                       [str(data_dir), "--task", "masked_lm", "--criterion", "masked_lm",
                                        "--cpu", *blocks, *model_args])
    cfg = convert_namespace_to_omegaconf(args)
    model = tasks.setup_task(cfg.task).build_model(cfg.model)
    if head is not None:
        model.register_classification_head(head, num_classes=num_classes)
    return model.eval(), args


def save_release(directory: Path, model, args: Namespace) -> Path:
    """Write ``model.pt`` as fairseq's releases are written: the weights, the ``args`` namespace (its data
    directory ``.``: the release's own), no optimizer."""
    import torch

    path = Path(directory) / "model.pt"
    args = Namespace(**{**vars(args), "data": "."})
    torch.save({"args": args, "model": model.state_dict(), "extra_state": {},
                "optimizer_history": [{"criterion_name": "MaskedLmLoss", "optimizer_name": "AdamOptimizer",
                                       "lr_scheduler_state": {}, "num_updates": 0}]}, path)
    return path


def parse_args(argv=None):
    import argparse

    parser = argparse.ArgumentParser(prog="python -m fairseq_maskplug.interop.release",
                                     description="Print a released model's fairseq-train model options.")
    parser.add_argument("release", type=Path, help="the release directory (model.pt, dict.txt)")
    return parser.parse_args(argv)


def print_model_options(args) -> int:
    print(" ".join(model_options(read_model_args(release_files(args.release)))))
    return 0


main = command_main(parse_args, print_model_options)


if __name__ == "__main__":
    sys.exit(main())
