# Sourced by the lent GPU machine's commands (gpu_science.sh, gpu_speed.sh).
#
# start_device_command NAME: what both commands do first, once they have set `bundle` and `out` from their
# arguments: refuse a BUNDLE without install.py (exit status 2), make OUT, make both paths absolute, go to the
# repository root, start the clock (`started`), write OUT/device.txt (the GPU, its memory and driver, the cores)
# and install the bundle into OUT/install.log (install_bundle).
#
# install_bundle BUNDLE LOG installs
# an offline bundle (recipes/offline_bundle.sh; "-": the plugin is installed already) into the python3 that holds
# torch, then puts that python3's bin folder first on PATH, with a `python` beside it where there is none (the
# recipes call python and the console scripts by name).
install_bundle() {
    local bundle=$1 log=$2 began=$SECONDS
    if [ "$bundle" != - ]; then
        python3 "$bundle/install.py" 2>&1 | tee "$log" || return 1
        echo "[install] the install took $((SECONDS - began)) s" | tee -a "$log"
    fi
    local bin
    bin=$(python3 -c 'import os, sys; print(os.path.dirname(sys.executable))')
    export PATH="$bin:$PATH"
    if ! command -v python > /dev/null; then
        mkdir -p /tmp/maskplug_python_bin
        printf '#!/bin/sh\nexec %s "$@"\n' "$bin/python3" > /tmp/maskplug_python_bin/python
        chmod +x /tmp/maskplug_python_bin/python
        export PATH="/tmp/maskplug_python_bin:$PATH"
    fi
}

# set_budget NAME TOTAL MARGIN LEAST WHAT: `budget`, the seconds the command's work gets: TOTAL less the time since
# `started` and MARGIN (for writing up); fewer than LEAST is refused (exit status 1) with one line saying what is
# too little to do.
set_budget() {
    local name=$1 total=$2 margin=$3 least=$4 what=$5
    budget=$(( total - (SECONDS - started) - margin ))
    if [ "$budget" -lt "$least" ]; then
        echo "$name: $budget s left of $total after the install: too little to $what" >&2
        return 1
    fi
}

start_device_command() {
    local name=$1
    [ "$bundle" = - ] || [ -f "$bundle/install.py" ] || { echo "$name: BUNDLE $bundle has no install.py" >&2; return 2; }
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    [ "$bundle" = - ] || bundle=$(cd "$bundle" && pwd)
    cd "$(dirname "${BASH_SOURCE[0]}")/.." || return 1
    started=$SECONDS
    export PYTHONUNBUFFERED=1
    { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1; nproc; } > "$out/device.txt"
    install_bundle "$bundle" "$out/install.log"
}
