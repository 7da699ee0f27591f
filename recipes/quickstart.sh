#!/usr/bin/env bash
# Quick start: general MLM pre-training -> guided_mlm continued pre-training on in-domain
# movie reviews -> sentence_prediction fine-tuning on MR -> results table.
#
# Scale knobs (environment variables; defaults finish in about 10 minutes on 2 CPU cores):
#   QS_WORK               output directory                    (work/quickstart)
#   QS_GENERAL_SENTENCES  news sentences for general MLM      (40000)
#   QS_INDOMAIN_SENTENCES review lines for continued MLM      (20000)
#   QS_GENERAL_UPDATES    general MLM updates                 (1000)
#   QS_CONTINUED_UPDATES  in-domain guided_mlm updates        (400)
#   QS_POLICY             mask policy for continued MLM       (random)
#   QS_FINETUNE_EPOCHS    MR fine-tuning epochs               (5)
#   QS_SEEDS              fine-tuning seeds, space-separated  (1)
# plus the model/device knobs of recipes/lib.sh (MASKPLUG_LAYERS, MASKPLUG_DIM, ...).
# Re-running resumes: finished stages are skipped or resumed from their checkpoints.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$MASKPLUG_ROOT/recipes/lib.sh"
cd "$MASKPLUG_ROOT"

WORK="${QS_WORK:-$MASKPLUG_ROOT/work/quickstart}"
GENERAL_UPDATES="${QS_GENERAL_UPDATES:-1000}"
CONTINUED_UPDATES="${QS_CONTINUED_UPDATES:-400}"
POLICY="${QS_POLICY:-random}"
EPOCHS="${QS_FINETUNE_EPOCHS:-5}"
SEEDS="${QS_SEEDS:-1}"
DATA="$WORK/data"
LOGS="$WORK/logs"
RESULTS="$WORK/results"
mkdir -p "$LOGS" "$RESULTS"
started=$SECONDS

echo "[1/4] demo data -> $DATA"
python -m preprocess.prepare_demo --out "$DATA" --cache "$WORK/downloads" \
    --general-sentences "${QS_GENERAL_SENTENCES:-40000}" --indomain-sentences "${QS_INDOMAIN_SENTENCES:-20000}"

echo "[2/4] general MLM pre-training ($GENERAL_UPDATES updates) -> $WORK/general"
stage general "$LOGS/general.log" pretrain "$DATA/general" "$WORK/general" "$GENERAL_UPDATES"

echo "[3/4] continued pre-training on reviews, --task guided_mlm --mask-policy $POLICY ($CONTINUED_UPDATES updates)"
stage "indomain_$POLICY" "$LOGS/indomain_$POLICY.log" \
    pretrain "$DATA/indomain" "$WORK/indomain_$POLICY" "$CONTINUED_UPDATES" --mask-policy "$POLICY" \
    --finetune-from-model "$WORK/general/checkpoint_last.pt"

# finetune_and_score ROW INIT SEED: fine-tune on MR, score valid and test into $RESULTS
# (called inside `if`, where set -e is off: every step checks itself)
finetune_and_score() {
    local row=$1 init=$2 seed=$3 save="$WORK/finetune/$1__seed$3"
    finetune "$DATA/mr" "$init" "$save" "$EPOCHS" "$seed" || return 1
    for split in valid test; do
        python -m fairseq_maskplug.evaluate --checkpoint "$save/checkpoint_best.pt" --data "$DATA/mr" \
            --split "$split" --output "$RESULTS/${row}__seed$seed.$split.json" || return 1
    done
}

echo "[4/4] MR fine-tuning ($EPOCHS epochs, seeds: $SEEDS)"
declare -A INIT=([general]="$WORK/general/checkpoint_last.pt"
                 ["general+indomain_$POLICY"]="$WORK/indomain_$POLICY/checkpoint_last.pt")
for row in general "general+indomain_$POLICY"; do
    for seed in $SEEDS; do
        stage "ft_${row}__seed$seed" "$LOGS/ft_${row}__seed$seed.log" finetune_and_score "$row" "${INIT[$row]}" "$seed"
    done
done

echo
echo "Continued pre-training (guided_mlm, policy $POLICY), last validation record:"
last_record "$LOGS/indomain_$POLICY.log" valid
echo
echo "MR sentence polarity (${EPOCHS} fine-tuning epochs; general = ${GENERAL_UPDATES} general MLM updates,"
echo "general+indomain adds ${CONTINUED_UPDATES} in-domain updates), accuracy and macro-F1 in %:"
python recipes/results_table.py "$RESULTS" --rows "general,general+indomain_$POLICY"
echo "finished in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s"
