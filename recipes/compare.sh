#!/usr/bin/env bash
# A method against its baselines over seeds, with paired statistics (issue 53): the demo data and the
# recipes' general model, then one whole-pipeline replicate per seed (benchmarks/gpu_science.py: every
# training stage of a replicate draws from its seed), then mean ± standard error, 95% intervals over
# seeds and over seeds × test sentences, and the smallest difference the run could detect.
#
#   bash recipes/compare.sh METHOD [SEED...]      METHOD: selective, l3, fe, tlm or bart; seeds 1 2 3 4 5 by default
#
# Writes $WORK/compare/METHOD.json (each finished cell at once), METHOD.md (the tables) and METHOD.png.
# Re-running resumes: finished cells are read back, interrupted stages resume. The recipes' knobs
# (recipes/lib.sh, L3_*, FE_*, SM_*, TLM_*, BART_*) apply; COMPARE_PARALLEL replicates run at once (default 2),
# COMPARE_BUDGET seconds at most (default 86400).
set -euo pipefail
method=${1:-}
case "$method" in
    selective|l3|fe|tlm|bart) shift ;;
    *) echo "usage: bash recipes/compare.sh selective|l3|fe|tlm|bart [SEED...]" >&2; exit 2 ;;
esac
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3 4 5)
MASKPLUG_EXTRAS=bench source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"  # matplotlib for the plot
source "$MASKPLUG_ROOT/recipes/lib.sh"  # cd to the repository root, WORK
mkdir -p "$WORK/logs" "$WORK/compare"
general_args=()
if [ "$method" != bart ]; then  # BART's data and general model are the harness's own (shared by its replicates)
    echo "[compare] demo data and the general model ($WORK/general, shared with the recipes)"
    general_model
    general_args=(--data "$WORK/data" --general "$WORK/general")
fi
echo "[compare] $method over seeds ${seeds[*]} -> $WORK/compare/$method.{json,md,png}"
python benchmarks/gpu_science.py "${general_args[@]}" --work "$WORK/compare/$method" --out "$WORK/compare/$method.json" \
    --shape quickstart --only "$method" --seeds "${seeds[@]}" --parallel "${COMPARE_PARALLEL:-2}" \
    --budget "${COMPARE_BUDGET:-86400}" > "$WORK/logs/compare_$method.log" 2>&1 \
    || { tail -20 "$WORK/logs/compare_$method.log"; echo "[compare] failed; log: $WORK/logs/compare_$method.log" >&2; exit 1; }
python benchmarks/gpu_science.py --summarize "$WORK/compare/$method.json" --plot "$WORK/compare/$method.png" \
    | tee "$WORK/compare/$method.md"
quick_note
