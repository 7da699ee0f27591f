"""What differs between a checkpoint's model and the model a run builds, said in one line.

fairseq refuses a checkpoint whose parameters do not fit the model with "Cannot load model
parameters from checkpoint ...; please ensure that the architectures match" and torch's list of
size mismatches. The usual causes are a shape option (layers, width, positions: a QUICK=1
quickstart's model is smaller than the full one's) or another dictionary. :func:`describe` names
which, with the checkpoint's value and the option that gives it; :mod:`..integration.compat` puts
that line in place of fairseq's, for ``fairseq-maskplug-train`` and ``fairseq-train --user-dir``.
"""

from typing import Mapping, Optional

#: model options that fix the parameters' shapes, in the order they are reported
SHAPE_OPTIONS = ("encoder_layers", "encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_attention_heads",
                 "max_positions", "decoder_layers", "decoder_embed_dim", "decoder_ffn_embed_dim",
                 "decoder_attention_heads", "max_source_positions", "max_target_positions")
POSITION_OPTIONS = ("max_positions", "max_source_positions", "max_target_positions")


def option(name: str) -> str:
    return "--" + name.replace("_", "-")


def embedding_rows(state_dict: Mapping) -> Optional[int]:
    """Rows of the token embedding (the dictionary's size) in a model state dict, if it has one."""
    for key, value in state_dict.items():
        if key.endswith("embed_tokens.weight") and hasattr(value, "shape"):
            return int(value.shape[0])
    return None


def family(options: Mapping) -> Optional[str]:
    """The model family of an architecture name (``roberta`` of ``roberta_base``), if the options give one."""
    arch = options.get("arch") or options.get("_name")
    return str(arch).split("_")[0] if arch else None


def describe(checkpoint: str, saved: Mapping, built: Mapping, saved_rows: Optional[int],
             built_rows: Optional[int]) -> Optional[str]:
    """One line naming what differs between the checkpoint's model options ``saved`` and this run's
    ``built`` (those of :data:`SHAPE_OPTIONS` both give), and their embeddings' rows (vocabulary
    sizes); None when neither differs (fairseq's own message stays).

    Args:
        checkpoint: the file, as the message names it.
        saved, built: model options of the checkpoint and of the run (dict-like).
        saved_rows, built_rows: token-embedding rows of the checkpoint and of the run's model.
    """
    if family(saved) and family(built) and family(saved) != family(built):
        return None  # another architecture altogether (roberta into bart): fairseq's message says so
    differing = [name for name in SHAPE_OPTIONS
                 if saved.get(name) is not None and built.get(name) is not None and saved[name] != built[name]]
    if "max_positions" in differing:  # roberta mirrors it into max_source_positions: one option to give
        differing = [name for name in differing
                     if name not in ("max_source_positions", "max_target_positions")
                     or saved[name] != saved["max_positions"]]
    parts = []
    if differing:
        what = ", ".join(f"{name} {saved[name]} (this run: {built[name]})" for name in differing)
        fix = " ".join(f"{option(name)} {saved[name]}" for name in differing)
        positions = [saved[name] for name in differing if name in POSITION_OPTIONS]
        if positions:
            fix += f" (and --tokens-per-sample at most {min(positions)})"
        parts.append(f"its model has {what}: give this run {fix}")
    if saved_rows is not None and built_rows is not None and saved_rows != built_rows:
        parts.append(f"its embedding has {saved_rows} symbols, this run's dictionary {built_rows}: the data was "
                     "binarized with another dict.txt than the checkpoint's (binarize it with fairseq-preprocess "
                     "--srcdict and the checkpoint's dict.txt)")
    if not parts:
        return None
    return f"{checkpoint} does not fit this run's model: " + "; ".join(parts)


def read_saved(checkpoint: str):
    """``(model options, embedding rows)`` of a fairseq checkpoint (new ``cfg`` or old ``args``)."""
    from fairseq import checkpoint_utils

    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)
    cfg = state.get("cfg")
    model = cfg.get("model") if cfg is not None else None
    if model is None:
        model = state.get("args")
    if model is None:
        return {}, embedding_rows(state.get("model", {}))
    # a registered-by-argparse model (roberta, bart) keeps an argparse Namespace; others a DictConfig
    return (vars(model) if hasattr(model, "__dict__") and not hasattr(model, "items") else dict(model),
            embedding_rows(state.get("model", {})))


def describe_for_trainer(checkpoint: str, model_cfg, model) -> Optional[str]:
    """:func:`describe` for a fairseq Trainer's model config and model (None if the file cannot be read)."""
    try:
        saved, saved_rows = read_saved(checkpoint)
    except Exception:  # noqa: BLE001  (a damaged file: fairseq's own error stays)
        return None
    built = {name: getattr(model_cfg, name, None) for name in (*SHAPE_OPTIONS, "arch", "_name")}
    return describe(checkpoint, saved, built, saved_rows, embedding_rows(model.state_dict()))
