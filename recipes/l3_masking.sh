#!/usr/bin/env bash
# L3Masking (Kimura et al.): the general checkpoint as the frozen vanilla model scores token
# pseudo-likelihoods (PLL-word-l2r) of the MR texts; then joint classification + auxiliary
# MLM fine-tuning with STL (no MLM), RTM (random masks) and L3 (masks from 1 - PLT) ->
# table of accuracy and macro-F1 (mean +- std over seeds), like the paper's Table 3.
# As in the paper, RTM and L3 weight the two losses the META-TARTAN way.
#
# Knobs: L3_MEAN p_bar (0.15), L3_WEIGHTING (tartan, or fixed: loss = cls + L3_MLM_WEIGHT * mlm),
# L3_MLM_WEIGHT (1.0), L3_META_LR (0.01), L3_EPOCHS (10), L3_PATIENCE (3), L3_SEEDS ("1"),
# and those of recipes/lib.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$MASKPLUG_ROOT/recipes/lib.sh"  # cd to the repository root, WORK

MEAN="${L3_MEAN:-0.15}"
WEIGHTING="${L3_WEIGHTING:-tartan}"
if [ "$WEIGHTING" = tartan ]; then
    AUX_ARGS=(--loss-weighting tartan --tartan-meta-lr "${L3_META_LR:-0.01}")
elif [ "$WEIGHTING" = fixed ]; then
    AUX_ARGS=(--loss-weighting fixed --mlm-weight "${L3_MLM_WEIGHT:-1.0}")
else
    echo "L3_WEIGHTING must be tartan or fixed, not '$WEIGHTING'" >&2; exit 2
fi
EPOCHS="${L3_EPOCHS:-10}"
PATIENCE="${L3_PATIENCE:-3}"
SEEDS="${L3_SEEDS:-1}"
OUT="$WORK/l3_masking"
mkdir -p "$OUT"
started=$SECONDS

echo "[1/3] demo data and the vanilla (general MLM) model"
general_model
VANILLA="$GENERAL_CHECKPOINT"

echo "[2/3] token pseudo-likelihoods of the MR texts (PLL-word-l2r, frozen vanilla model)"
for split in train valid test; do
    stage "l3_plt_$split" "$WORK/logs/l3_plt_$split.log" python -m preprocess.score_pll \
        --checkpoint "$VANILLA" --data "$WORK/data/mr/input0" --split "$split" --name plt "${WORD_STARTS_ARGS[@]}"
    grep "sentences/s" "$WORK/logs/l3_plt_$split.log" || true
done
python recipes/l3_summary.py "$WORK/data/mr/input0/train.plt" --mean "$MEAN"

# joint_finetune ROW SEED ARGS...: joint classification + MLM fine-tuning, then score valid and test
joint_finetune() {
    local row=$1 seed=$2 save="$OUT/finetune/$1__seed$2"; shift 2
    local steps=$(( EPOCHS * ( $(num_lines "$WORK/data/mr/input0/train") / (MASKPLUG_BATCH * WORKERS) + 1 ) ))
    maskplug_train "$WORK/data/mr" --task joint_mlm_classification --criterion joint_mlm_classification \
        --num-classes 2 --tokens-per-sample "$MASKPLUG_TOKENS" "${MODEL_ARGS[@]}" "${COMMON_ARGS[@]}" \
        --finetune-from-model "$VANILLA" --lr-scheduler polynomial_decay --lr "${MASKPLUG_FINETUNE_LR:-2e-4}" \
        --warmup-updates $((steps / 10 + 1)) --total-num-update "$steps" --max-epoch "$EPOCHS" \
        --patience "$PATIENCE" --seed "$seed" --best-checkpoint-metric accuracy --maximize-best-checkpoint-metric \
        --save-dir "$save" --no-epoch-checkpoints --no-last-checkpoints "$@" || return 1
    score_on_mr "$save/checkpoint_best.pt" "$OUT/results/${row}__seed$seed"
}

echo "[3/3] joint fine-tuning: STL, RTM, L3 ($WEIGHTING weights; up to $EPOCHS epochs, patience $PATIENCE, seeds: $SEEDS)"
mkdir -p "$OUT/results"
for seed in $SEEDS; do
    stage "l3_stl__seed$seed" "$WORK/logs/l3_stl__seed$seed.log" joint_finetune STL "$seed" --mlm-weight 0
    stage "l3_rtm_${WEIGHTING}__seed$seed" "$WORK/logs/l3_rtm_${WEIGHTING}__seed$seed.log" \
        joint_finetune "RTM-$WEIGHTING" "$seed" "${AUX_ARGS[@]}" --mask-policy random --mask-prob "$MEAN"
    stage "l3_l3_${WEIGHTING}__seed$seed" "$WORK/logs/l3_l3_${WEIGHTING}__seed$seed.log" \
        joint_finetune "L3-$WEIGHTING" "$seed" "${AUX_ARGS[@]}" --mask-policy l3 --l3-track plt --l3-mean "$MEAN"
done

echo
echo "L3 run, realised mask rate (last training epoch):"
last_record "$WORK/logs/l3_l3_${WEIGHTING}__seed${SEEDS%% *}.log" train | python -c \
    "import json,sys; r=json.load(sys.stdin); print('train_mask_rate', r['train_mask_rate'], 'masks_per_seq', r['train_masks_per_seq'])"
if [ "$WEIGHTING" = tartan ]; then
    echo "META-TARTAN, last training epoch (mean MLM weight, mean cosines with the dev gradient):"
    for row in rtm l3; do
        last_record "$WORK/logs/l3_${row}_tartan__seed${SEEDS%% *}.log" train | python -c \
            "import json,sys; r=json.load(sys.stdin); print('$row', 'w_mlm', r['train_w_mlm'], 'cos_cls', r['train_cos_cls'], 'cos_mlm', r['train_cos_mlm'])"
    done
fi
seed=${SEEDS%% *}
echo "validation accuracy against updates (seed $seed) -> $OUT/results/valid_accuracy.svg"
plot_runs "$OUT/results/valid_accuracy.svg" accuracy "L3Masking: MR joint fine-tuning, seed $seed" \
    STL="$WORK/logs/l3_stl__seed$seed.log" "RTM-$WEIGHTING=$WORK/logs/l3_rtm_${WEIGHTING}__seed$seed.log" \
    "L3-$WEIGHTING=$WORK/logs/l3_l3_${WEIGHTING}__seed$seed.log"
echo
echo "MR sentence polarity, joint fine-tuning from the vanilla model (accuracy and macro-F1 in %):"
python recipes/results_table.py "$OUT/results" --rows "STL,RTM-$WEIGHTING,L3-$WEIGHTING"
quick_note
echo "finished in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s"
