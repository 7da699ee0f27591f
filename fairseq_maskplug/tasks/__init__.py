"""Layer 3: fairseq task registrations (``guided_mlm``, ``selective_mlm``, ``fe_mlm``, ``joint_mlm_classification``)."""

from . import fe_mlm, guided_mlm, joint_mlm_classification, selective_mlm, token_importance  # noqa: F401
from .policy_options import register_policy_task, with_policy_options  # noqa: F401
