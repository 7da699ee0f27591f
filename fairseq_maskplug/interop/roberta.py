"""RoBERTa parameters and shapes: fairseq ``roberta`` <-> Hugging Face ``RobertaFor{MaskedLM,SequenceClassification}``.

The name mapping is the one of the conversion script ``transformers`` shipped until 4.x
(``convert_roberta_original_pytorch_checkpoint_to_pytorch.py``; 5.x no longer ships it), in
both directions. Both models are post-LayerNorm encoders with learned positions that start
after the padding row (fairseq ``make_positions`` = HF ``create_position_ids_from_input_ids``),
so ``max_position_embeddings`` = fairseq ``max_positions`` + 2. fairseq has no token-type
embedding: the export's single row is zero, and an HF model's row 0 (the one RoBERTa adds to every token when
given no ``token_type_ids``; ``RobertaConfig()`` has two rows, randomly initialised) is folded into every position
row on the way back, which adds the same vector to every token as HF does. The LM head's output matrix is the
(tied) input embedding. HF's ``layer_norm_eps`` is fairseq's ``--layernorm-eps`` (the plugin's option on
``roberta``, :mod:`~fairseq_maskplug.models.layer_norm_eps`).
"""

import re
from typing import Dict, Mapping, Optional

FS = "encoder.sentence_encoder."
HF = "roberta."

# fairseq suffix -> HF suffix, inside layer i
LAYER = {
    "self_attn.q_proj": "attention.self.query",
    "self_attn.k_proj": "attention.self.key",
    "self_attn.v_proj": "attention.self.value",
    "self_attn.out_proj": "attention.output.dense",
    "self_attn_layer_norm": "attention.output.LayerNorm",
    "fc1": "intermediate.dense",
    "fc2": "output.dense",
    "final_layer_norm": "output.LayerNorm",
}
EMBEDDINGS = {
    "embed_tokens": "embeddings.word_embeddings",
    "embed_positions": "embeddings.position_embeddings",
    "layernorm_embedding": "embeddings.LayerNorm",
}
LM_HEAD = {"dense": "dense", "layer_norm": "layer_norm"}


def shape_of(state: Mapping) -> Dict[str, int]:
    """Vocabulary, width, depth, feed-forward size and positions of a fairseq RoBERTa state dict."""
    vocab, dim = state[FS + "embed_tokens.weight"].shape
    layers = sorted({int(m.group(1)) for k in state for m in [re.match(re.escape(FS) + r"layers\.(\d+)\.", k)] if m})
    if layers != list(range(len(layers))) or not layers:
        raise ValueError(f"encoder layers {layers} are not 0..n-1")
    return {"vocab": vocab, "dim": dim, "layers": len(layers),
            "ffn": state[FS + "layers.0.fc1.weight"].shape[0],
            "max_positions": state[FS + "embed_positions.weight"].shape[0] - 2}


def fairseq_to_hf_state(state: Mapping, head: Optional[str] = None) -> dict:
    """HF parameters from fairseq ones: the masked LM, or with ``head`` that classification head instead."""
    out = {}
    for fs, hf in EMBEDDINGS.items():
        for p in ("weight", "bias"):
            if FS + f"{fs}.{p}" in state:
                out[HF + f"{hf}.{p}"] = state[FS + f"{fs}.{p}"]
    word = state[FS + "embed_tokens.weight"]
    out[HF + "embeddings.token_type_embeddings.weight"] = word.new_zeros(1, word.shape[1])
    for i in range(shape_of(state)["layers"]):
        for fs, hf in LAYER.items():
            for p in ("weight", "bias"):
                out[HF + f"encoder.layer.{i}.{hf}.{p}"] = state[FS + f"layers.{i}.{fs}.{p}"]
    if head is None:
        for fs, hf in LM_HEAD.items():
            for p in ("weight", "bias"):
                out[f"lm_head.{hf}.{p}"] = state[f"encoder.lm_head.{fs}.{p}"]
        out["lm_head.decoder.weight"] = state["encoder.lm_head.weight"]
        out["lm_head.bias"] = state["encoder.lm_head.bias"]
        out["lm_head.decoder.bias"] = state["encoder.lm_head.bias"]
    else:
        prefix = f"classification_heads.{head}."
        for part in ("dense", "out_proj"):
            for p in ("weight", "bias"):
                out[f"classifier.{part}.{p}"] = state[prefix + f"{part}.{p}"]
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def hf_to_fairseq_state(hf: Mapping, head: Optional[str] = None) -> dict:
    """fairseq parameters from HF ones (the inverse of :func:`fairseq_to_hf_state`).

    A masked LM gives the LM head; a sequence classifier gives the classification head
    ``head`` and no LM head (fairseq's ``sentence_prediction`` leaves it unused).
    The token-type row 0 is folded into the positions (module docstring; rows 1.. are left out: fairseq's
    RoBERTa has no token types, and HF's RoBERTa uses row 0 unless given ``token_type_ids``).
    """
    out = {FS + "version": hf[HF + "embeddings.word_embeddings.weight"].new_tensor([3.0])}
    for fs, hfn in EMBEDDINGS.items():
        for p in ("weight", "bias"):
            if HF + f"{hfn}.{p}" in hf:
                out[FS + f"{fs}.{p}"] = hf[HF + f"{hfn}.{p}"]
    token_type = hf.get(HF + "embeddings.token_type_embeddings.weight")
    if token_type is not None:
        out[FS + "embed_positions.weight"] = out[FS + "embed_positions.weight"] + token_type[0]
    layers = sorted({int(m.group(1)) for k in hf for m in [re.match(r"roberta\.encoder\.layer\.(\d+)\.", k)] if m})
    for i in layers:
        for fs, hfn in LAYER.items():
            for p in ("weight", "bias"):
                out[FS + f"layers.{i}.{fs}.{p}"] = hf[HF + f"encoder.layer.{i}.{hfn}.{p}"]
    if "lm_head.dense.weight" in hf:
        for fs, hfn in LM_HEAD.items():
            for p in ("weight", "bias"):
                out[f"encoder.lm_head.{fs}.{p}"] = hf[f"lm_head.{hfn}.{p}"]
        out["encoder.lm_head.weight"] = out[FS + "embed_tokens.weight"]
        out["encoder.lm_head.bias"] = hf.get("lm_head.bias", hf.get("lm_head.decoder.bias"))
    if head is not None:
        for part in ("dense", "out_proj"):
            for p in ("weight", "bias"):
                out[f"classification_heads.{head}.{part}.{p}"] = hf[f"classifier.{part}.{p}"]
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def hf_config(shape: Mapping[str, int], heads: int, dropout: float, attention_dropout: float,
              activation: str, num_labels: Optional[int] = None, layer_norm_eps: Optional[float] = None) -> dict:
    """Keyword arguments of ``RobertaConfig`` for a fairseq RoBERTa of this shape (``layer_norm_eps``: the model's
    ``--layernorm-eps``; None: fairseq's 1e-5)."""
    kwargs = dict(vocab_size=shape["vocab"], hidden_size=shape["dim"], num_hidden_layers=shape["layers"],
                  num_attention_heads=heads, intermediate_size=shape["ffn"], hidden_act=activation,
                  hidden_dropout_prob=dropout, attention_probs_dropout_prob=attention_dropout,
                  max_position_embeddings=shape["max_positions"] + 2, type_vocab_size=1,
                  layer_norm_eps=1e-5 if layer_norm_eps is None else layer_norm_eps,
                  pad_token_id=1, bos_token_id=0, eos_token_id=2)
    if num_labels is not None:
        kwargs["num_labels"] = num_labels
    return kwargs


def fairseq_args(config) -> list:
    """``fairseq-train`` model options for the shape of an HF ``RobertaConfig``; refuses what fairseq lacks."""
    if config.hidden_act not in ("gelu", "relu", "tanh", "gelu_fast", "gelu_new"):
        raise ValueError(f"hidden_act {config.hidden_act!r} has no fairseq activation: build the model with one of "
                         "gelu, relu, tanh, gelu_fast, gelu_new")
    if getattr(config, "position_embedding_type", "absolute") not in ("absolute", None):
        raise ValueError(f"position_embedding_type {config.position_embedding_type!r}: fairseq has learned "
                         "absolute positions only (RobertaConfig(position_embedding_type='absolute'))")
    if config.pad_token_id != 1:
        raise ValueError(f"pad_token_id {config.pad_token_id}: fairseq's RoBERTa pads with row 1 (a tokenizer "
                         "with <s> <pad> </s> <unk> at 0-3, and RobertaConfig(pad_token_id=1), its default)")
    activation = {"gelu_new": "gelu_accurate", "gelu_fast": "gelu_fast"}.get(config.hidden_act, config.hidden_act)
    eps = [] if config.layer_norm_eps == 1e-5 else ["--layernorm-eps", repr(float(config.layer_norm_eps))]
    return [*eps, "--arch", "roberta_base", "--encoder-layers", str(config.num_hidden_layers),
            "--encoder-embed-dim", str(config.hidden_size), "--encoder-ffn-embed-dim", str(config.intermediate_size),
            "--encoder-attention-heads", str(config.num_attention_heads),
            "--max-positions", str(config.max_position_embeddings - 2), "--activation-fn", activation,
            "--dropout", str(config.hidden_dropout_prob), "--attention-dropout", str(config.attention_probs_dropout_prob)]
