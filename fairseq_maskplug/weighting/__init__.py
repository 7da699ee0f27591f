"""How the objectives of a multi-task run are weighted (META-TARTAN)."""

from .meta_tartan import MetaTartanWeights, cosine  # noqa: F401
