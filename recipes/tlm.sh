#!/usr/bin/env bash
# TLM (Yao et al. 2022): BM25-retrieve task-relevant documents from a general corpus, train
# from scratch on task + MLM objectives together (stage 1), fine-tune on the task alone with a
# fresh head (stage 2), score the best dev checkpoint on test. Task: MR sentence polarity.
# General corpus: the demo news (3-sentence documents) mixed with the demo movie reviews
# (3-line documents), so retrieval relevance is measurable (share of review documents).
#
# Rows (stage 1 gets the same TLM_UPDATES updates of at most TLM_MAX_TOKENS tokens each):
#   task-only    joint task + MLM on the MR training texts alone (rho1 = 0)
#   tlm-bm25     task + the BM25 top-TLM_TOP_K documents of each MR training text
#   tlm-dsir     task + as many documents selected by DSIR (Xie et al. 2023: hashed n-gram
#                importance resampling toward the MR training texts, fairseq-maskplug-select)
#   tlm-random   task + as many documents drawn uniformly from the corpus
#   general-ft   the demo's general MLM checkpoint (recipes/lib.sh) fine-tuned on MR (its
#                pre-training FLOPs are counted too)
# Then a table: test accuracy and macro-F1 (mean +- std over SEEDS), tokens and FLOPs
# (6 x parameters x tokens) per row, and the differences in standard errors.
#
# Knobs: TLM_TOP_K (10), TLM_UPDATES (300), TLM_MAX_TOKENS (1024), TLM_RATIO rho1 (3: the
# authors' 999 assumes a corpus hundreds of times the task), TLM_MLM_WEIGHT rho2 (20, the
# authors'), TLM_FT_EPOCHS (5), TLM_PATIENCE (3), TLM_BACKEND (bm25s or rank_bm25), SEEDS
# ("1 2"), and those of recipes/lib.sh (model shape, workers; fp16 on all GPUs when present).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$MASKPLUG_ROOT/recipes/lib.sh"  # cd to the repository root, WORK

OUT="$WORK/tlm"
TOP_K="${TLM_TOP_K:-10}"
UPDATES="${TLM_UPDATES:-300}"
MAX_TOKENS="${TLM_MAX_TOKENS:-1024}"
RATIO="${TLM_RATIO:-3}"
MLM_WEIGHT="${TLM_MLM_WEIGHT:-20}"
FT_EPOCHS="${TLM_FT_EPOCHS:-5}"
PATIENCE="${TLM_PATIENCE:-3}"
BACKEND="${TLM_BACKEND:-bm25s}"
SEEDS="${SEEDS:-1 2}"
mkdir -p "$OUT/results" "$WORK/logs"
started=$SECONDS

echo "[1/5] demo data and the general MLM checkpoint (the general-ft baseline)"
general_model

echo "[2/5] general corpus (news + reviews) and the MR queries"
[ -f "$OUT/data/corpus/manifest.json" ] || python -m preprocess.prepare_tlm_data corpus --demo "$WORK/data" --out "$OUT/data"
cat "$OUT/data/corpus/manifest.json"

echo "[3/5] BM25 retrieval (top $TOP_K per MR training text, $BACKEND), DSIR selection and random retrieval of as many documents"
if [ "$BACKEND" = bm25s ]; then INDEX_ARGS=(--index "$OUT/data/index"); else INDEX_ARGS=(); fi
stage "tlm_retrieve_k$TOP_K" "$WORK/logs/tlm_retrieve.log" fairseq-maskplug-retrieve \
    --corpus "$OUT/data/corpus/corpus.txt" --queries "$OUT/data/corpus/queries.txt" --top-k "$TOP_K" \
    --backend "$BACKEND" "${INDEX_ARGS[@]}" --out "$OUT/data/bm25"
tail -1 "$WORK/logs/tlm_retrieve.log"
retrieved=$(wc -l < "$OUT/data/bm25/retrieved.ids")
stage "tlm_dsir_k$TOP_K" "$WORK/logs/tlm_dsir.log" fairseq-maskplug-select \
    --corpus "$OUT/data/corpus/corpus.txt" --target "$OUT/data/corpus/queries.txt" --num-docs "$retrieved" \
    --out "$OUT/data/dsir"
tail -1 "$WORK/logs/tlm_dsir.log"
stage "tlm_external_dsir_k$TOP_K" "$WORK/logs/tlm_external.log" python -m preprocess.prepare_tlm_data external \
    --demo "$WORK/data" --out "$OUT/data" --selected dsir
cat "$OUT/data/external.json"

TLM_MODEL_ARGS=("${MODEL_ARGS[@]}" --pooler-activation-fn gelu --pooler-dropout 0.0)  # the authors' head
# stage1 ROW SEED ARGS...: TLM stage 1 from scratch, TLM_UPDATES updates
stage1() {
    local row=$1 seed=$2; shift 2
    maskplug_train "$WORK/data/mr" --task tlm --criterion tlm --num-classes 2 --tokens-per-sample "$MASKPLUG_TOKENS" \
        "${TLM_MODEL_ARGS[@]}" "${COMMON_ARGS[@]}" --max-tokens "$MAX_TOKENS" --batch-size 256 \
        --tlm-task-mlm-weight "$MLM_WEIGHT" --mask-policy random --mask-prob 0.15 \
        --lr-scheduler polynomial_decay --lr "${MASKPLUG_PRETRAIN_LR:-1e-3}" --warmup-updates $((UPDATES / 10 + 1)) \
        --total-num-update "$UPDATES" --max-update "$UPDATES" --seed "$seed" --save-dir "$OUT/stage1/${row}__seed$seed" \
        --no-epoch-checkpoints --best-checkpoint-metric accuracy --maximize-best-checkpoint-metric "$@"
}
# stage2 ROW SEED: task-only fine-tuning from the last stage-1 checkpoint with a fresh head, best dev accuracy
stage2() {
    local row=$1 seed=$2 save="$OUT/stage2/$1__seed$2"
    local steps=$(( FT_EPOCHS * ( $(num_lines "$WORK/data/mr/input0/train") / (MASKPLUG_BATCH * WORKERS) + 1 ) ))
    maskplug_train "$WORK/data/mr" --task tlm --criterion tlm --num-classes 2 --tokens-per-sample "$MASKPLUG_TOKENS" \
        "${TLM_MODEL_ARGS[@]}" "${COMMON_ARGS[@]}" --tlm-external-ratio 0 --tlm-task-mlm-weight 0 \
        --classification-head-name tlm_finetune_head --finetune-from-model "$OUT/stage1/${row}__seed$seed/checkpoint_last.pt" \
        --lr-scheduler polynomial_decay --lr "${MASKPLUG_FINETUNE_LR:-2e-4}" --warmup-updates $((steps / 10 + 1)) \
        --total-num-update "$steps" --max-epoch "$FT_EPOCHS" --patience "$PATIENCE" --seed "$seed" \
        --best-checkpoint-metric accuracy --maximize-best-checkpoint-metric --save-dir "$save" \
        --no-epoch-checkpoints --no-last-checkpoints || return 1
    score_on_mr "$save/checkpoint_best.pt" "$OUT/results/${row}__seed$seed"
}

echo "[4/5] stage 1 ($UPDATES updates of <= $MAX_TOKENS tokens, rho1 $RATIO, rho2 $MLM_WEIGHT) and stage 2 ($FT_EPOCHS epochs), seeds: $SEEDS"
for seed in $SEEDS; do
    stage "tlm_s1_task-only__seed$seed" "$WORK/logs/tlm_s1_task-only__seed$seed.log" \
        stage1 task-only "$seed" --tlm-external-ratio 0
    for source in bm25 dsir random; do
        stage "tlm_s1_tlm-${source}__seed$seed" "$WORK/logs/tlm_s1_tlm-${source}__seed$seed.log" \
            stage1 "tlm-$source" "$seed" --tlm-external-ratio "$RATIO" --tlm-external-data "$OUT/data/bin_$source"
    done
    for row in task-only tlm-bm25 tlm-dsir tlm-random; do
        stage "tlm_s2_${row}__seed$seed" "$WORK/logs/tlm_s2_${row}__seed$seed.log" stage2 "$row" "$seed"
    done
    stage "tlm_general-ft__seed$seed" "$WORK/logs/tlm_general-ft__seed$seed.log" \
        finetune_and_score general-ft "$GENERAL_CHECKPOINT" "$seed" "$FT_EPOCHS" "$OUT/results" "$OUT/stage2"
done

seed=${SEEDS%% *}
echo "[5/5] stage-2 validation accuracy against updates (seed $seed) -> $OUT/results/stage2_valid_accuracy.svg, and the table"
plot_runs "$OUT/results/stage2_valid_accuracy.svg" accuracy "TLM stage 2 (and general-ft) on MR, seed $seed" \
    task-only="$WORK/logs/tlm_s2_task-only__seed$seed.log" tlm-bm25="$WORK/logs/tlm_s2_tlm-bm25__seed$seed.log" \
    tlm-dsir="$WORK/logs/tlm_s2_tlm-dsir__seed$seed.log" tlm-random="$WORK/logs/tlm_s2_tlm-random__seed$seed.log" \
    general-ft="$WORK/logs/tlm_general-ft__seed$seed.log"
python recipes/tlm_table.py --results "$OUT/results" --logs "$WORK/logs" --general-log "$WORK/logs/general.log" \
    --checkpoint "$OUT/stage2/task-only__seed${SEEDS%% *}/checkpoint_best.pt" --seeds "$SEEDS" \
    --external "$OUT/data/external.json"
quick_note
echo "finished in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s"
