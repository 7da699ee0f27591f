#!/usr/bin/env bash
# Copy the recipes' plots from the work directory (MASKPLUG_WORK, default work/) into docs/images/,
# where each method page shows its plot beside its results table. Run it after the recipes; a
# plot whose recipe has not run is left as it is (and said so).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
WORK="${MASKPLUG_WORK:-work}"
mkdir -p docs/images
while read -r recipe plot image; do
    if [ -f "$WORK/$plot" ]; then
        cp "$WORK/$plot" "docs/images/$image"
        echo "docs/images/$image <- $WORK/$plot"
    else
        echo "docs/images/$image: kept (no $WORK/$plot: run recipes/$recipe)"
    fi
done <<'PLOTS'
selective_masking.sh selective/results/finetune_valid_accuracy.svg selective_finetune_valid_accuracy.svg
l3_masking.sh l3_masking/results/valid_accuracy.svg l3_valid_accuracy.svg
fe_mlm.sh fe_mlm/valid_loss.svg fe_mlm_valid_loss.svg
bart_policies.sh bart/results/probe_valid_loss.svg bart_probe_valid_loss.svg
tlm.sh tlm/results/stage2_valid_accuracy.svg tlm_stage2_valid_accuracy.svg
PLOTS
