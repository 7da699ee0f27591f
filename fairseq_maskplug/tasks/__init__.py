"""Layer 3: fairseq task registrations (``guided_mlm``, ``selective_mlm``, ``token_importance``,
``fe_mlm``, ``joint_mlm_classification``, ``guided_denoising``, ``span_policy``,
``meta_span_policy``, ``tlm``)."""

from . import (fe_mlm, guided_denoising, guided_mlm, joint_mlm_classification, meta_span_policy,  # noqa: F401
               selective_mlm, span_policy, tlm, token_importance)
from .masked_lm_base import MaskedLMBaseTask  # noqa: F401
from .policy_options import register_policy_task, with_policy_options  # noqa: F401
from .task_base import PackageTask  # noqa: F401

#: the old name of the base of tasks with ``--mask-policy`` (now :class:`MaskedLMBaseTask` itself)
PolicyTask = MaskedLMBaseTask
