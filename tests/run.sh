#!/usr/bin/env bash
# Set up the environment (see recipes/setup_env.sh) and run the test suite in two pytest-xdist
# worker processes (MASKPLUG_TEST_WORKERS; each test file stays in one worker, so module
# fixtures are built once). Extra arguments go to pytest, e.g. `bash tests/run.sh -k side_info`.
set -euo pipefail
MASKPLUG_EXTRAS=test source "$(dirname "${BASH_SOURCE[0]}")/../recipes/setup_env.sh"
cd "$MASKPLUG_ROOT"
python -m pytest -n "${MASKPLUG_TEST_WORKERS:-2}" --dist loadfile "$@"
