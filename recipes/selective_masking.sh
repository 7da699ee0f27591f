#!/usr/bin/env bash
# Selective masking (Gu et al. 2020) end to end: GenePT (general MLM) -> fine-tune on MR ->
# Downstream Mask (buffer scorer) -> token-importance tagger -> In-domain Mask of the reviews ->
# TaskPT with selective masks and with matched random masks (same number per sequence) ->
# fine-tune -> table of no-TaskPT / matched-random / selective (mean +- std over seeds), and the peers'
# rows: TaskPT with whole-word random masks and with PMI-Masking units (Levine et al. 2021).
#
# QUICK=1: the whole pipeline at toy size in work_quick/ (about 3 minutes on 2 cores; a smoke run).
# Knobs (environment variables; defaults take about 20 minutes on 2 CPU cores):
#   SM_TASKPT_UPDATES   TaskPT updates per run                      (400)
#   SM_FINETUNE_EPOCHS  MR fine-tuning epochs                       (5)
#   SM_SEEDS            fine-tuning seeds, space-separated          (1)
#   SM_DELTA            Downstream Mask threshold delta             (0.05; authors' scripts 0.01)
#   SM_TAGGER_EPOCHS    tagger training epochs                      (5)
#   SM_CLASS_WEIGHT     tagger class-1 weight                       (1.5; authors' scripts 3)
#   SM_CAP              --selective-cap                             (0.15)
#   SM_MASKS            --selective-masks fixed|per_epoch           (fixed)
#   SM_PEERS            peer rows: whole-word, pmi, ptw, informask, self-evolution, difference
#                       ("whole-word pmi"; the quickstart: none)
#   SM_PMI_MIN_COUNT    PMI lexicon: n-grams seen more than this    (5; the authors: 10, on a far larger corpus)
# plus those of recipes/lib.sh (data size, general updates, model shape, MASKPLUG_WORK).
# On GPUs every fairseq-train uses all visible GPUs with --fp16. Re-running skips finished
# stages and resumes interrupted ones.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$MASKPLUG_ROOT/recipes/lib.sh"  # cd to the repository root, WORK

UPDATES="${SM_TASKPT_UPDATES:-400}"
EPOCHS="${SM_FINETUNE_EPOCHS:-5}"
SEEDS="${SM_SEEDS:-1}"
DELTA="${SM_DELTA:-0.05}"
TAGGER_EPOCHS="${SM_TAGGER_EPOCHS:-5}"
CLASS_WEIGHT="${SM_CLASS_WEIGHT:-1.5}"
CAP="${SM_CAP:-0.15}"
MASKS="${SM_MASKS:-fixed}"
PEERS="${SM_PEERS-whole-word pmi}"
PMI_MIN_COUNT="${SM_PMI_MIN_COUNT:-5}"
OUT="$WORK/selective"
MR="$WORK/data/mr"
started=$SECONDS
mkdir -p "$OUT/results"

echo "[1/6] demo data ($WORK/data) and GenePT, the general MLM model ($WORK/general, or PRETRAINED)"
general_model
GENEPT="$GENERAL_CHECKPOINT"

echo "[2/6] fine-tune GenePT on MR (also the no-TaskPT row; seeds: $SEEDS)"
finetune_seeds sm no-TaskPT "$GENEPT" "$OUT/results" "$OUT/finetune"
CLASSIFIER="$OUT/finetune/no-TaskPT__seed${SEEDS%% *}/checkpoint_best.pt"

echo "[3/6] Downstream Mask: buffer scoring of the MR texts (delta $DELTA)"
for split in train valid; do
    stage "sm_score_$split" "$WORK/logs/sm_score_$split.log" python -m preprocess.score_importance \
        --checkpoint "$CLASSIFIER" --data "$MR" --split "$split" --name importance --delta "$DELTA" "${PREVIEW_ARGS[@]}"
    grep "sentences/s" "$WORK/logs/sm_score_$split.log"
done
echo "    examples (important subwords in [...]; label 0 = negative, 1 = positive):"
head -4 "$MR/input0/train.importance.preview.txt" | cut -c1-150 | sed 's/^/      /'

echo "[4/6] token-importance tagger on the labelled MR texts ($TAGGER_EPOCHS epochs, class-1 weight $CLASS_WEIGHT)"
tagger_steps=$(( TAGGER_EPOCHS * ( $(num_lines "$MR/input0/train") / (MASKPLUG_BATCH * WORKERS) + 1 ) ))
stage sm_tagger "$WORK/logs/sm_tagger.log" \
    maskplug_train "$MR/input0" --task token_importance --criterion token_importance \
    --label-track importance --tokens-per-sample "$MASKPLUG_TOKENS" --positive-class-weight "$CLASS_WEIGHT" \
    "${MODEL_ARGS[@]}" "${COMMON_ARGS[@]}" --finetune-from-model "$GENEPT" \
    --lr-scheduler polynomial_decay --lr "${MASKPLUG_FINETUNE_LR:-2e-4}" --warmup-updates $((tagger_steps / 10 + 1)) \
    --total-num-update "$tagger_steps" --max-epoch "$TAGGER_EPOCHS" \
    --best-checkpoint-metric f1 --maximize-best-checkpoint-metric \
    --save-dir "$OUT/tagger" --no-epoch-checkpoints --no-last-checkpoints
python - "$WORK/logs/sm_tagger.log" <<'PY'
import json, sys
records = [json.loads(l.split("| valid | ", 1)[1]) for l in open(sys.argv[1]) if "| valid | " in l]
best = max(records, key=lambda r: float(r["valid_f1"]))
print(f"    tagger, best epoch {best['epoch']}: class-1 precision {best['valid_precision']}, "
      f"recall {best['valid_recall']}, F1 {best['valid_f1']} (valid)")
PY

echo "[5/6] In-domain Mask: tag the reviews"
stage sm_annotate "$WORK/logs/sm_annotate.log" python -m preprocess.annotate_importance \
    --checkpoint "$OUT/tagger/checkpoint_best.pt" --data "$WORK/data/indomain" --splits train valid --name importance "${PREVIEW_ARGS[@]}"
grep "tagged" "$WORK/logs/sm_annotate.log" | sed 's/^/    /'

echo "[6/6] TaskPT from GenePT: selective and matched-random masks ($UPDATES updates each)"
stage sm_taskpt_selective "$WORK/logs/sm_taskpt_selective.log" \
    pretrain selective_mlm "$WORK/data/indomain" "$OUT/taskpt_selective" "$UPDATES" \
    --selective-cap "$CAP" --selective-masks "$MASKS" --finetune-from-model "$GENEPT"
stage sm_taskpt_matched "$WORK/logs/sm_taskpt_matched.log" \
    pretrain selective_mlm "$WORK/data/indomain" "$OUT/taskpt_matched" "$UPDATES" \
    --mask-policy matched_random --matched-policy selective --selective-cap "$CAP" --selective-masks "$MASKS" \
    --finetune-from-model "$GENEPT"
for run in selective matched; do
    last_record "$WORK/logs/sm_taskpt_$run.log" valid | python -c "import json,sys; r=json.load(sys.stdin); \
print(f'    $run: valid mask rate {r[\"valid_mask_rate\"]}, masks/seq {r[\"valid_masks_per_seq\"]}, ' \
      f'unmasked seqs {r[\"valid_seq_unmasked\"]}')"
done
# each run's logged valid loss is on its own masks (selective vs random positions): not comparable.
# One fixed set of random masks for both (fairseq-maskplug-evaluate-mlm):
python -m fairseq_maskplug.evaluation.evaluate_mlm --data "$WORK/data/indomain" --split valid \
    "$OUT/taskpt_selective/checkpoint_last.pt" "$OUT/taskpt_matched/checkpoint_last.pt" \
    > "$OUT/fixed_mask_loss.jsonl" 2> "$WORK/logs/sm_fixed_mask_loss.log"
python - "$OUT/fixed_mask_loss.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
losses = ", ".join(f"{name} {r['loss']:.3f}" for name, r in zip(("selective", "matched"), rows))
print(f"    in-domain valid MLM loss on one fixed set of random masks (15%, seed 1; bits): {losses}")
PY

ROWS="matched-random selective"
declare -A INIT=([matched-random]="$OUT/taskpt_matched/checkpoint_last.pt"
                 [selective]="$OUT/taskpt_selective/checkpoint_last.pt")
for peer in $PEERS; do
    case "$peer" in
        whole-word)  # random whole words, the share of words the selective cap allows
            stage sm_taskpt_whole-word "$WORK/logs/sm_taskpt_whole-word.log" \
                pretrain guided_mlm "$WORK/data/indomain" "$OUT/taskpt_whole-word" "$UPDATES" \
                --mask-policy random --mask-unit word "${WORD_ARGS[@]}" --mask-prob "$CAP" \
                --finetune-from-model "$GENEPT" ;;
        pmi)  # PMI-Masking: a lexicon of the reviews' collocations, units masked to the same budget
            stage sm_pmi_units "$WORK/logs/sm_pmi_units.log" python -m preprocess.pmi_units \
                --data "$WORK/data/indomain" --splits train,valid --min-count "$PMI_MIN_COUNT" "${WORD_ARGS[@]}" \
                --write-lexicon "$OUT/pmi_lexicon.tsv"
            tail -1 "$WORK/logs/sm_pmi_units.log" | python -c "import json,sys; s=json.load(sys.stdin); \
print(f'    PMI lexicon {sum(s[\"lexicon\"].values())} n-grams; {100 * s[\"train\"][\"share_of_words_in_ngrams\"]:.1f}% of ' \
      f'the reviews\' words lie in one')"
            stage sm_taskpt_pmi "$WORK/logs/sm_taskpt_pmi.log" \
                pretrain guided_mlm "$WORK/data/indomain" "$OUT/taskpt_pmi" "$UPDATES" \
                --mask-policy pmi --pmi-mask-prob "$CAP" --finetune-from-model "$GENEPT" ;;
        ptw)  # PTW: POS tags of the reviews, masks by each tag's running loss (Yang et al. 2023), whole words
            [ -n "${PRETRAINED:-}" ] && { echo "SM_PEERS: ptw needs sentencepiece demo data" >&2; exit 2; }
            for split in train valid; do
                sed 's/ //g; s/▁/ /g; s/^ //' "$WORK/data/text/indomain.$split.tok" > "$OUT/indomain.$split.txt"
                stage "sm_pos_$split" "$WORK/logs/sm_pos_$split.log" python -m preprocess.pos_tags \
                    --data "$WORK/data/indomain" --split "$split" --text "$OUT/indomain.$split.txt"
            done
            stage sm_taskpt_ptw "$WORK/logs/sm_taskpt_ptw.log" \
                pretrain guided_mlm "$WORK/data/indomain" "$OUT/taskpt_ptw" "$UPDATES" \
                --mask-policy ptw --mask-unit word "${WORD_ARGS[@]}" --ptw-mask-prob "$CAP" \
                --finetune-from-model "$GENEPT" ;;
        informask)  # InforMask: per-token rates from the reviews' co-occurrence PMI (Sadeq et al. 2022); every
                    # chosen token replaced by <mask>, as the authors' pretrain/dataset.py (no 80/10/10)
            stage sm_informask "$WORK/logs/sm_informask.log" python -m preprocess.informask \
                --data "$WORK/data/indomain" --splits train,valid --rate "$CAP"
            stage sm_taskpt_informask "$WORK/logs/sm_taskpt_informask.log" \
                pretrain guided_mlm "$WORK/data/indomain" "$OUT/taskpt_informask" "$UPDATES" \
                --mask-policy informask --leave-unmasked-prob 0 --random-token-prob 0 --finetune-from-model "$GENEPT" ;;
        self-evolution)  # Self-Evolution: GenePT's hard tokens of the reviews, the hardest CAP share, and the
                         # token-specific label smoothing (--criterion self_evolution, α 0.1) (Zhong et al.)
            stage sm_self_questioning "$WORK/logs/sm_self_questioning.log" python -m preprocess.score_pll \
                --checkpoint "$GENEPT" --data "$WORK/data/indomain" --splits train valid --metric unmasked \
                --name token_likelihood --word-starts token
            stage sm_taskpt_self-evolution "$WORK/logs/sm_taskpt_self-evolution.log" \
                pretrain guided_mlm "$WORK/data/indomain" "$OUT/taskpt_self-evolution" "$UPDATES" \
                --mask-policy self_evolution --se-max-share "$CAP" --criterion self_evolution \
                --finetune-from-model "$GENEPT" ;;
        difference)  # Difference-Masking: the reviews against the general corpus, GenePT's embeddings, the authors'
                     # rank weighting (words ranked, pieces drawn) (Wilf et al.)
            stage sm_difference "$WORK/logs/sm_difference.log" python -m preprocess.difference \
                --data "$WORK/data/indomain" --general "$WORK/data/general" --checkpoint "$GENEPT" \
                --write-anchors "$OUT/difference_anchors.tsv"
            stage sm_taskpt_difference "$WORK/logs/sm_taskpt_difference.log" \
                pretrain guided_mlm "$WORK/data/indomain" "$OUT/taskpt_difference" "$UPDATES" \
                --mask-policy difference --difference-mask-prob "$CAP" --difference-weighting rank \
                --finetune-from-model "$GENEPT" ;;
        *) echo "SM_PEERS: unknown row $peer (whole-word, pmi, ptw, informask, self-evolution, difference)" >&2
           exit 2 ;;
    esac
    last_record "$WORK/logs/sm_taskpt_$peer.log" valid | python -c "import json,sys; r=json.load(sys.stdin); \
print(f'    $peer: valid mask rate {r[\"valid_mask_rate\"]} of the tokens, {r.get(\"valid_unit_mask_rate\", \"-\")} of its units')"
    INIT[$peer]="$OUT/taskpt_$peer/checkpoint_last.pt"
    ROWS="$ROWS $peer"
done

echo "    fine-tuning the TaskPT models on MR"
for row in $ROWS; do
    finetune_seeds sm "$row" "${INIT[$row]}" "$OUT/results" "$OUT/finetune"
done

seed=${SEEDS%% *}
echo "    MR fine-tuning, validation accuracy against updates (seed $seed) -> $OUT/results/finetune_valid_accuracy.svg"
plot_runs "$OUT/results/finetune_valid_accuracy.svg" accuracy "Selective masking: MR fine-tuning, seed $seed" \
    no-TaskPT="$WORK/logs/sm_ft_no-TaskPT__seed$seed.log" \
    matched-random="$WORK/logs/sm_ft_matched-random__seed$seed.log" selective="$WORK/logs/sm_ft_selective__seed$seed.log" \
    $(for peer in $PEERS; do echo "$peer=$WORK/logs/sm_ft_${peer}__seed$seed.log"; done)
echo
echo "MR sentence polarity ($EPOCHS fine-tuning epochs; GenePT = $GENERAL_DESCRIPTION;"
echo "TaskPT = $UPDATES in-domain updates, masks capped at $CAP, $MASKS), accuracy and macro-F1 in %:"
python recipes/results_table.py "$OUT/results" --rows "no-TaskPT,${ROWS// /,}"
quick_note
echo "finished in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s"
