#!/usr/bin/env bash
# Source this file: creates .venv at the repository root if missing, installs torch
# 2.13.0 first (so nothing pulls CUDA packages), then this package with its
# dependencies (fairseq-fixed on Python >= 3.11), and activates the environment.
# Set MASKPLUG_EXTRAS=test to also install the test dependencies.
set -euo pipefail
MASKPLUG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export MASKPLUG_ROOT
PYTHON="${PYTHON:-python3}"
if [ ! -x "$MASKPLUG_ROOT/.venv/bin/python" ]; then
    echo "[setup] creating $MASKPLUG_ROOT/.venv"
    "$PYTHON" -m venv "$MASKPLUG_ROOT/.venv"
fi
# shellcheck disable=SC1091
source "$MASKPLUG_ROOT/.venv/bin/activate"
stamp="$MASKPLUG_ROOT/.venv/.maskplug-installed-${MASKPLUG_EXTRAS:-base}"
if [ ! -f "$stamp" ] || [ "$MASKPLUG_ROOT/setup.py" -nt "$stamp" ]; then
    echo "[setup] installing torch 2.13.0 and fairseq-maskplug (building fairseq-fixed takes a few minutes the first time)"
    python -m pip install -q --upgrade pip wheel setuptools
    python -m pip install -q "torch==2.13.0"
    spec="$MASKPLUG_ROOT"
    [ -n "${MASKPLUG_EXTRAS:-}" ] && spec="$MASKPLUG_ROOT[$MASKPLUG_EXTRAS]"
    python -m pip install -q -e "$spec"
    touch "$stamp"
fi
# fairseq emits hundreds of FutureWarnings (torch.cuda.amp, torch.jit) per run; hide only those.
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore::FutureWarning}"
