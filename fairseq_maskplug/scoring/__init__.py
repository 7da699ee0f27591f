"""Layer 4: model-driven producers of per-token side information."""
