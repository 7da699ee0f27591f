"""Layer 3: fairseq task registrations (``--task guided_mlm``, ``--task fe_mlm``)."""

from . import fe_mlm, guided_mlm  # noqa: F401
from .policy_options import register_policy_task, with_policy_options  # noqa: F401
