#!/usr/bin/env bash
# Quick start: general MLM pre-training -> guided_mlm continued pre-training on in-domain
# movie reviews -> sentence_prediction fine-tuning on MR -> results table.
#
# Scale knobs (environment variables; defaults finish in about 10 minutes on 2 CPU cores):
#   MASKPLUG_WORK         output directory, shared by the recipes      (work)
#   QS_CONTINUED_UPDATES  in-domain guided_mlm updates                 (400)
#   QS_POLICY             mask policy for continued MLM                (random)
#   QS_FINETUNE_EPOCHS    MR fine-tuning epochs                        (5)
#   QS_SEEDS              fine-tuning seeds, space-separated           (1)
# plus those of recipes/lib.sh: MASKPLUG_GENERAL_SENTENCES, MASKPLUG_INDOMAIN_SENTENCES,
# MASKPLUG_GENERAL_UPDATES (data and general model) and MASKPLUG_LAYERS, MASKPLUG_DIM, ...
# Re-running skips finished stages and resumes interrupted ones from their checkpoints.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$MASKPLUG_ROOT/recipes/lib.sh"  # cd to the repository root, WORK

CONTINUED_UPDATES="${QS_CONTINUED_UPDATES:-400}"
POLICY="${QS_POLICY:-random}"
EPOCHS="${QS_FINETUNE_EPOCHS:-5}"
SEEDS="${QS_SEEDS:-1}"
OUT="$WORK/quickstart"
started=$SECONDS

echo "[1/3] demo data ($WORK/data) and general MLM pre-training ($WORK/general)"
general_model

echo "[2/3] continued pre-training on reviews, --task guided_mlm --mask-policy $POLICY ($CONTINUED_UPDATES updates)"
stage "quickstart_indomain_$POLICY" "$WORK/logs/quickstart_indomain_$POLICY.log" \
    pretrain guided_mlm "$WORK/data/indomain" "$OUT/indomain_$POLICY" "$CONTINUED_UPDATES" --mask-policy "$POLICY" \
    --finetune-from-model "$WORK/general/checkpoint_last.pt"

echo "[3/3] MR fine-tuning ($EPOCHS epochs, seeds: $SEEDS)"
declare -A INIT=([general]="$WORK/general/checkpoint_last.pt"
                 ["general+indomain_$POLICY"]="$OUT/indomain_$POLICY/checkpoint_last.pt")
for row in general "general+indomain_$POLICY"; do
    for seed in $SEEDS; do
        stage "quickstart_ft_${row}__seed$seed" "$WORK/logs/quickstart_ft_${row}__seed$seed.log" \
            finetune_and_score "$row" "${INIT[$row]}" "$seed" "$EPOCHS" "$OUT/results" "$OUT/finetune"
    done
done

echo
echo "Continued pre-training (guided_mlm, policy $POLICY), last validation record:"
last_record "$WORK/logs/quickstart_indomain_$POLICY.log" valid
echo
echo "MR sentence polarity (${EPOCHS} fine-tuning epochs; general = ${MASKPLUG_GENERAL_UPDATES:-1000} general MLM"
echo "updates, general+indomain adds ${CONTINUED_UPDATES} in-domain updates), accuracy and macro-F1 in %:"
python recipes/results_table.py "$OUT/results" --rows "general,general+indomain_$POLICY"
echo "finished in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s"
