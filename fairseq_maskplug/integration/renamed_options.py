"""Options whose spelling changed after checkpoints were saved with the old one: a saved task configuration
is rewritten when a checkpoint is loaded (:mod:`.compat` applies it in ``load_checkpoint_to_cpu``), so that
resuming and evaluating an older checkpoint keep its meaning.

- ``tlm_classify_masked`` / ``no_tlm_classify_masked`` (two flags, one of them read) → ``tlm_classify``
  ``masked`` / ``clean``;
- ``collapse_spans`` / ``no_collapse_spans`` (a three-state pair of flags) → ``collapse_spans`` ``on`` /
  ``off`` / ``auto``;
- ``mask_prob`` read by ``salient_span`` with ``salient_fallback random`` (the ``random`` policy's option) →
  ``salient_fallback_prob`` (its own), ``mask_prob`` back to its default.
"""

from typing import List, MutableMapping

#: the random policy's default --mask-prob (masking.builtin_policies; this module sits below masking)
RANDOM_DEFAULT_RATE = 0.15


def upgrade_task_options(task: MutableMapping) -> List[str]:
    """Rewrite the old spellings in a saved task configuration (a dict or an open OmegaConf node) in place;
    returns ``old -> new`` for each option rewritten."""
    changed = []
    if "tlm_classify_masked" in task or "no_tlm_classify_masked" in task:
        clean = bool(task.pop("no_tlm_classify_masked", False))
        task.pop("tlm_classify_masked", None)
        task["tlm_classify"] = "clean" if clean else "masked"
        changed.append(f"no_tlm_classify_masked={clean} -> tlm_classify={task['tlm_classify']}")
    if isinstance(task.get("collapse_spans"), bool) or "no_collapse_spans" in task:
        on, off = task.get("collapse_spans") is True, bool(task.pop("no_collapse_spans", False))
        if on and off:
            raise ValueError("the checkpoint's task configuration has both collapse_spans and no_collapse_spans")
        task["collapse_spans"] = "on" if on else "off" if off else "auto"
        changed.append(f"collapse_spans={on}, no_collapse_spans={off} -> collapse_spans={task['collapse_spans']}")
    if task.get("salient_fallback") == "random" and "salient_fallback_prob" not in task:
        task["salient_fallback_prob"] = task.get("mask_prob", RANDOM_DEFAULT_RATE)
        if "mask_prob" in task:  # read by nothing else: --salient-fallback random runs only under salient_span
            task["mask_prob"] = RANDOM_DEFAULT_RATE
        changed.append(f"mask_prob={task['salient_fallback_prob']} (salient_span's fallback) -> "
                       f"salient_fallback_prob={task['salient_fallback_prob']}")
    return changed
