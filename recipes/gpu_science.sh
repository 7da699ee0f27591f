#!/usr/bin/env bash
# The papers' seeded comparisons on a lent GPU machine, in one command (issue 49): install the offline
# bundle there (recipes/offline_bundle.sh; no network), then benchmarks/gpu_science.py within a total
# time, everything under OUT (each plan's report in OUT/results/ with what finished, so a cut run keeps it).
#
#   bash recipes/gpu_science.sh BUNDLE DATA OUT [TOTAL_SECONDS] [-- gpu_science.py options...]
#
# BUNDLE: `bash recipes/offline_bundle.sh BUNDLE --python 3.12 --exclude numpy,scikit-learn,lxml,cython --leave-out numba`
# written here (the lent machine's image has those four); "-" when the plugin is installed already.
# DATA: `python -m preprocess.prepare_demo --out DATA` written here. TOTAL_SECONDS (570): the whole
# command, install included; the comparisons get what the install leaves, less 30 s to write up.
# OUT gets device.txt, install.log, science.log, results/ (EXP.json per plan, summary.md) and logs.tar.gz.
set -uo pipefail
if [ $# -lt 3 ]; then
    echo "usage: bash recipes/gpu_science.sh BUNDLE DATA OUT [TOTAL_SECONDS] [-- gpu_science.py options...]" >&2
    exit 2
fi
bundle=$1 data=$2 out=$3 total=570
shift 3
if [ $# -gt 0 ] && [ "$1" != -- ]; then total=$1; shift; fi
[ "${1:-}" = -- ] && shift
[ -d "$data" ] || { echo "gpu_science.sh: DATA $data: no such folder" >&2; exit 2; }
data=$(cd "$data" && pwd)
source "$(dirname "${BASH_SOURCE[0]}")/gpu_install.sh"
start_device_command gpu_science.sh || exit $?
set_budget gpu_science.sh "$total" 30 60 "compare anything" || exit 1
work=$(mktemp -d /tmp/gpu_science_work.XXXXXX)  # a new one per run: never an earlier run's data
MASKPLUG_CURRENT_PYTHON=1 python3 benchmarks/gpu_science.py --data "$data" --work "$work" --out "$out/results" \
    --budget "$budget" "$@" 2>&1 | tee "$out/science.log"
status=${PIPESTATUS[0]}
(cd "$work" && tar czf "$out/logs.tar.gz" --exclude="*.pt" base/logs ./*/units/*/logs 2> /dev/null)
echo "[gpu_science] finished in $((SECONDS - started)) s (exit $status)"
exit "$status"
