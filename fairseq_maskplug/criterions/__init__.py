"""Layer 3: fairseq criterion registrations (fairseq's --user-dir does not import this folder itself)."""

from . import joint_mlm_classification, meta_span_policy, span_policy, tlm, token_importance  # noqa: F401
