#!/usr/bin/env bash
# Set up the environment (see recipes/setup_env.sh) and run the test suite.
# Extra arguments go to pytest, e.g. `bash tests/run.sh -k side_info`.
set -euo pipefail
MASKPLUG_EXTRAS=test source "$(dirname "${BASH_SOURCE[0]}")/../recipes/setup_env.sh"
cd "$MASKPLUG_ROOT"
python -m pytest "$@"
