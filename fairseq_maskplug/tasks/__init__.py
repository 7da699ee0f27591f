"""Layer 3: fairseq task registrations (``guided_mlm``, ``selective_mlm``, ``token_importance``,
``fe_mlm``, ``joint_mlm_classification``, ``guided_denoising``, ``span_policy``,
``meta_span_policy``, ``tlm``)."""

from . import (fe_mlm, guided_denoising, guided_mlm, joint_mlm_classification, meta_span_policy,  # noqa: F401
               selective_mlm, span_policy, tlm, token_importance)
from .policy_options import PolicyTask, register_policy_task, with_policy_options  # noqa: F401
