#!/usr/bin/env bash
# Source this file: creates .venv at the repository root if missing, installs torch
# 2.13.0 first (so nothing pulls CUDA packages), then this package with its
# dependencies (fairseq-fixed on Python >= 3.11), and activates the environment.
# Set MASKPLUG_EXTRAS to install extras too, comma-separated (test, hf, spans, ...: pyproject.toml lists them): run
# `MASKPLUG_EXTRAS=hf bash recipes/setup_env.sh` rather than `pip install -e ".[hf]"`, which brings back the
# torchaudio this script removes (below). MASKPLUG_CURRENT_PYTHON=1 to use an environment where the plugin is
# installed already (below). It installs only into the .venv it made: an active environment where the plugin is
# installed is used as it is, and a .venv made otherwise is used as it is or refused (below).
set -euo pipefail
MASKPLUG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export MASKPLUG_ROOT
PYTHON="${PYTHON:-python3}"
case "$PYTHON" in */*) PYTHON="$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")" ;; esac  # asked from / below
# Whether $1 (a python, on PATH or an absolute path) has the plugin installed. Asked from /: run from the root, the
# repository's own fairseq_maskplug/ folder would answer for an environment without the plugin.
maskplug_has_plugin() {
    (cd / && "$1" -c "import fairseq_maskplug.plugin") > /dev/null 2>&1
}
# MASKPLUG_CURRENT_PYTHON=1: use the python on PATH, where the plugin is installed already (an offline
# machine after recipes/offline_bundle.sh's install.py): no .venv, no pip
if [ -n "${MASKPLUG_CURRENT_PYTHON:-}" ]; then
    if ! maskplug_has_plugin "$PYTHON"; then
        echo "[setup] MASKPLUG_CURRENT_PYTHON is set but $PYTHON cannot import fairseq_maskplug: install it first" >&2
        return 1 2>/dev/null || exit 1
    fi
    export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore::FutureWarning}"
    return 0 2>/dev/null || exit 0
fi
# The extras of MASKPLUG_EXTRAS whose requirements $1 (a python, asked from / as above) lacks, comma-separated (an
# extra pyproject.toml does not list counts as lacking).
maskplug_missing_extras() {
    (cd / && "$1" - "${MASKPLUG_EXTRAS:-}") <<'PY'
import importlib.metadata as meta, re, sys
wanted = [e for e in sys.argv[1].split(",") if e]
requires = meta.requires("fairseq-maskplug") or []
def lacks(extra):
    names = [re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0] for r in requires if re.search(rf"extra == .{extra}.", r)]
    if not names:
        return True
    for name in names:
        try:
            meta.distribution(name)
        except meta.PackageNotFoundError:
            return True
    return False
print(",".join(e for e in wanted if lacks(e)))
PY
}
# An environment this script did not make is never installed into (issue 106). An active virtualenv or conda
# environment other than .venv where fairseq_maskplug imports is used as it is; a .venv this script did not make
# (no .maskplug-created or .maskplug-installed-* stamp in it) is used as it is if it has the plugin, else refused.
maskplug_use_as_is() {  # $1: its python, $2: what it is, in words
    local missing
    missing="$(maskplug_missing_extras "$1")" || missing="$MASKPLUG_EXTRAS"
    if [ -n "$missing" ]; then
        echo "[setup] $2 has fairseq_maskplug but not the extra(s) $missing, and this script installs nothing into" \
             "an environment it did not make: install them there (pip install -e \"$MASKPLUG_ROOT[$missing]\")" >&2
        return 1
    fi
    echo "[setup] using $2, where fairseq_maskplug is installed: nothing installed"
    export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore::FutureWarning}"
}
maskplug_venv="$MASKPLUG_ROOT/.venv"
maskplug_active="${VIRTUAL_ENV:-${CONDA_PREFIX:-}}"
if [ -n "$maskplug_active" ] \
        && [ "$(cd "$maskplug_active" 2>/dev/null && pwd -P)" != "$(cd "$maskplug_venv" 2>/dev/null && pwd -P)" ] \
        && maskplug_has_plugin "$PYTHON"; then
    maskplug_use_as_is "$PYTHON" "the active environment ($maskplug_active)" || return 1 2>/dev/null || exit 1
    return 0 2>/dev/null || exit 0
fi
if [ -d "$maskplug_venv" ] && [ ! -f "$maskplug_venv/.maskplug-created" ] \
        && ! compgen -G "$maskplug_venv/.maskplug-installed-*" > /dev/null; then
    if [ -x "$maskplug_venv/bin/python" ] && maskplug_has_plugin "$maskplug_venv/bin/python"; then
        # shellcheck disable=SC1091
        source "$maskplug_venv/bin/activate"
        maskplug_use_as_is python "$maskplug_venv (not made by this script)" || return 1 2>/dev/null || exit 1
        return 0 2>/dev/null || exit 0
    fi
    echo "[setup] $maskplug_venv was not made by recipes/setup_env.sh and has no fairseq_maskplug: this script" \
         "installs only into a .venv it made; install the plugin there yourself (then it is used as it is), or move" \
         "it aside" >&2
    return 1 2>/dev/null || exit 1
fi
if [ ! -x "$maskplug_venv/bin/python" ]; then
    echo "[setup] creating $maskplug_venv"
    "$PYTHON" -m venv "$maskplug_venv"
    touch "$maskplug_venv/.maskplug-created"
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
