#!/usr/bin/env bash
# Set up the environment (see recipes/setup_env.sh) and run the tests in two pytest-xdist worker
# processes (MASKPLUG_TEST_WORKERS; each test file stays in one worker, so module fixtures are
# built once).
#   bash tests/run.sh          the quick tier: every module, every task trained, every policy's
#                              distribution, the layering and bad-input tests, benchmark smoke runs
#   bash tests/run.sh --full   the full tier only: tests marked `full` (torchrun workers, recipes,
#                              README blocks, SIGKILL resume, planted-rule learning, HF round trips)
#   bash tests/run.sh --all    both tiers
# Other arguments go to pytest, e.g. `bash tests/run.sh -k side_info`.
set -euo pipefail
tier=(-m "not full")
args=()
for arg in "$@"; do
    case "$arg" in
        --full) tier=(-m full) ;;
        --all) tier=() ;;
        *) args+=("$arg") ;;
    esac
done
MASKPLUG_EXTRAS=test source "$(dirname "${BASH_SOURCE[0]}")/../recipes/setup_env.sh"
cd "$MASKPLUG_ROOT"
workers="${MASKPLUG_TEST_WORKERS:-2}"
# One share of the cores per worker for torch's and numpy's thread pools (the tests' child processes
# inherit it): two workers with a full-size pool each oversubscribe the cores, and OpenMP threads then
# spin at every barrier. Measured on 2 cores: the whole suite took 14 min with 2 threads per worker,
# 8.5 min with 1. Set OMP_NUM_THREADS yourself to override.
threads=$(( $(nproc) / workers ))
(( threads >= 1 )) || threads=1
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$threads}"
export MKL_NUM_THREADS="${MKL_NUM_THREADS:-$OMP_NUM_THREADS}" OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-$OMP_NUM_THREADS}"
# --no-loadscope-reorder: the files go out in tests/conftest.py's order, the longest first
python -m pytest -n "$workers" --dist loadfile --no-loadscope-reorder ${tier[@]+"${tier[@]}"} ${args[@]+"${args[@]}"}
