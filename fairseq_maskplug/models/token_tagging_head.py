"""A token-level classification head on a fairseq roberta model (Gu et al. 2020, "Train NN").

The head lives in the model's ``classification_heads`` like fairseq's sentence head and
has the same parameters (``dense``, ``out_proj``), so checkpoints save, load and
fine-tune with fairseq's own code; only its forward differs: it classifies every
position instead of ``<s>``. The task re-registers it when a checkpoint is loaded.
"""

from fairseq.models.roberta.model import RobertaClassificationHead


class TokenTaggingHead(RobertaClassificationHead):
    """``features (B, T, C) -> logits (B, T, num_classes)``: dropout, dense, activation, dropout, projection."""

    def forward(self, features, **kwargs):
        x = self.dropout(features)
        x = self.activation_fn(self.dense(x))
        return self.out_proj(self.dropout(x))


def register_token_tagging_head(model, name: str, num_classes: int = 2) -> None:
    """Add a :class:`TokenTaggingHead` called ``name`` to a roberta ``model``."""
    if not hasattr(model, "classification_heads"):
        raise ValueError(f"token tagging needs a roberta-style model with classification heads, got "
                         f"{type(model).__name__}")
    args = model.args
    model.classification_heads[name] = TokenTaggingHead(
        input_dim=args.encoder_embed_dim, inner_dim=args.encoder_embed_dim, num_classes=num_classes,
        activation_fn=args.pooler_activation_fn, pooler_dropout=args.pooler_dropout)
