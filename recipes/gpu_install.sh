# Sourced by the lent GPU machine's commands (gpu_science.sh, gpu_speed.sh): install_bundle BUNDLE LOG installs
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
