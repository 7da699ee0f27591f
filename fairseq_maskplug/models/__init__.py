"""Layer 3: heads registered on fairseq's own models (no forked architectures)."""

from .token_tagging_head import TokenTaggingHead, register_token_tagging_head  # noqa: F401
