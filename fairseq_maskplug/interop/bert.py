"""BERT-type encoders (Hugging Face ``BertModel``, ``BertForMaskedLM``) -> fairseq ``roberta`` (issue 100's
optional start: a real English encoder, e.g. all-MiniLM-L6-v2, that fine-tunes ahead of a random one).

BERT and fairseq's RoBERTa are the same post-LayerNorm encoder (Devlin et al. 2019, section 3; Liu et al. 2019,
section 2) up to three things this module maps:

- **the vocabulary**: fairseq's ``Dictionary`` holds ``<s> <pad> </s> <unk>`` at ids 0-3, then ``dict.txt``'s
  symbols, then ``<mask>`` (added by the task); BERT's ``[CLS] [PAD] [SEP] [UNK]`` take the first four rows and
  ``[MASK]`` the last, every other WordPiece in BERT's order between (:func:`vocabulary_order`);
- **positions**: fairseq's learned positions start after the padding row (row ``pad + 1`` = 2), BERT's at row 0,
  so two rows (zero) go in front;
- **token types**: fairseq has none; BERT adds row 0 of its token-type embedding to every token of a single
  segment, so that row is folded into every position row (as :mod:`.roberta` does for RoBERTa).

A ``BertModel`` (a sentence encoder such as MiniLM) has no masked-LM head: the fairseq model keeps its own freshly
initialised one (dense, LayerNorm, bias; the output matrix is the tied input embedding), which continued
pre-training then learns. BERT's pooler has no fairseq counterpart and is left out.
"""

from typing import Dict, List, Mapping, Sequence, Tuple

from .roberta import FS, LAYER

#: BERT's special tokens -> fairseq's, in fairseq's id order 0-3
SPECIALS = (("[CLS]", "<s>"), ("[PAD]", "<pad>"), ("[SEP]", "</s>"), ("[UNK]", "<unk>"))
MASK = "[MASK]"


def vocabulary_order(tokens: Sequence[str]) -> Tuple[List[str], List[int]]:
    """``(dict.txt symbols, rows)`` for BERT's ``vocab.txt`` ``tokens`` (in row order): ``rows[i]`` is the BERT row
    of fairseq id ``i`` (module docstring); the symbols are every token but the five specials, in BERT's order.
    Refuses a vocabulary without one of the specials, with a token twice, or with one fairseq cannot hold."""
    index: Dict[str, int] = {}
    for row, token in enumerate(tokens):
        if token in index:
            raise ValueError(f"vocab.txt line {row + 1}: {token!r} is also line {index[token] + 1}")
        if not token or any(c.isspace() for c in token) or token in dict(SPECIALS).values() or token == "<mask>":
            raise ValueError(f"vocab.txt line {row + 1}: {token!r} cannot be a fairseq dictionary symbol")
        index[token] = row
    missing = [name for name, _ in SPECIALS if name not in index] + ([MASK] if MASK not in index else [])
    if missing:
        raise ValueError(f"vocab.txt has no {', '.join(missing)}: not a BERT WordPiece vocabulary")
    special = {name for name, _ in SPECIALS} | {MASK}
    symbols = [token for token in tokens if token not in special]
    rows = [index[name] for name, _ in SPECIALS] + [index[token] for token in symbols] + [index[MASK]]
    return symbols, rows


def strip_prefix(hf: Mapping) -> Dict[str, object]:
    """``BertForMaskedLM``'s and ``BertForSequenceClassification``'s parameters are under ``bert.``; a bare
    ``BertModel``'s are not. The encoder's parameters without that prefix, the MLM head's as they are."""
    return {key[len("bert."):] if key.startswith("bert.") else key: value for key, value in hf.items()}


def hf_to_fairseq_state(hf: Mapping, rows: Sequence[int]) -> dict:
    """fairseq ``roberta`` parameters from a BERT state dict and :func:`vocabulary_order`'s ``rows``: the encoder,
    and the masked-LM head where the BERT model has one (``cls.predictions``; else none: the fairseq model keeps its
    own fresh head)."""
    import torch

    hf = strip_prefix(hf)
    word = hf["embeddings.word_embeddings.weight"]
    if max(rows) >= word.shape[0] or len(rows) != word.shape[0]:
        raise ValueError(f"the vocabulary has {len(rows)} rows, the word embedding {word.shape[0]}")
    index = torch.as_tensor(list(rows), dtype=torch.long)
    out = {FS + "version": word.new_tensor([3.0]), FS + "embed_tokens.weight": word[index]}
    positions = hf["embeddings.position_embeddings.weight"]
    token_type = hf.get("embeddings.token_type_embeddings.weight")
    if token_type is not None:
        positions = positions + token_type[0]
    out[FS + "embed_positions.weight"] = torch.cat([positions.new_zeros(2, positions.shape[1]), positions])
    for p in ("weight", "bias"):
        out[FS + f"layernorm_embedding.{p}"] = hf[f"embeddings.LayerNorm.{p}"]
    layers = sorted({int(key.split(".")[2]) for key in hf if key.startswith("encoder.layer.")})
    if layers != list(range(len(layers))) or not layers:
        raise ValueError(f"encoder layers {layers} are not 0..n-1")
    for i in layers:
        for fs, hf_name in LAYER.items():
            for p in ("weight", "bias"):
                out[FS + f"layers.{i}.{fs}.{p}"] = hf[f"encoder.layer.{i}.{hf_name}.{p}"]
    if "cls.predictions.transform.dense.weight" in hf:
        for fs, hf_name in (("dense", "dense"), ("layer_norm", "LayerNorm")):
            for p in ("weight", "bias"):
                out[f"encoder.lm_head.{fs}.{p}"] = hf[f"cls.predictions.transform.{hf_name}.{p}"]
        out["encoder.lm_head.weight"] = out[FS + "embed_tokens.weight"]
        out["encoder.lm_head.bias"] = hf["cls.predictions.bias"][index]
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def fairseq_args(config) -> list:
    """``fairseq-train`` model options for an HF ``BertConfig`` (:func:`.roberta.fairseq_args`'s checks; BERT pads
    with row 0 and counts its positions from row 0)."""
    from types import SimpleNamespace

    from . import roberta

    if getattr(config, "type_vocab_size", 1) < 1:
        raise ValueError(f"type_vocab_size {config.type_vocab_size}: a BERT model has at least one token type")
    as_roberta = SimpleNamespace(**{**config.to_dict(), "pad_token_id": 1,
                                    "max_position_embeddings": config.max_position_embeddings + 2})
    return roberta.fairseq_args(as_roberta)
