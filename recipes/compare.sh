#!/usr/bin/env bash
# A paper's method against its baselines over seeds, with paired statistics: the demo data and the recipes' general
# model (BART: its own data and general denoising model, recipes/bart_policies.sh's), then the paper's plan,
# recipes/compare_plans/METHOD.toml, run by fairseq-maskplug-compare (docs/compare.md): each (arm, seed) one
# resumable unit in which every stage draws from the seed, then mean ± standard error, the intervals over seeds and
# over seeds × test items, Holm-adjusted p-values and the smallest difference the run could detect.
#
#   bash recipes/compare.sh METHOD [SEED...] [--set KEY=VALUE ...]
#       METHOD: selective, l3, fe, tlm or bart; seeds 1 2 3 4 5 by default; --set changes one key of the plan
#       (e.g. --set finetune.epochs=3), as fairseq-maskplug-compare's --set does
#   bash recipes/compare.sh null|harm|taskpt [SEED...] [--set KEY=VALUE ...]
#       issue 88's controls (docs/compare.md, "Can it say yes?") at the low-resource shape: MR with 400 train
#       sentences, the other 2,800 added to test ($WORK/data/mr-400, fairseq-maskplug-subsample-task): eight identical
#       arms (null), label noise (harm), in-domain continued pre-training against none and a classifier from
#       scratch (taskpt, from the general model trained 4,000 updates: $WORK/general-4k, made once)
#   LOW_RESOURCE=1 bash recipes/compare.sh selective|l3|fe|tlm [SEED...] [--arms ARM...] [--set KEY=VALUE ...]
#       a paper's plan at the controls' low-resource shape (issue 88): MR with 400 train sentences ($WORK/data/mr-400,
#       the other 2,800 scored as test), fine-tuned 10 epochs, from $WORK/general-4k; writes
#       $WORK/compare_plans/METHOD-400. --arms runs some of the plan's arms (fairseq-maskplug-compare's --arms)
#   bash recipes/compare.sh lexicon [SEED...] [--arms ARM...] [--set KEY=VALUE ...]
#       issue 100's pre-training controls at the renamed-lexicon shape: the low-resource task and the in-domain reviews
#       with MR's 300 most label-bearing word types replaced by pseudo-words ($WORK/data/lexicon,
#       fairseq-maskplug-rename-lexicon; LEXICON_WORDS changes the 300), then recipes/compare_plans/lexicon.toml:
#       TaskPT against none, TaskPT on word-shuffled reviews, and a classifier from scratch
#   START=minilm bash recipes/compare.sh lexicon|taskpt [SEED...] [--arms ARM...] [--set KEY=VALUE ...]
#       the same shape from a real English encoder instead of the recipes' general model: all-MiniLM-L6-v2 from the
#       package registry, converted, the demo's text in its WordPiece (recipes/minilm_start.sh, $WORK/minilm), then
#       recipes/compare_plans/lexicon-minilm.toml or taskpt-minilm.toml (continued pre-training: 200 updates of 16
#       128-token blocks at lr 1e-4)
#   bash recipes/compare.sh lexicon-policies [SEED...] [--arms ARM...] [--set KEY=VALUE ...]
#       the papers' policies (FE views, PMI units, L3's probabilities) against random masks at that shape, at 100 and
#       400 updates (recipes/compare_plans/lexicon-policies.toml)
#   bash recipes/compare.sh general
#       the demo data and the general model only ($WORK/general/checkpoint_last.pt: 4 layers of dim 128, 1,000
#       updates on the demo's news, about 7 minutes on 2 idle cores; its MR classifiers reach 63-71%): the model
#       of a comparison on your own data when you have none (docs/compare.md; a released RoBERTa converted with
#       fairseq-maskplug-convert is better)
#
# Writes $WORK/compare_plans/METHOD/report.{json,md,png} (the plan's folder under the work folder: the units a run of
# the plan file itself writes, so either way resumes the other's). Re-running resumes: finished units are read
# back, interrupted stages resume. The plans' settings are the recipes' defaults at the quickstart shape (each tied
# to its recipe by a test); the recipes' knobs (L3_*, SM_*, ...) do not change them: --set does.
# COMPARE_PARALLEL units run at once (default 1).
set -euo pipefail
method=${1:-}
case "$method" in
    selective|l3|fe|tlm|bart|null|harm|taskpt|lexicon|lexicon-policies|general) shift ;;
    *) echo "usage: bash recipes/compare.sh selective|l3|fe|tlm|bart|null|harm|taskpt|lexicon|lexicon-policies [SEED...] [--set KEY=VALUE ...], or" \
            "bash recipes/compare.sh general" >&2; exit 2 ;;
esac
if [ "$method" = general ] && [ $# -gt 0 ]; then
    echo "recipes/compare.sh general takes no arguments (got: $1)" >&2; exit 2
fi
seeds=()
while [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; do seeds+=("$1"); shift; done
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3 4 5)
settings=()
if [ $# -gt 0 ] && [ "$1" = --arms ]; then
    settings+=(--arms); shift
    while [ $# -gt 0 ] && [ "$1" != --set ]; do settings+=("$1"); shift; done
fi
while [ $# -gt 0 ]; do
    [ "$1" = --set ] && [ $# -ge 2 ] || { echo "recipes/compare.sh: after the seeds, only --arms ARM... and --set KEY=VALUE (got: $1)" >&2; exit 2; }
    settings+=(--set "$2"); shift 2
done
start=${START:-general}
case "$start" in
    general) ;;
    minilm) [[ $method =~ ^(lexicon|taskpt)$ ]] \
                || { echo "recipes/compare.sh: START=minilm is for lexicon and taskpt (got: $method)" >&2; exit 2; } ;;
    *) echo "recipes/compare.sh: START must be general or minilm (got: $start)" >&2; exit 2 ;;
esac
low=${LOW_RESOURCE:-0}
case "$low" in
    0) ;;
    1) [[ $method =~ ^(selective|l3|fe|tlm)$ ]] \
           || { echo "recipes/compare.sh: LOW_RESOURCE=1 is for selective, l3, fe and tlm (got: $method)" >&2; exit 2; } ;;
    *) echo "recipes/compare.sh: LOW_RESOURCE must be 0 or 1 (got: $low)" >&2; exit 2 ;;
esac
MASKPLUG_EXTRAS=plot source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"  # matplotlib for the plot
source "$MASKPLUG_ROOT/recipes/lib.sh"  # cd to the repository root, WORK
mkdir -p "$WORK/logs"
if [ "$method" = bart ]; then
    echo "[compare] BART's demo data and general model ($WORK/bart, shared with recipes/bart_policies.sh)"
    BART_GENERAL_ONLY=1 bash recipes/bart_policies.sh > "$WORK/logs/compare_bart_general.log" 2>&1 \
        || { tail -20 "$WORK/logs/compare_bart_general.log"; echo "[compare] failed" >&2; exit 1; }
    paths=(--set "data.corpus=$WORK/bart/data/news" --set "data.task=$WORK/bart/data/probe"
           --set "model.checkpoint=$WORK/bart/general/checkpoint_last.pt")
else
    began=$SECONDS
    if [ "$start" = minilm ]; then
        echo "[compare] demo data ($WORK/data) and all-MiniLM-L6-v2 ($WORK/minilm)"
        demo_data
        source "$MASKPLUG_ROOT/recipes/minilm_start.sh"
        minilm_start
    else
        echo "[compare] demo data and the general model ($WORK/general, shared with the recipes)"
        general_model
    fi
    if [ "$method" = general ]; then
        echo "[compare] the general model: $WORK/general/checkpoint_last.pt ($((SECONDS - began)) s); prepare your" \
             "text for it with fairseq-maskplug-prepare-text --like $WORK/general/checkpoint_last.pt (docs/compare.md)"
        exit 0
    fi
    task="$WORK/data/mr"
    if [[ $method =~ ^(null|harm|taskpt|lexicon.*)$ ]] || [ "$low" = 1 ]; then  # issue 88's low-resource shape
        task="$WORK/data/mr-400"
        [ -f "$task/subset.json" ] || fairseq-maskplug-subsample-task --data "$WORK/data/mr" --train-examples 400 \
            --rest-to-test --out "$task" > "$WORK/logs/subsample_mr-400.log" 2>&1 \
            || { tail -5 "$WORK/logs/subsample_mr-400.log"; echo "[compare] failed" >&2; exit 1; }
    fi
    model="$WORK/general/checkpoint_last.pt"
    if { [ "$method" = taskpt ] || [ "$low" = 1 ]; } && [ "$start" = general ]; then  # past the unigram plateau: 4,000 updates
        echo "[compare] the general model at 4,000 updates ($WORK/general-4k; 33 minutes on an idle core, 74 beside a second training)"
        stage general4k "$WORK/logs/general4k.log" pretrain guided_mlm "$WORK/data/general" "$WORK/general-4k" 4000
        model="$WORK/general-4k/checkpoint_last.pt"
    fi
    paths=(--set "data.task=$task" --set "model.checkpoint=$model")
    if [[ $method =~ ^lexicon ]]; then  # issue 100's renamed lexicon, chosen on all of MR's train labels
        data="$WORK/data"
        if [ "$start" = minilm ]; then
            data="$MINILM/data" task="$MINILM/data/mr-400" model="$MINILM/model/model.pt"
        fi
        lexicon="$data/lexicon" words=${LEXICON_WORDS:-300}
        [[ $words =~ ^[0-9]+$ ]] || { echo "recipes/compare.sh: LEXICON_WORDS must be a number (got: $words)" >&2; exit 2; }
        if ! python -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["words"] != int(sys.argv[2]))' \
                "$lexicon/lexicon.json" "$words" 2>/dev/null; then
            echo "[compare] the renamed lexicon: $words word types ($lexicon)"
            fairseq-maskplug-rename-lexicon --task "$task" --select-from "$data/mr" --corpus "$data/indomain" \
                --general "$data/general" --words "$words" --shuffled-corpus --out "$lexicon" \
                > "$WORK/logs/rename_lexicon.log" 2>&1 \
                || { tail -5 "$WORK/logs/rename_lexicon.log"; echo "[compare] failed" >&2; exit 1; }
        fi
        paths=(--set "data.task=$lexicon/task" --set "data.corpus=$lexicon/corpus" --set "model.checkpoint=$model")
        [ "$method" = lexicon ] && paths+=(--set "arms.shuffled.data=$lexicon/corpus-shuffled")
    fi
    [[ $method =~ ^(tlm|null|harm|lexicon.*)$ ]] || paths+=(--set "data.corpus=$WORK/data/indomain")  # TLM's: its produce's
    if [ "$start" = minilm ] && [ "$method" = taskpt ]; then
        paths=(--set "data.task=$MINILM/data/mr-400" --set "data.corpus=$MINILM/data/indomain"
               --set "model.checkpoint=$MINILM/model/model.pt")
    fi
fi
plan=$method
[ "$start" = minilm ] && plan=$method-minilm
out="$WORK/compare_plans/$plan"
if [ "$low" = 1 ]; then  # the controls' fine-tuning at this shape: 10 epochs of 13 batches
    out="$WORK/compare_plans/$method-400"
    paths+=(--set finetune.epochs=10)
fi
for setting in ${settings[@]+"${settings[@]}"}; do  # a --set out=DIR of the user's: the report is there
    [[ $setting == out=* ]] && out="${setting#out=}"
done
log="$WORK/logs/compare_${out##*/}.log"
echo "[compare] recipes/compare_plans/$plan.toml over seeds ${seeds[*]} -> $out/report-vs-*.{json,md,png}"
fairseq-maskplug-compare "recipes/compare_plans/$plan.toml" --seeds "${seeds[@]}" --set "out=$out" "${paths[@]}" \
    --parallel "${COMPARE_PARALLEL:-1}" ${settings[@]+"${settings[@]}"} > "$log" 2>&1 \
    || { tail -20 "$log"; echo "[compare] failed; log: $log" >&2; exit 1; }
cat "$(ls -t "$out"/report-vs-*.md | head -1)"
quick_note
