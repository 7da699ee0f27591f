#!/usr/bin/env bash
# Source this file: creates .venv at the repository root if missing, installs torch
# 2.13.0 first (so nothing pulls CUDA packages), then this package with its
# dependencies (fairseq-fixed on Python >= 3.11), and activates the environment.
# Set MASKPLUG_EXTRAS to install extras too, comma-separated (test, hf, spans, ...: pyproject.toml lists them): run
# `MASKPLUG_EXTRAS=hf bash recipes/setup_env.sh` rather than `pip install -e ".[hf]"`, which brings back the
# torchaudio this script removes (below). MASKPLUG_CURRENT_PYTHON=1 to use an environment where the plugin is
# installed already (below).
set -euo pipefail
MASKPLUG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export MASKPLUG_ROOT
PYTHON="${PYTHON:-python3}"
# MASKPLUG_CURRENT_PYTHON=1: use the python on PATH, where the plugin is installed already (an offline
# machine after recipes/offline_bundle.sh's install.py): no .venv, no pip
if [ -n "${MASKPLUG_CURRENT_PYTHON:-}" ]; then
    if ! "$PYTHON" -c "import fairseq_maskplug.plugin" 2>/dev/null; then
        echo "[setup] MASKPLUG_CURRENT_PYTHON is set but $PYTHON cannot import fairseq_maskplug: install it first" >&2
        return 1 2>/dev/null || exit 1
    fi
    export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore::FutureWarning}"
    return 0 2>/dev/null || exit 0
fi
if [ ! -x "$MASKPLUG_ROOT/.venv/bin/python" ]; then
    echo "[setup] creating $MASKPLUG_ROOT/.venv"
    "$PYTHON" -m venv "$MASKPLUG_ROOT/.venv"
fi
# shellcheck disable=SC1091
source "$MASKPLUG_ROOT/.venv/bin/activate"
# One stamp per extra installed (.maskplug-installed-base for the package alone); MASKPLUG_EXTRAS=hf,spans asks for
# each of them. A stamp older than the package's metadata (pyproject.toml) installs again.
IFS=, read -r -a maskplug_extras <<< "${MASKPLUG_EXTRAS:-}"
maskplug_installed() {
    local extra s
    for extra in base ${maskplug_extras[@]+"${maskplug_extras[@]}"}; do
        s="$MASKPLUG_ROOT/.venv/.maskplug-installed-$extra"
        [ -f "$s" ] && [ ! "$MASKPLUG_ROOT/pyproject.toml" -nt "$s" ] || return 1
    done
    return 0
}
if ! maskplug_installed; then
    # pip's own output goes to a log (it is long, and mostly warnings); its tail is shown if it fails
    setup_log="$MASKPLUG_ROOT/.venv/setup.log"
    echo "[setup] installing torch 2.13.0 and fairseq-maskplug${MASKPLUG_EXTRAS:+[$MASKPLUG_EXTRAS]} (building" \
         "fairseq-fixed takes a few minutes the first time; pip's output: $setup_log)"
    spec="$MASKPLUG_ROOT"
    [ -n "${MASKPLUG_EXTRAS:-}" ] && spec="$MASKPLUG_ROOT[$MASKPLUG_EXTRAS]"
    if ! { python -m pip install -q --upgrade pip wheel setuptools && python -m pip install -q "torch==2.13.0" \
           && python -m pip install -q -e "$spec"; } > "$setup_log" 2>&1; then
        tail -30 "$setup_log" >&2
        echo "[setup] pip install failed; its whole output: $setup_log" >&2
        return 1 2>/dev/null || exit 1
    fi
    # fairseq-fixed pulls the registry's newest torchaudio, built for another torch than 2.13.0: its import
    # fails, and transformers imports torchaudio whenever it is installed, so a user's own Hugging Face script
    # fails in this environment. fairseq needs torchaudio only for its speech tasks: remove a broken one.
    if python -m pip show -q torchaudio > /dev/null 2>&1 && ! python -c "import torchaudio" > /dev/null 2>&1; then
        python -m pip uninstall -y -q torchaudio >> "$setup_log" 2>&1
        echo "[setup] removed torchaudio: built for another torch, it cannot be imported (fairseq's speech tasks" \
             "need it; the plugin's do not)"
    fi
    for extra in base ${maskplug_extras[@]+"${maskplug_extras[@]}"}; do
        touch "$MASKPLUG_ROOT/.venv/.maskplug-installed-$extra"
    done
    echo "[setup] done"
fi
# fairseq emits hundreds of FutureWarnings (torch.cuda.amp, torch.jit) per run; hide only those.
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore::FutureWarning}"
