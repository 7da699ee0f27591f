"""BART parameters and shapes: fairseq ``bart`` <-> Hugging Face ``BartForConditionalGeneration``.

The mapping is the one of the conversion script ``transformers`` shipped until 4.x
(``convert_bart_original_pytorch_checkpoint_to_pytorch.py``): HF's names are fairseq's under
``model.``, with the one shared embedding as ``model.shared`` and the output projection (tied to
it) as ``lm_head``; HF's ``final_logits_bias`` has no fairseq counterpart and is zero. Both are
post-LayerNorm encoder-decoders with an embedding LayerNorm and learned positions starting at
row 2 (fairseq after the padding row, HF by a fixed offset of 2), so ``max_position_embeddings``
= fairseq's ``max_source_positions``. HF's positions ignore padding: inputs are compared unpadded.
What HF's ``BartConfig`` cannot hold (pre-LayerNorm, separate embeddings, encoder and decoder of
different widths) is refused in one line.
"""

import re
from argparse import Namespace
from typing import Dict, List, Mapping

#: fairseq keys with no HF parameter: bookkeeping, and the output projection (tied to the embedding)
DROPPED = re.compile(r"^(encoder|decoder)\.version$|_float_tensor$|^decoder\.output_projection\.weight$")
HF_ACTIVATION = {"gelu": "gelu", "relu": "relu", "tanh": "tanh", "gelu_accurate": "gelu_new"}
FAIRSEQ_ACTIVATION = {v: k for k, v in HF_ACTIVATION.items()}


def is_bart(state: Mapping) -> bool:
    """Whether a fairseq state dict is an encoder-decoder of BART's layout."""
    return "encoder.embed_tokens.weight" in state and "decoder.embed_tokens.weight" in state


def layers(state: Mapping, side: str) -> int:
    found = sorted({int(m.group(1)) for k in state for m in [re.match(rf"{side}\.layers\.(\d+)\.", k)] if m})
    if not found or found != list(range(len(found))):
        raise ValueError(f"{side} layers {found} are not 0..n-1")
    return len(found)


def check_exportable(args: Namespace, state: Mapping) -> None:
    """One line for each thing HF's BART cannot hold."""
    for side in ("encoder", "decoder"):
        if getattr(args, f"{side}_normalize_before", False):
            raise ValueError(f"--{side}-normalize-before: HF's BART is post-LayerNorm (mBART is not handled)")
    if not getattr(args, "layernorm_embedding", True):
        raise ValueError("no embedding LayerNorm (--layernorm-embedding off): HF's BART always has one")
    if not getattr(args, "share_all_embeddings", False):
        raise ValueError("encoder and decoder embeddings not shared (--share-all-embeddings): HF's BART shares them")
    if getattr(args, "encoder_embed_dim", None) != getattr(args, "decoder_embed_dim", None):
        raise ValueError(f"encoder width {args.encoder_embed_dim} != decoder width {args.decoder_embed_dim}: "
                         "HF's BART has one d_model")
    if state["encoder.embed_positions.weight"].shape != state["decoder.embed_positions.weight"].shape:
        raise ValueError("encoder and decoder have different numbers of positions: HF's BART has one")
    if getattr(args, "activation_fn", "gelu") not in HF_ACTIVATION:
        raise ValueError(f"activation {args.activation_fn!r} has no HF equivalent")
    if not getattr(args, "no_scale_embedding", True):
        raise ValueError("embeddings scaled by sqrt(dim) (no_scale_embedding off, as in mBART): the bart "
                         "architectures have no switch to turn the scaling on, so it could not come back")


def hf_config(args: Namespace, state: Mapping) -> dict:
    """Keyword arguments of ``BartConfig`` for a fairseq BART of these options and weights."""
    vocab, dim = state["encoder.embed_tokens.weight"].shape
    return dict(
        vocab_size=vocab, d_model=dim, max_position_embeddings=state["encoder.embed_positions.weight"].shape[0] - 2,
        encoder_layers=layers(state, "encoder"), decoder_layers=layers(state, "decoder"),
        encoder_attention_heads=args.encoder_attention_heads, decoder_attention_heads=args.decoder_attention_heads,
        encoder_ffn_dim=state["encoder.layers.0.fc1.weight"].shape[0],
        decoder_ffn_dim=state["decoder.layers.0.fc1.weight"].shape[0],
        activation_function=HF_ACTIVATION[getattr(args, "activation_fn", "gelu")],
        dropout=args.dropout, attention_dropout=args.attention_dropout,
        activation_dropout=getattr(args, "activation_dropout", 0.0) or 0.0,
        scale_embedding=False,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2,
        tie_word_embeddings=True)


def fairseq_to_hf_state(state: Mapping) -> dict:
    """HF ``BartForConditionalGeneration`` parameters from a fairseq BART state dict (heads left out)."""
    out = {}
    for key, value in state.items():
        if DROPPED.search(key) or key.startswith("classification_heads."):
            continue
        out["model." + key] = value
    embedding = state["encoder.embed_tokens.weight"]
    out["model.shared.weight"] = embedding
    out["lm_head.weight"] = state.get("decoder.output_projection.weight", embedding)
    out["final_logits_bias"] = embedding.new_zeros(1, embedding.shape[0])
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def hf_to_fairseq_state(hf: Mapping) -> dict:
    """fairseq BART parameters from HF ones (the inverse of :func:`fairseq_to_hf_state`); refuses a
    non-zero ``final_logits_bias`` or an ``lm_head`` not tied to the embedding, which fairseq's BART lacks."""
    bias = hf.get("final_logits_bias")
    if bias is not None and bias.abs().max() > 0:
        raise ValueError("the HF model has a non-zero final_logits_bias: fairseq's BART has no output bias")
    shared = hf["model.shared.weight"]
    head = hf.get("lm_head.weight")
    if head is not None and not head.equal(shared):
        raise ValueError("the HF model's lm_head is not its shared embedding: fairseq's BART ties them")
    out = {}
    for key, value in hf.items():
        if key.startswith("model.") and key != "model.shared.weight":
            out[key[len("model."):]] = value
    for side in ("encoder", "decoder"):
        out.setdefault(f"{side}.embed_tokens.weight", shared)
        out[f"{side}.version"] = shared.new_tensor([3.0])
    out["decoder.output_projection.weight"] = out["decoder.embed_tokens.weight"]
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def fairseq_args(config) -> List[str]:
    """``fairseq-train`` model options for the shape of an HF ``BartConfig``; refuses what fairseq's BART lacks."""
    if config.activation_function not in FAIRSEQ_ACTIVATION:
        raise ValueError(f"activation_function {config.activation_function!r} has no fairseq activation")
    if config.pad_token_id != 1:
        raise ValueError(f"pad_token_id {config.pad_token_id}: fairseq pads with row 1")
    if getattr(config, "add_final_layer_norm", False) or getattr(config, "normalize_before", False):
        raise ValueError("a pre-LayerNorm model (mBART's layout): fairseq's bart architecture is post-LayerNorm")
    if config.scale_embedding:
        raise ValueError("scale_embedding is on: fairseq's bart architecture does not scale its embeddings")
    options = ["--arch", "bart_base", "--share-all-embeddings", "--share-decoder-input-output-embed",
               "--no-scale-embedding",
               "--activation-fn", FAIRSEQ_ACTIVATION[config.activation_function],
               "--dropout", str(config.dropout), "--attention-dropout", str(config.attention_dropout),
               "--activation-dropout", str(config.activation_dropout),
               "--max-source-positions", str(config.max_position_embeddings),
               "--max-target-positions", str(config.max_position_embeddings)]
    for side in ("encoder", "decoder"):
        options += [f"--{side}-layers", str(getattr(config, f"{side}_layers")),
                    f"--{side}-embed-dim", str(config.d_model),
                    f"--{side}-ffn-embed-dim", str(getattr(config, f"{side}_ffn_dim")),
                    f"--{side}-attention-heads", str(getattr(config, f"{side}_attention_heads"))]
    return options


def shape_summary(state: Mapping) -> Dict[str, int]:
    vocab, dim = state["encoder.embed_tokens.weight"].shape
    return {"vocab": vocab, "dim": dim, "encoder_layers": layers(state, "encoder"),
            "decoder_layers": layers(state, "decoder")}
