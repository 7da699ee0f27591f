"""How the objectives of a multi-task run are weighted (META-TARTAN, for N named objectives)."""

from .meta_tartan import MetaTartanWeights, cosine  # noqa: F401
from .tartan_training import MetaTartanTraining  # noqa: F401
