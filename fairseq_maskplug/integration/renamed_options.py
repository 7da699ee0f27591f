"""Options whose spelling changed after checkpoints were saved with the old one: a saved task configuration
is rewritten when a checkpoint is loaded (:mod:`.compat` applies it in ``load_checkpoint_to_cpu``), so that
resuming and evaluating an older checkpoint keep its meaning.

- ``tlm_classify_masked`` / ``no_tlm_classify_masked`` (two flags, one of them read) → ``tlm_classify``
  ``masked`` / ``clean``;
- ``collapse_spans`` / ``no_collapse_spans`` (a three-state pair of flags) → ``collapse_spans`` ``on`` /
  ``off`` / ``auto``;
- ``mask_prob`` read by ``salient_span`` with ``salient_fallback random`` (the ``random`` policy's option) →
  ``salient_fallback_prob`` (its own), ``mask_prob`` back to its default;
- ``fe_mlm``'s own views (``mask_policy`` empty, ``fe_granularity``, ``fe_mask_prob``, ``fe_span_p``,
  ``fe_span_max``) → the policy that draws the same views: ``random`` with ``mask_prob``, or ``span`` with
  ``span_mask_prob``, ``span_geometric_p``, ``span_max_length``.

:data:`REMOVED_FLAGS` names the replacement of each command-line flag that is gone.
"""

from typing import List, MutableMapping, Optional

#: the random policy's default --mask-prob (masking.builtin_policies; this module sits below masking)
RANDOM_DEFAULT_RATE = 0.15

#: fe_mlm's flags for the paper's views, and the options of the policy that draws the same views
_FE_VIEWS = "--task fe_mlm draws the views of --mask-policy random (the default) or span: "
REMOVED_FLAGS = {
    "--fe-mask-prob": _FE_VIEWS + "use --mask-prob (random) or --span-mask-prob (span)",
    "--fe-granularity": _FE_VIEWS + "use --mask-policy random (subword) or --mask-policy span",
    "--fe-span-p": _FE_VIEWS + "use --mask-policy span --span-geometric-p",
    "--fe-span-max": _FE_VIEWS + "use --mask-policy span --span-max-length",
}


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
    if "fe_granularity" in task:  # fe_mlm before its views became a policy's
        granularity, rate = task.pop("fe_granularity"), task.pop("fe_mask_prob", RANDOM_DEFAULT_RATE)
        geometric_p, longest = task.pop("fe_span_p", 0.2), task.pop("fe_span_max", 10)
        if not task.get("mask_policy"):  # the paper's views: the policy that draws them
            if granularity == "span":
                task.update(mask_policy="span", span_mask_prob=rate, span_geometric_p=geometric_p,
                            span_max_length=longest)
            else:
                task.update(mask_policy="random", mask_prob=rate)
            changed.append(f"fe_granularity={granularity}, fe_mask_prob={rate} -> mask_policy={task['mask_policy']}")
    return changed


def removed_flag(argv) -> Optional[str]:
    """The one-line message for the first flag of ``argv`` that is gone (:data:`REMOVED_FLAGS`), else None."""
    for arg in argv:
        flag = arg.split("=", 1)[0]
        if flag in REMOVED_FLAGS:
            return f"{flag} is gone: {REMOVED_FLAGS[flag]}"
    return None
