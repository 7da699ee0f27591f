"""How the objectives of a multi-task run are weighted: fixed weights, TLM's ρ2, META-TARTAN (:mod:`.objectives`)."""

from .meta_tartan import MetaTartanWeights, cosine  # noqa: F401
from .tartan_training import MetaTartanTraining  # noqa: F401
from .objectives import FixedWeights, combine  # noqa: F401
