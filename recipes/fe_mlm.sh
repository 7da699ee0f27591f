#!/usr/bin/env bash
# FE-MLM (Zheng et al.): continued pre-training of the general checkpoint on the in-domain
# reviews with MLM vs FE-MLM at equal compute, each granularity against its own baseline as
# in the paper (MLM subword vs FE subword, MLM+span vs FE+span), validation MLM loss against
# updates (PNG; every run's checkpoints scored under the same random masks), MR fine-tuning
# table, and the gradient-variance probe.
#
# Equal compute: MLM uses --batch-size B*K sequences, FE-MLM --batch-size B sequences of K
# views each: the same rows and tokens per update, the same number of updates.
# The mlm_schedule row is MLM with a mask-rate schedule (Ankner et al. 2023: linear 30% -> 15% over the
# run), the same batches as the mlm row.
# Knobs: FE_UPDATES (400), FE_VIEWS K (4), FE_BATCH B (8), FE_VALID_EVERY (50: checkpoint interval),
# FE_FINETUNE_EPOCHS (5), FE_SEEDS ("1"), FE_PROBE (1; 0 skips the gradient-variance probe), FE_ROWS (the rows
# to train: "mlm fe_subword mlm_span fe_span mlm_schedule"), and those of recipes/lib.sh.
set -euo pipefail
# matplotlib (the plot extra) draws the probe's PNG; without the probe (FE_PROBE=0) the environment as it is
extras=plot
[ "${FE_PROBE:-1}" = 0 ] && extras="${MASKPLUG_EXTRAS:-}"
MASKPLUG_EXTRAS=$extras source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$MASKPLUG_ROOT/recipes/lib.sh"  # cd to the repository root, WORK

UPDATES="${FE_UPDATES:-400}"
K="${FE_VIEWS:-4}"
B="${FE_BATCH:-8}"
EVERY="${FE_VALID_EVERY:-50}"  # checkpoint (and scoring) interval
EPOCHS="${FE_FINETUNE_EPOCHS:-5}"
SEEDS="${FE_SEEDS:-1}"
ROWS="${FE_ROWS:-mlm fe_subword mlm_span fe_span mlm_schedule}"
wanted() { [[ " $ROWS " == *" $1 "* ]]; }
OUT="$WORK/fe_mlm"
mkdir -p "$OUT"
started=$SECONDS

echo "[1/4] demo data and general MLM pre-training"
general_model
GENERAL="$GENERAL_CHECKPOINT"

echo "[2/4] continued pre-training, $UPDATES updates each: MLM (subword, span) batch $((B * K)) vs FE-MLM batch $B x $K views"
common=(--finetune-from-model "$GENERAL" --save-interval-updates "$EVERY" --keep-interval-updates -1)
wanted mlm && stage fe_mlm_mlm "$WORK/logs/fe_mlm_mlm.log" \
    pretrain guided_mlm "$WORK/data/indomain" "$OUT/mlm" "$UPDATES" --batch-size $((B * K)) "${common[@]}"
wanted mlm_span && stage fe_mlm_mlm_span "$WORK/logs/fe_mlm_mlm_span.log" \
    pretrain guided_mlm "$WORK/data/indomain" "$OUT/mlm_span" "$UPDATES" --batch-size $((B * K)) "${common[@]}" \
    --mask-policy span
wanted mlm_schedule && stage fe_mlm_mlm_schedule "$WORK/logs/fe_mlm_mlm_schedule.log" \
    pretrain guided_mlm "$WORK/data/indomain" "$OUT/mlm_schedule" "$UPDATES" --batch-size $((B * K)) "${common[@]}" \
    --mask-policy random --mask-prob-schedule linear --mask-prob-schedule-updates "$UPDATES"
for granularity in subword span; do
    wanted "fe_$granularity" || continue
    stage "fe_mlm_fe_$granularity" "$WORK/logs/fe_mlm_fe_$granularity.log" \
        pretrain fe_mlm "$WORK/data/indomain" "$OUT/fe_$granularity" "$UPDATES" --batch-size "$B" \
        --fe-views "$K" --mask-policy "$([ "$granularity" = span ] && echo span || echo random)" "${common[@]}"
done
# each run's validation during training uses its own masking (span targets are harder):
# score every checkpoint of every run under the same random 15% masks instead
score_checkpoints() {
    python -m fairseq_maskplug.evaluation.evaluate_mlm --data "$WORK/data/indomain" --split valid \
        "$OUT/$1"/checkpoint_*_*.pt > "$OUT/valid_loss_$1.jsonl"
}
for run in $ROWS; do
    stage "fe_mlm_score_$run" "$WORK/logs/fe_mlm_score_$run.log" score_checkpoints "$run"
done
echo "    validation MLM loss against updates, one fixed set of random masks -> $OUT/valid_loss.svg"
plot_runs "$OUT/valid_loss.svg" loss "FE-MLM vs MLM: in-domain valid loss under the same random masks" \
    $(for run in $ROWS; do echo "$run=$OUT/valid_loss_$run.jsonl"; done)

echo "[3/4] MR fine-tuning ($EPOCHS epochs, seeds: $SEEDS)"
for row in $ROWS; do
    finetune_seeds fe_mlm "$row" "$OUT/$row/checkpoint_last.pt" "$OUT/results" "$OUT/finetune"
done

if [ "${FE_PROBE:-1}" != 0 ]; then
    echo "[4/4] gradient-variance probe on the general checkpoint (in-domain valid minibatch)"
    stage fe_mlm_probe "$WORK/logs/fe_mlm_probe.log" \
        python benchmarks/fe_variance.py --checkpoint "$GENERAL" --data "$WORK/data/indomain" \
        --views "$K" --tokens-per-sample "$MASKPLUG_TOKENS" --out "$OUT/fe_variance"
    tail -12 "$WORK/logs/fe_mlm_probe.log"
fi

echo
echo "MR sentence polarity after $UPDATES continued updates at equal compute, accuracy and macro-F1 in %:"
python recipes/results_table.py "$OUT/results" --rows "${ROWS// /,}"
quick_note
echo "finished in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s"
