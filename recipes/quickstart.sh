#!/usr/bin/env bash
# Quick start: the selective-masking pipeline of Gu et al. 2020 on the embedded demo (tiny
# roberta, MR sentence polarity, news as the general corpus, movie reviews as in-domain text):
# GenePT -> fine-tune -> Downstream Mask -> tagger -> In-domain Mask -> TaskPT (selective and
# matched-random) -> fine-tune -> table with no-TaskPT, matched-random and selective rows.
# About 20 minutes on 2 CPU cores once the environment is built (a line at least every 25 s). Knobs: SM_* (see
# recipes/selective_masking.sh) and MASKPLUG_* (recipes/lib.sh).
# The selective-masking page's peer rows (whole words, PMI-Masking; SM_PEERS) add about 15 minutes: the
# quickstart leaves them out unless SM_PEERS names them.
export SM_PEERS="${SM_PEERS-}"
exec bash "$(dirname "${BASH_SOURCE[0]}")/selective_masking.sh" "$@"
