#!/usr/bin/env bash
# Shared pieces of the recipes. Source after recipes/setup_env.sh.
#
# Model size and device follow the environment:
#   MASKPLUG_LAYERS / MASKPLUG_DIM / MASKPLUG_FFN / MASKPLUG_HEADS  model shape (default: tiny)
#   MASKPLUG_TOKENS   tokens per block / max positions (default 128)
#   MASKPLUG_BATCH    sentences per batch per worker (default 32)
#   MASKPLUG_PRETRAIN_LR / MASKPLUG_FINETUNE_LR  peak learning rates (1e-3 / 2e-4)
#   MASKPLUG_SEED     fairseq's --seed of every training stage (default 1; fine-tuning stages take
#                     their recipe's seeds instead): a whole-pipeline replicate per seed
#   MASKPLUG_CPU_WORKERS  data-parallel worker processes on CPUs (default 1), started with
#                     torchrun: the multi-GPU code path (pytorch_ddp, gloo) without GPUs
#   MASKPLUG_WORKERS  data-parallel workers in all (for the learning-rate schedules of epoch-based
#                     stages; default: the visible GPUs, else MASKPLUG_CPU_WORKERS; set it with LAUNCH)
# On GPUs, fairseq-train uses every visible GPU and --fp16; on CPU it runs --cpu.
# MASKPLUG_BATCH is per worker (GPU or CPU process): a batch holds workers x MASKPLUG_BATCH.
#
# LAUNCH: a launcher prefix for every fairseq-train of the recipe (one run over all its processes;
# fairseq_maskplug.integration.launch reads the launcher's environment), e.g. on each of 2 nodes
#   LAUNCH="torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500"
#   LAUNCH="srun"   (in an sbatch script with MASTER_ADDR and MASTER_PORT exported)
# and MASKPLUG_WORKERS=16. torchrun gets the fairseq-maskplug-train script, other launchers the command.
#
# PRETRAINED=DIR: a released fairseq model (model.pt + dict.txt, e.g. roberta.base, or the output
# of `python -m preprocess.convert --from-hf ... --to fairseq DIR`) replaces the general stage:
# its architecture replaces the MASKPLUG_* shape, and the demo data is encoded with fairseq's GPT-2
# BPE (GPT2_BPE=DIR with encoder.json and vocab.bpe; default: PRETRAINED) and binarized with the
# release's dict.txt. The work directory then defaults to work_<release name>.

# QUICK=1: every recipe at toy size in its own work directory (work_quick/), reusing work/'s
# downloads: a smoke run of the whole pipeline in minutes (its figures measure nothing).
# Any knob given explicitly still wins.
if [ -n "${QUICK:-}" ]; then
    : "${MASKPLUG_WORK:=$MASKPLUG_ROOT/work_quick}" "${MASKPLUG_DOWNLOADS:=$MASKPLUG_ROOT/work/downloads}"
    : "${MASKPLUG_GENERAL_SENTENCES:=3000}" "${MASKPLUG_INDOMAIN_SENTENCES:=1500}" "${MASKPLUG_GENERAL_UPDATES:=40}"
    : "${MASKPLUG_MR_SENTENCES:=1500}"
    : "${MASKPLUG_LAYERS:=2}" "${MASKPLUG_DIM:=64}" "${MASKPLUG_FFN:=128}" "${MASKPLUG_HEADS:=2}"
    : "${MASKPLUG_TOKENS:=64}" "${MASKPLUG_PROGRESS_SECONDS:=10}"
    : "${SM_TASKPT_UPDATES:=30}" "${SM_FINETUNE_EPOCHS:=1}" "${SM_TAGGER_EPOCHS:=1}"
    # toy-size models and corpora make degenerate tracks (a tagger that marks every token): expected, so the
    # producers and training log them as information, and the table's note says they were expected
    : "${MASKPLUG_EXPECT_DEGENERATE:=1}"
    export MASKPLUG_EXPECT_DEGENERATE
    export MASKPLUG_WORK MASKPLUG_DOWNLOADS MASKPLUG_GENERAL_SENTENCES MASKPLUG_INDOMAIN_SENTENCES MASKPLUG_MR_SENTENCES \
        MASKPLUG_GENERAL_UPDATES MASKPLUG_LAYERS MASKPLUG_DIM MASKPLUG_FFN MASKPLUG_HEADS MASKPLUG_TOKENS \
        MASKPLUG_PROGRESS_SECONDS SM_TASKPT_UPDATES SM_FINETUNE_EPOCHS SM_TAGGER_EPOCHS
fi

# every recipe works in the repository root and writes under $WORK (shared by the recipes)
cd "$MASKPLUG_ROOT"
if [ -n "${PRETRAINED:-}" ]; then
    PRETRAINED="$(cd "$PRETRAINED" && pwd)"
    GPT2_BPE="$(cd "${GPT2_BPE:-$PRETRAINED}" && pwd)"
    PRETRAINED_MODEL_ARGS_LINE="$(python -m fairseq_maskplug.interop.release "$PRETRAINED")"
    read -r -a PRETRAINED_MODEL_ARGS <<< "$PRETRAINED_MODEL_ARGS_LINE"
    WORK="${MASKPLUG_WORK:-$MASKPLUG_ROOT/work_$(basename "$PRETRAINED")}"
elif [ -n "${GPT2_BPE:-}" ]; then
    echo "GPT2_BPE needs PRETRAINED: the released model whose dict.txt binarizes the data" >&2
    exit 2
else
    WORK="${MASKPLUG_WORK:-$MASKPLUG_ROOT/work}"
fi

MASKPLUG_LAYERS="${MASKPLUG_LAYERS:-4}"
MASKPLUG_DIM="${MASKPLUG_DIM:-128}"
MASKPLUG_FFN="${MASKPLUG_FFN:-512}"
MASKPLUG_HEADS="${MASKPLUG_HEADS:-4}"
MASKPLUG_TOKENS="${MASKPLUG_TOKENS:-128}"
MASKPLUG_BATCH="${MASKPLUG_BATCH:-32}"

n_gpus=$(python -c "import torch; print(torch.cuda.device_count())")
if [ "$n_gpus" -gt 0 ]; then
    DEVICE_ARGS=(--fp16 --num-workers 2)
else
    DEVICE_ARGS=(--cpu --num-workers 0)
fi
MASKPLUG_CPU_WORKERS="${MASKPLUG_CPU_WORKERS:-1}"
# torch's threads: one share of the cores per process, chosen once before the first stage (the load
# average then counts other work, not the recipe's own last stage); OMP_NUM_THREADS, when set, wins
if [ -z "${OMP_NUM_THREADS:-}" ]; then
    local_processes=1
    [ "$n_gpus" -eq 0 ] && local_processes="$MASKPLUG_CPU_WORKERS"
    OMP_NUM_THREADS="$(python -m fairseq_maskplug.tools.threads --processes "$local_processes" 2>/dev/null || echo 1)"
    export OMP_NUM_THREADS
    echo "[threads] torch threads per process: $OMP_NUM_THREADS (set OMP_NUM_THREADS to choose)"
fi
if [ "$n_gpus" -gt 0 ]; then WORKERS="${MASKPLUG_WORKERS:-$n_gpus}"; else WORKERS="${MASKPLUG_WORKERS:-$MASKPLUG_CPU_WORKERS}"; fi

# maskplug_train ARGS...: fairseq-maskplug-train under LAUNCH, else under torchrun with
# MASKPLUG_CPU_WORKERS processes on CPUs (one run: fairseq's default pytorch_ddp backend over gloo)
maskplug_train() {
    if [ -n "${LAUNCH:-}" ]; then
        local launcher
        read -r -a launcher <<< "$LAUNCH"
        if [ "$(basename "${launcher[0]}")" = torchrun ]; then
            "${launcher[@]}" "$(command -v fairseq-maskplug-train)" "$@"
        else
            "${launcher[@]}" fairseq-maskplug-train "$@"
        fi
    elif [ "$n_gpus" -eq 0 ] && [ "$MASKPLUG_CPU_WORKERS" -gt 1 ]; then
        torchrun --standalone --nproc-per-node "$MASKPLUG_CPU_WORKERS" "$(command -v fairseq-maskplug-train)" "$@"
    else
        fairseq-maskplug-train "$@"
    fi
}

if [ -n "${PRETRAINED:-}" ]; then
    MODEL_ARGS=("${PRETRAINED_MODEL_ARGS[@]}")
    WORD_STARTS_ARGS=(--word-starts gpt2 --gpt2-encoder-json "$GPT2_BPE/encoder.json"
                      --gpt2-vocab-bpe "$GPT2_BPE/vocab.bpe")
    PREVIEW_ARGS=(--gpt2-bpe "$GPT2_BPE")  # previews of GPT-2 BPE data show text, not labels
    WORD_ARGS=(--gpt2-encoder-json "$GPT2_BPE/encoder.json")  # where GPT-2 words start: --mask-unit word, PMI units
    GENERAL_DESCRIPTION="the released model $PRETRAINED"
else
    MODEL_ARGS=(--arch roberta_base --encoder-layers "$MASKPLUG_LAYERS" --encoder-embed-dim "$MASKPLUG_DIM"
                --encoder-ffn-embed-dim "$MASKPLUG_FFN" --encoder-attention-heads "$MASKPLUG_HEADS"
                --max-positions "$MASKPLUG_TOKENS" --dropout 0.1 --attention-dropout 0.1)
    WORD_STARTS_ARGS=(--word-starts sentencepiece)
    PREVIEW_ARGS=()
    WORD_ARGS=()  # sentencepiece: words start at the pieces' mark, read from dict.txt
    GENERAL_DESCRIPTION="${MASKPLUG_GENERAL_UPDATES:-1000} general MLM updates"
fi
COMMON_ARGS=(--required-batch-size-multiple 1 --no-progress-bar --log-format json --log-interval 10
             --batch-size "$MASKPLUG_BATCH" --optimizer adam --adam-betas '(0.9,0.98)' --adam-eps 1e-6
             --weight-decay 0.01 --clip-norm 0.0 --seed "${MASKPLUG_SEED:-1}" "${DEVICE_ARGS[@]}")

# pretrain TASK DATA SAVE_DIR UPDATES [extra fairseq-train args...]: masked-LM training
# (guided_mlm or fe_mlm; continue from a checkpoint with --finetune-from-model PATH)
pretrain() {
    local task=$1 data=$2 save=$3 updates=$4; shift 4
    maskplug_train "$data" --task "$task" --criterion masked_lm "${MODEL_ARGS[@]}" "${COMMON_ARGS[@]}" \
        --tokens-per-sample "$MASKPLUG_TOKENS" --sample-break-mode complete --shorten-method truncate \
        --lr-scheduler polynomial_decay --lr "${MASKPLUG_PRETRAIN_LR:-1e-3}" --warmup-updates $((updates / 10 + 1)) \
        --total-num-update "$updates" --max-update "$updates" --save-dir "$save" \
        --no-epoch-checkpoints --save-interval-updates "$updates" --keep-interval-updates 1 "$@"
}

# number of lines of a binarized split (read from its .idx header, no fairseq import)
num_lines() {
    python -c 'import struct,sys; f=open(sys.argv[1]+".idx","rb"); f.seek(18); print(struct.unpack("<Q",f.read(8))[0])' "$1"
}

# finetune DATA INIT_CHECKPOINT SAVE_DIR EPOCHS SEED: sentence_prediction, best checkpoint by valid accuracy
# (fairseq's task leaves roberta's LM head unused: --find-unused-parameters, as fairseq's own
# RoBERTa fine-tuning configs, so that it trains data-parallel)
finetune() {
    local data=$1 init=$2 save=$3 epochs=$4 seed=$5
    local steps=$(( epochs * ( $(num_lines "$data/input0/train") / (MASKPLUG_BATCH * WORKERS) + 1 ) ))
    maskplug_train "$data" --task sentence_prediction --criterion sentence_prediction --find-unused-parameters \
        --num-classes 2 --init-token 0 --separator-token 2 --shorten-method truncate \
        "${MODEL_ARGS[@]}" "${COMMON_ARGS[@]}" --finetune-from-model "$init" \
        --lr-scheduler polynomial_decay --lr "${MASKPLUG_FINETUNE_LR:-2e-4}" --warmup-updates $((steps / 10 + 1)) \
        --max-epoch "$epochs" --total-num-update "$steps" --seed "$seed" \
        --best-checkpoint-metric accuracy --maximize-best-checkpoint-metric \
        --save-dir "$save" --no-epoch-checkpoints --no-last-checkpoints
}

# stage_progress LOG TOTAL SECONDS: where a running stage is, from its log: the last training
# record of fairseq (update, loss, time left when the total is known: TOTAL, else the
# --max-update fairseq logged), else the log's last line
stage_progress() {
    local log=$1 total=$2 seconds=$3 record updates loss
    record=$(grep -E '\| (train_inner|train) \| \{' "$log" 2>/dev/null | tail -1 || true)
    updates=$(sed -n 's/.*"num_updates": "\{0,1\}\([0-9]*\).*/\1/p' <<< "$record")
    if [ -z "$total" ]; then  # fairseq's logged configuration (0: no limit)
        total=$(grep -o -m 1 "'max_update': [0-9]*" "$log" 2>/dev/null | grep -o '[0-9]*$' || true)
        [ "$total" = 0 ] && total=""
    fi
    if [ -n "$updates" ] && [ "$updates" -gt 0 ]; then
        loss=$(sed -n 's/.*"loss": "\{0,1\}\([0-9.]*\).*/\1/p' <<< "$record")
        if [ -n "$total" ] && [ "$total" -gt "$updates" ]; then
            echo "update $updates/$total, loss $loss, about $(( seconds * (total - updates) / updates )) s left"
        else
            echo "update $updates, loss $loss"
        fi
    else
        # (not fairseq's import-time hint for its speech tasks, which every fairseq command logs first)
        tail -c 4000 "$log" 2>/dev/null | tr '\r' '\n' | grep -v -e '^[[:space:]]*$' -e 'Please install tensorboardX' \
            | tail -1 | cut -c1-160 || true
    fi
}

# stage_lock NAME / stage_unlock NAME: hold $WORK/.locks/NAME (a folder made atomically, holding this shell's pid)
# while a stage runs: a second recipe running the same stage at once (two `compare.sh` needing the general model)
# waits for the first, says so once, then finds the stage done. A lock whose holder has ended (a killed run) is
# taken over.
stage_lock() {
    local dir="$WORK/.locks/$1" said="" owner
    mkdir -p "$WORK/.locks"
    while ! mkdir "$dir" 2>/dev/null; do
        owner=$(cat "$dir/pid" 2>/dev/null || true)
        if [ -n "$owner" ] && ! kill -0 "$owner" 2>/dev/null; then
            rm -rf "$dir"
            continue
        fi
        if [ -z "$said" ]; then
            echo "    [$1] another run (pid ${owner:-starting}) is running this stage: waiting for it to end"
            said=1
        fi
        sleep 2
    done
    echo $$ > "$dir/pid"
}
stage_unlock() { rm -rf "$WORK/.locks/$1"; }

# stage NAME LOG COMMAND...: run COMMAND unless it finished before (marker $WORK/.done/NAME),
# output to LOG; says when it starts (with LOG), where it is every MASKPLUG_PROGRESS_SECONDS (25)
# and when it ends (wall time); on failure shows the end of LOG. An interrupted stage resumes
# from its checkpoint_last.pt when run again; a finished one is not run again.
# Under stage_lock NAME.
stage() {
    local name=$1 log=$2; shift 2
    if [ -f "$WORK/.done/$name" ]; then echo "    done before: $name"; return 0; fi
    stage_lock "$name"
    if [ -f "$WORK/.done/$name" ]; then stage_unlock "$name"; echo "    done meanwhile by another run: $name"; return 0; fi
    local code=0
    stage_run "$name" "$log" "$@" || code=$?
    stage_unlock "$name"
    return $code
}

# stage_run NAME LOG COMMAND...: stage's work, under its lock
stage_run() {
    local name=$1 log=$2; shift 2
    local total="" previous="" arg
    for arg in "$@"; do [ "$previous" = --max-update ] && total=$arg; previous=$arg; done
    echo "    [$name] started $(date +%H:%M:%S), log: $log"
    local start=$SECONDS last=$SECONDS pid
    "$@" > "$log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        if (( SECONDS - last >= ${MASKPLUG_PROGRESS_SECONDS:-25} )) && kill -0 "$pid" 2>/dev/null; then
            last=$SECONDS
            echo "    [$name] $(( SECONDS - start )) s: $(stage_progress "$log" "$total" $(( SECONDS - start )))"
        fi
    done
    if wait "$pid"; then
        mkdir -p "$WORK/.done" && touch "$WORK/.done/$name"
        echo "    [$name] finished in $(( SECONDS - start )) s"
        stage_warnings "$name" "$log"
    else
        tail -30 "$log"; echo "stage $name failed after $(( SECONDS - start )) s; full log: $log" >&2; return 1
    fi
}

# first_steps_args: $WORK/first-steps.args, which the README's First steps read into $TRY: the general
# model's shape, its block length and its checkpoint (a QUICK=1 run's model is smaller than the full one's)
first_steps_args() {
    printf '%s ' "${MODEL_ARGS[@]}" --tokens-per-sample "$MASKPLUG_TOKENS" --finetune-from-model "$GENERAL_CHECKPOINT" \
        > "$WORK/first-steps.args.tmp" && echo >> "$WORK/first-steps.args.tmp" \
        && mv "$WORK/first-steps.args.tmp" "$WORK/first-steps.args"
}

# general_model: the demo data ($WORK/data) and the general checkpoint GENERAL_CHECKPOINT, shared
# by all recipes: $WORK/general/checkpoint_last.pt (general MLM on the news), or PRETRAINED/model.pt;
# and $WORK/first-steps.args (first_steps_args).
# Knobs: MASKPLUG_GENERAL_SENTENCES (40000) news sentences, MASKPLUG_INDOMAIN_SENTENCES (20000)
#   review lines, MASKPLUG_MR_SENTENCES (0: all) MR sentences, MASKPLUG_VOCAB_SIZE (8000)
#   sentencepiece pieces, MASKPLUG_GENERAL_UPDATES (1000) general MLM updates.
demo_data() {  # $WORK/data: the demo's news, reviews and MR (preprocess/prepare_demo.py; kept when up to date)
    mkdir -p "$WORK/logs"
    local bpe_args=()
    [ -n "${PRETRAINED:-}" ] && bpe_args=(--gpt2-bpe "$GPT2_BPE" --srcdict "$PRETRAINED/dict.txt")
    stage_lock demo_data  # (two recipes at once: the second waits, then finds the data up to date)
    local code=0
    python -m preprocess.prepare_demo --out "$WORK/data" --cache "${MASKPLUG_DOWNLOADS:-$WORK/downloads}" \
        --general-sentences "${MASKPLUG_GENERAL_SENTENCES:-40000}" \
        --indomain-sentences "${MASKPLUG_INDOMAIN_SENTENCES:-20000}" "${bpe_args[@]}" \
        --vocab-size "${MASKPLUG_VOCAB_SIZE:-8000}" --mr-sentences "${MASKPLUG_MR_SENTENCES:-0}" || code=$?
    stage_unlock demo_data
    return $code
}

general_model() {
    demo_data || return 1
    if [ -n "${PRETRAINED:-}" ]; then
        GENERAL_CHECKPOINT="$PRETRAINED/model.pt"
        echo "    released model $GENERAL_CHECKPOINT: ${MODEL_ARGS[*]}"
        first_steps_args
        return 0
    fi
    stage general "$WORK/logs/general.log" \
        pretrain guided_mlm "$WORK/data/general" "$WORK/general" "${MASKPLUG_GENERAL_UPDATES:-1000}" || return 1
    GENERAL_CHECKPOINT="$WORK/general/checkpoint_last.pt"
    first_steps_args
}

# finetune_and_score ROW INIT SEED EPOCHS RESULTS_DIR SAVE_ROOT: fine-tune on MR, write
# RESULTS_DIR/ROW__seedSEED.{valid,test}.json (inside `if`, set -e is off: each step checks itself)
finetune_and_score() {
    local row=$1 init=$2 seed=$3 epochs=$4 results=$5 save="$6/$1__seed$3"
    mkdir -p "$results"
    finetune "$WORK/data/mr" "$init" "$save" "$epochs" "$seed" || return 1
    score_on_mr "$save/checkpoint_best.pt" "$results/${row}__seed$seed"
}

# finetune_seeds RECIPE ROW INIT RESULTS_DIR SAVE_ROOT: finetune_and_score ROW from INIT for every seed of
# SEEDS ($EPOCHS epochs), each the stage RECIPE_ft_ROW__seedS (log: $WORK/logs/RECIPE_ft_ROW__seedS.log)
finetune_seeds() {
    local recipe=$1 row=$2 init=$3 results=$4 save_root=$5 seed
    for seed in $SEEDS; do
        stage "${recipe}_ft_${row}__seed$seed" "$WORK/logs/${recipe}_ft_${row}__seed$seed.log" \
            finetune_and_score "$row" "$init" "$seed" "$EPOCHS" "$results" "$save_root"
    done
}

# score_on_mr CHECKPOINT PREFIX: accuracy and macro-F1 on MR valid and test -> PREFIX.{valid,test}.json
# (one process, the model loaded once)
score_on_mr() {
    local checkpoint=$1 prefix=$2
    python -m fairseq_maskplug.evaluation.evaluate --checkpoint "$checkpoint" --data "$WORK/data/mr" \
        --split valid,test --output "$prefix.{split}.json" || return 1
}

# plot_runs SVG METRIC TITLE NAME=LOG...: a validation METRIC of each run against updates (the first
# run is the baseline, dashed) -> a table on stdout and SVG, from the runs' fairseq logs
# (recipes/plot_valid_loss.py; the docs pages show these plots beside their results tables)
plot_runs() {
    local svg=$1 metric=$2 title=$3; shift 3
    python recipes/plot_valid_loss.py --out "$svg" --metric "$metric" --title "$title" "$@" | sed 's/^/    /'
}

# stage_warnings NAME LOG: the warnings a producer logged about its output (a degenerate track: every token
# important, all scores equal), shown as the stage ends and kept in $WORK/warnings.txt for the tables' notes
stage_warnings() {
    local name=$1 log=$2 line
    { grep -h 'fairseq_maskplug.producers | warning: ' "$log" 2>/dev/null || true; } \
        | sed 's/.*| warning: //; s/ (expected at toy size? set .*//' \
        | sort -u | while IFS= read -r line; do
            echo "    [$name] warning: $line"
            echo "[$name] $line (log: $log)" >> "$WORK/warnings.txt"
        done
}

# quick_note: under a results table, say what the figures are worth (QUICK=1: nothing) and point to the
# producers' warnings about degenerate side information, if any ($WORK/warnings.txt)
quick_note() {
    if [ -n "${QUICK:-}" ]; then
        echo "QUICK=1: a smoke run at toy size (it checks that the pipeline runs); its figures measure nothing;" \
             "degenerate side information is expected at this size (MASKPLUG_EXPECT_DEGENERATE=1: logged, not warned)"
    fi
    if [ -s "$WORK/warnings.txt" ]; then
        echo "note: $(wc -l < "$WORK/warnings.txt") producer warning(s) about degenerate side information, which" \
             "the rows that read it inherit: $WORK/warnings.txt"
    fi
}

# last JSON record logged under TAG ("train", "valid", ...) in LOG
last_record() { grep "| $2 |" "$1" | tail -1 | sed "s/.*| $2 | //"; }
