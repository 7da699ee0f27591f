"""``--arch roberta_tiny`` and ``--arch bart_tiny``: the demos' shapes, on fairseq's own models.

roberta_tiny: 4 layers, embedding dim 128, feed-forward dim 512, 4 attention heads; everything else is
``roberta_base``'s (dropout 0.1, learned positions; the number of positions is
``--max-positions``, else ``--tokens-per-sample``, as for every fairseq roberta). The
quickstart's checkpoints have this shape with 128 positions, so ``--arch roberta_tiny
--tokens-per-sample 128`` continues or fine-tunes them. Each value can still be
overridden (``--encoder-layers 2``).
"""

from fairseq.models import register_model_architecture
from fairseq.models.bart.model import bart_base_architecture
from fairseq.models.roberta.model import base_architecture
from fairseq.utils import safe_getattr


@register_model_architecture("roberta", "roberta_tiny")
def roberta_tiny_architecture(args):
    args.encoder_layers = safe_getattr(args, "encoder_layers", 4)
    args.encoder_embed_dim = safe_getattr(args, "encoder_embed_dim", 128)
    args.encoder_ffn_embed_dim = safe_getattr(args, "encoder_ffn_embed_dim", 512)
    args.encoder_attention_heads = safe_getattr(args, "encoder_attention_heads", 4)
    base_architecture(args)


@register_model_architecture("bart", "bart_tiny")
def bart_tiny_architecture(args):
    """``--arch bart_tiny``: a BART for CPU demos and tests, 2 + 2 layers, dim 128, ffn 512,
    4 heads, shared embeddings; everything else is ``bart_base``'s. Positions:
    ``--max-source-positions`` / ``--max-target-positions`` (default 1024)."""
    for side in ("encoder", "decoder"):
        setattr(args, f"{side}_layers", safe_getattr(args, f"{side}_layers", 2))
        setattr(args, f"{side}_embed_dim", safe_getattr(args, f"{side}_embed_dim", 128))
        setattr(args, f"{side}_ffn_embed_dim", safe_getattr(args, f"{side}_ffn_embed_dim", 512))
        setattr(args, f"{side}_attention_heads", safe_getattr(args, f"{side}_attention_heads", 4))
    bart_base_architecture(args)
