"""What a policy did: realised mask rate, masks per sequence, share of sequences with none, from the
counts every item carries (``mask_counts``: chosen and maskable positions per row, and chosen and
maskable units: words under ``--mask-unit word``, PMI units)."""

from fairseq.logging import metrics

KEYS = ("mask_chosen", "mask_maskable", "mask_seq_none", "mask_seqs", "mask_units_chosen", "mask_units")


def mask_statistics(chosen, maskable, units_chosen=None, units=None) -> dict:
    """Summable counts of one batch from per-row ``chosen`` and ``maskable`` counts (and the units'):
    masked tokens, maskable tokens, unmasked sequences, sequences, masked units, maskable units
    (without unit counts each token is a unit)."""
    units_chosen = chosen if units_chosen is None else units_chosen
    units = maskable if units is None else units
    return {
        "mask_chosen": int(chosen.sum()),
        "mask_maskable": int(maskable.sum()),
        "mask_seq_none": int((chosen == 0).sum()),
        "mask_seqs": int(chosen.numel()),
        "mask_units_chosen": int(units_chosen.sum()),
        "mask_units": int(units.sum()),
    }


def log_mask_statistics(logging_outputs) -> None:
    """Log ``mask_rate``, ``masks_per_seq`` and ``seq_unmasked`` from :func:`mask_statistics` counts,
    and ``unit_mask_rate`` (share of the maskable units chosen) where units span several tokens."""
    total = {key: sum(log.get(key, 0) for log in logging_outputs) for key in KEYS}
    if total["mask_maskable"] > 0:
        metrics.log_scalar("mask_rate", total["mask_chosen"] / total["mask_maskable"],
                           total["mask_maskable"], round=4)
    if 0 < total["mask_units"] != total["mask_maskable"]:
        metrics.log_scalar("unit_mask_rate", total["mask_units_chosen"] / total["mask_units"],
                           total["mask_units"], round=4)
    if total["mask_seqs"] > 0:
        metrics.log_scalar("masks_per_seq", total["mask_chosen"] / total["mask_seqs"],
                           total["mask_seqs"], round=2)
        metrics.log_scalar("seq_unmasked", total["mask_seq_none"] / total["mask_seqs"],
                           total["mask_seqs"], round=4)
