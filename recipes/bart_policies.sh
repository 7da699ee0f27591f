#!/usr/bin/env bash
# Masking policies for BART-style intermediate pre-training (Ye, Li et al. 2021): general
# denoising pre-training -> the same intermediate budget for each policy row -> closed-book
# entity-cloze probe fine-tuning -> exact match on seen and held-out questions.
#
# Rows (every intermediate row gets BART_INTERMEDIATE_UPDATES updates; "none" gets none):
#   none   no intermediate stage
#   orig   +Orig: --mask-policy random --target-format full
#   rand   +Rand: --mask-policy random --target-format masked
#   ssm    +SSM:  --mask-policy salient_span --target-format masked
#   sup    +Supervised: --mask-policy learned_span on the tracks of a span_policy trained on the
#          probe's fine-tuning contexts and answers (no question)
#   meta   +Meta-learned: --mask-policy learned_span on the tracks of a meta_span_policy trained
#          through one virtual step of the general model, downstream loss on the probe's
#          fine-tuning questions
#   transfer  the supervised policy learned on PERSON answers only, applied as sup
# General stage: guided_denoising with SpanBERT-style spans at 30%, collapsed into one <mask>
# each, full target (close to BART's text infilling).
#
# Knobs: BART_SENTENCES (20000) news sentences, BART_GENERAL_UPDATES (600),
# BART_INTERMEDIATE_UPDATES (200), BART_PROBE_UPDATES (300), SEEDS ("1 2"),
# BART_POLICY_UPDATES (1000, the supervised policies), BART_META_UPDATES (150), BART_META_BATCH (8
# sentences, 8 candidate spans each), BART_META_GRADIENT (exact; finite_difference for large
# models), BART_ROWS (all seven; a learned row trains its policy, the others skip that stage),
# BART_GENERAL_ONLY=1 (the data and the general model, then stop: the comparison harness's shared model),
# BART_ARCH (bart_tiny; bart_base on GPUs), PRETRAINED=<dir with model.pt and dict.txt> to
# start from a released fairseq BART (bart.base) instead of the general stage: the news is then
# encoded with its GPT-2 BPE (GPT2_BPE, default PRETRAINED) and dict.txt and its architecture
# replaces BART_ARCH; and MASKPLUG_TOKENS / MASKPLUG_BATCH / MASKPLUG_CPU_WORKERS / LAUNCH of recipes/lib.sh.
set -euo pipefail
MASKPLUG_EXTRAS=spans,plot source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$MASKPLUG_ROOT/recipes/lib.sh"  # cd to the repository root, WORK

OUT="$WORK/bart"
DATA="$OUT/data"
GENERAL_UPDATES="${BART_GENERAL_UPDATES:-600}"
INTERMEDIATE_UPDATES="${BART_INTERMEDIATE_UPDATES:-200}"
PROBE_UPDATES="${BART_PROBE_UPDATES:-300}"
POLICY_UPDATES="${BART_POLICY_UPDATES:-1000}"
META_UPDATES="${BART_META_UPDATES:-150}"
ROWS="${BART_ROWS:-none orig rand ssm sup meta transfer}"
SEEDS="${SEEDS:-1 2}"
ARCH="${BART_ARCH:-bart_tiny}"
mkdir -p "$OUT" "$WORK/logs"
started=$SECONDS

if [ -n "${PRETRAINED:-}" ]; then
    BART_ARGS=("${PRETRAINED_MODEL_ARGS[@]}")
    BPE_ARGS=(--gpt2-bpe "$GPT2_BPE" --srcdict "$PRETRAINED/dict.txt")
else
    BART_ARGS=(--arch "$ARCH" --max-source-positions "$MASKPLUG_TOKENS" --max-target-positions "$MASKPLUG_TOKENS"
               --dropout 0.1 --attention-dropout 0.1)
    BPE_ARGS=()
fi
TRAIN_ARGS=("${BART_ARGS[@]}" "${COMMON_ARGS[@]}" --lr-scheduler polynomial_decay --no-epoch-checkpoints)

# denoise DATA SAVE UPDATES SEED [args...]: guided_denoising (cross_entropy)
denoise() {
    local data=$1 save=$2 updates=$3 seed=$4; shift 4
    maskplug_train "$data" --task guided_denoising --criterion cross_entropy "${TRAIN_ARGS[@]}" \
        --tokens-per-sample "$MASKPLUG_TOKENS" --sample-break-mode complete --shorten-method truncate \
        --lr "${MASKPLUG_PRETRAIN_LR:-1e-3}" --warmup-updates $((updates / 10 + 1)) --total-num-update "$updates" \
        --max-update "$updates" --seed "$seed" --save-dir "$save" "$@"
}

# probe INIT SAVE SEED: fine-tune on the cloze questions (translation q -> a), best checkpoint by dev loss
probe() {
    local init=$1 save=$2 seed=$3
    maskplug_train "$DATA/probe" --task translation -s q -t a --truncate-source \
        --criterion label_smoothed_cross_entropy --label-smoothing 0.1 "${TRAIN_ARGS[@]}" --finetune-from-model "$init" \
        --lr "${MASKPLUG_FINETUNE_LR:-3e-4}" --warmup-updates $((PROBE_UPDATES / 10 + 1)) \
        --total-num-update "$PROBE_UPDATES" --max-update "$PROBE_UPDATES" --validate-interval-updates 100 \
        --save-interval-updates 100 --keep-interval-updates 1 --seed "$seed" --save-dir "$save" --no-last-checkpoints
}

# policy_train DATA SAVE UPDATES [args...]: a span policy (roberta_tiny with a start/end head), its
# contexts read whole: 128 tokens, roberta_tiny's positions, whatever MASKPLUG_TOKENS (QUICK=1: 64) says
policy_train() {
    local data=$1 save=$2 updates=$3; shift 3
    maskplug_train "$data" --arch roberta_tiny --tokens-per-sample 128 "${COMMON_ARGS[@]}" \
        --lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates $((updates / 10 + 1)) --max-update "$updates" \
        --no-epoch-checkpoints --seed 1 --save-dir "$save" "$@"
}

echo "[1/6] cased news corpus, salient spans and the entity-cloze probe"
python -m preprocess.prepare_bart_data --out "$DATA" --cache "${MASKPLUG_DOWNLOADS:-$WORK/downloads}" --sentences "${BART_SENTENCES:-20000}" \
    "${BPE_ARGS[@]}"

echo "[2/6] general model"
if [ -n "${PRETRAINED:-}" ]; then
    if ! cmp -s "$PRETRAINED/dict.txt" "$DATA/news/dict.txt"; then
        echo "PRETRAINED=$PRETRAINED: its dict.txt is not the data's ($DATA/news/dict.txt); binarize the data with" \
             "the release's BPE and dictionary first" >&2
        exit 2
    fi
    GENERAL="$PRETRAINED/model.pt"
else
    stage bart_general "$WORK/logs/bart_general.log" \
        denoise "$DATA/news" "$OUT/general" "$GENERAL_UPDATES" 1 --mask-policy span --span-mask-prob 0.3 \
        --target-format full
    GENERAL="$OUT/general/checkpoint_last.pt"
fi

if [ -n "${BART_GENERAL_ONLY:-}" ]; then
    echo "BART_GENERAL_ONLY is set: the data ($DATA) and the general model ($GENERAL) only"
    exit 0
fi

# the learned rows of ROWS (each trains its own span policy; the heuristic rows need none)
LEARNED=()
for row in $ROWS; do case "$row" in sup|transfer|meta) LEARNED+=("$row") ;; esac; done
echo "[3/6] span policies: ${LEARNED[*]:-none of the rows is learned, nothing to train}"
labels=()
for policy in "${LEARNED[@]}"; do
    case "$policy" in sup|meta) labels+=(policy) ;; transfer) labels+=(policy_person) ;; esac
done
# shellcheck disable=SC2207
labels=($(printf '%s\n' "${labels[@]}" | sort -u))
for kind in "${labels[@]}"; do
    for split in train valid; do
        stage "bart_labels_${kind}_$split" "$WORK/logs/bart_labels_${kind}_$split.log" \
            fairseq-maskplug-span-labels --data "$DATA/$kind" --split "$split" --text "$DATA/text/$kind.$split.txt" \
            --answers "$DATA/text/$kind.$split.answers"
    done
done
for policy in "${LEARNED[@]}"; do
    case "$policy" in
        sup) stage bart_policy_sup "$WORK/logs/bart_policy_sup.log" \
                 policy_train "$DATA/policy" "$OUT/policies/sup" "$POLICY_UPDATES" --task span_policy ;;
        transfer) stage bart_policy_transfer "$WORK/logs/bart_policy_transfer.log" \
                      policy_train "$DATA/policy_person" "$OUT/policies/transfer" "$POLICY_UPDATES" --task span_policy ;;
        meta) stage bart_policy_meta "$WORK/logs/bart_policy_meta.log" \
                  policy_train "$DATA/news" "$OUT/policies/meta" "$META_UPDATES" --task meta_span_policy \
                  --downstream-data "$DATA/probe" --seq2seq-checkpoint "$GENERAL" \
                  --meta-gradient "${BART_META_GRADIENT:-exact}" --batch-size "${BART_META_BATCH:-8}" --max-valid-steps 10 ;;
    esac
    stage "bart_scores_$policy" "$WORK/logs/bart_scores_$policy.log" \
        fairseq-maskplug-score-spans --checkpoint "$OUT/policies/$policy/checkpoint_best.pt" --data "$DATA/news" \
        --splits train valid --start-name "span_start_$policy" --end-name "span_end_$policy"
done

declare -A POLICY=(
    [orig]="--mask-policy random --target-format full"
    [rand]="--mask-policy random --target-format masked"
    [ssm]="--mask-policy salient_span --target-format masked"
)
for policy in sup transfer meta; do
    POLICY[$policy]="--mask-policy learned_span --learned-start-track span_start_$policy \
--learned-end-track span_end_$policy --target-format masked"
done
echo "[4/6] intermediate pre-training, $INTERMEDIATE_UPDATES updates per row and seed (seeds: $SEEDS)"
for row in $ROWS; do
    [ "$row" = none ] && continue
    for seed in $SEEDS; do
        # shellcheck disable=SC2086
        stage "bart_${row}__seed$seed" "$WORK/logs/bart_${row}__seed$seed.log" \
            denoise "$DATA/news" "$OUT/intermediate/${row}__seed$seed" "$INTERMEDIATE_UPDATES" "$seed" \
            --finetune-from-model "$GENERAL" ${POLICY[$row]}
    done
done

echo "[5/6] probe fine-tuning ($PROBE_UPDATES updates) and exact match"
for row in $ROWS; do
    for seed in $SEEDS; do
        init="$GENERAL"
        [ "$row" != none ] && init="$OUT/intermediate/${row}__seed$seed/checkpoint_last.pt"
        stage "bart_probe_${row}__seed$seed" "$WORK/logs/bart_probe_${row}__seed$seed.log" \
            probe "$init" "$OUT/probe/${row}__seed$seed" "$seed"
        stage "bart_em_${row}__seed$seed" "$WORK/logs/bart_em_${row}__seed$seed.log" \
            python recipes/probe_em.py --checkpoint "$OUT/probe/${row}__seed$seed/checkpoint_best.pt" \
            --data "$DATA/probe" --output "$OUT/results/${row}__seed$seed.json" \
            $([ "$n_gpus" -eq 0 ] && echo --cpu)
    done
done

echo "[6/6] what each policy masks (recipes/mask_analysis.py)"
analysed=()
for row in $ROWS; do case "$row" in rand|ssm|sup|transfer|meta) analysed+=("$row") ;; esac; done
if [ ${#analysed[@]} -gt 0 ]; then
    python recipes/mask_analysis.py --data "$DATA" --output "$OUT/results/masks.png" --policies "${analysed[@]}" \
        | tee "$OUT/results/masks.json"
fi

seed=${SEEDS%% *}
echo "probe fine-tuning, validation loss against updates (seed $seed) -> $OUT/results/probe_valid_loss.svg"
runs=()
for row in $ROWS; do runs+=("$row=$WORK/logs/bart_probe_${row}__seed$seed.log"); done
plot_runs "$OUT/results/probe_valid_loss.svg" loss "closed-book QA probe fine-tuning, seed $seed" "${runs[@]}"
echo
echo "Closed-book entity cloze, exact match in % (mean ± std over seeds $SEEDS):"
python recipes/bart_table.py "$OUT/results" --rows "$(echo $ROWS | tr ' ' ,)" | tee "$OUT/results/table.md"
quick_note
echo "finished in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s"
