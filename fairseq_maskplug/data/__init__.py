"""Layer 2: fairseq dataset wrappers and the per-token side-information store."""

from .blocking import load_blocked_split
from .denoising_dataset import PolicyDenoisingDataset
from .policy_masked_dataset import PolicyMaskedDataset
from .side_info import (
    SIDE_INFO_DTYPES,
    SideInfoDataset,
    SideInfoMismatchError,
    check_aligned,
    check_fingerprint,
    load_side_info,
    side_info_prefix,
    token_fingerprint,
    write_side_info,
)

__all__ = [
    "load_blocked_split", "PolicyDenoisingDataset", "PolicyMaskedDataset", "SIDE_INFO_DTYPES", "SideInfoDataset",
    "SideInfoMismatchError", "check_aligned", "check_fingerprint", "load_side_info", "side_info_prefix",
    "token_fingerprint", "write_side_info",
]
