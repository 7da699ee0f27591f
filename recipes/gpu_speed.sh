#!/usr/bin/env bash
# Every mask policy's training speed beside random on a lent GPU machine, in one command (issue 72): install the
# offline bundle there (no network), then benchmarks/gpu_policy_speed.py within a total time, everything under OUT
# (the results file rewritten after every row, so a cut run keeps what finished).
#
#   bash recipes/gpu_speed.sh BUNDLE OUT [TOTAL_SECONDS] [-- gpu_policy_speed.py options...]
#
# BUNDLE: `bash recipes/offline_bundle.sh BUNDLE --python 3.12 --exclude numpy,scikit-learn,lxml,cython,scipy,statsmodels
# --leave-out numba` written here (the lent machine's image has those six); "-" when the plugin is installed
# already. TOTAL_SECONDS (300): the whole command, install included; rows not started 20 s before it are left out.
# OUT gets device.txt, install.log, speed.log and speed.json (the stored-result format of docs/results/).
set -uo pipefail
if [ $# -lt 2 ]; then
    echo "usage: bash recipes/gpu_speed.sh BUNDLE OUT [TOTAL_SECONDS] [-- gpu_policy_speed.py options...]" >&2
    exit 2
fi
bundle=$1 out=$2 total=300
shift 2
if [ $# -gt 0 ] && [ "$1" != -- ]; then total=$1; shift; fi
[ "${1:-}" = -- ] && shift
source "$(dirname "${BASH_SOURCE[0]}")/gpu_install.sh"
start_device_command gpu_speed.sh || exit $?
set_budget gpu_speed.sh "$total" 20 30 "time anything" || exit 1
python3 benchmarks/gpu_policy_speed.py --json-out "$out/speed.json" --budget "$budget" "$@" 2>&1 | tee "$out/speed.log"
status=${PIPESTATUS[0]}
echo "[gpu_speed] finished in $((SECONDS - started)) s (exit $status)"
exit "$status"
