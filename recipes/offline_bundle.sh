#!/usr/bin/env bash
# Write an offline install bundle of fairseq-maskplug (everything but torch) for a machine without
# internet; see recipes/offline_bundle.py for what it holds and how install.py uses it.
#   bash recipes/offline_bundle.sh OUT [--python 3.12] [--platform TAG ...] [--extras spans,hf,tensorboard]
#                                      [--exclude numpy,scipy] [--leave-out numba]
# On the target, with its own torch installed: python3 OUT/install.py [--target DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
python "$MASKPLUG_ROOT/recipes/offline_bundle.py" "$@"
