"""What a policy did: realised mask rate, masks per sequence, share of sequences with none, from the
counts every item carries (``mask_counts``: chosen and maskable positions per row)."""

from fairseq.logging import metrics


def mask_statistics(chosen, maskable) -> dict:
    """Summable counts of one batch from per-row ``chosen`` and ``maskable`` counts: masked
    tokens, maskable tokens, unmasked sequences, sequences."""
    return {
        "mask_chosen": int(chosen.sum()),
        "mask_maskable": int(maskable.sum()),
        "mask_seq_none": int((chosen == 0).sum()),
        "mask_seqs": int(chosen.numel()),
    }


def log_mask_statistics(logging_outputs) -> None:
    """Log ``mask_rate``, ``masks_per_seq`` and ``seq_unmasked`` from :func:`mask_statistics` counts."""
    total = {key: sum(log.get(key, 0) for log in logging_outputs)
             for key in ("mask_chosen", "mask_maskable", "mask_seq_none", "mask_seqs")}
    if total["mask_maskable"] > 0:
        metrics.log_scalar("mask_rate", total["mask_chosen"] / total["mask_maskable"],
                           total["mask_maskable"], round=4)
    if total["mask_seqs"] > 0:
        metrics.log_scalar("masks_per_seq", total["mask_chosen"] / total["mask_seqs"],
                           total["mask_seqs"], round=2)
        metrics.log_scalar("seq_unmasked", total["mask_seq_none"] / total["mask_seqs"],
                           total["mask_seqs"], round=4)
