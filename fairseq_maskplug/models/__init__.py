"""Layer 3: heads registered on fairseq's own models (no forked architectures), and the
helpers every training step needs under data parallelism."""

from .data_parallel import unwrap_model, zero_gradient_term  # noqa: F401
from .token_tagging_head import TokenTaggingHead, register_token_tagging_head  # noqa: F401
from . import architectures  # noqa: F401,E402  (--arch roberta_tiny)
from . import layer_norm_eps  # noqa: E402  (--layernorm-eps on fairseq's roberta)

layer_norm_eps.install()
