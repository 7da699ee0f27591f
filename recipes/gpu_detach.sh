#!/usr/bin/env bash
# A lent GPU machine's work that outlasts one device command (10 minutes at most): start it detached (setsid: it
# runs on after the command that started it returns, while the machine is held), collect it from the next command.
#
#   bash recipes/gpu_detach.sh start DIR -- COMMAND [ARGS...]   # DIR: a new folder; the command's output goes to
#                                                               # DIR/log, its exit status to DIR/status at its end
#   bash recipes/gpu_detach.sh collect DIR OUT SECONDS          # wait up to SECONDS for DIR/status, then copy DIR's
#                                                               # files (log, status, what the command wrote) to OUT
#
# collect exits with the command's status, or 124 when SECONDS passed first (OUT then holds the log so far).
set -uo pipefail
usage() { echo "usage: bash recipes/gpu_detach.sh start DIR -- COMMAND... | collect DIR OUT SECONDS" >&2; exit 2; }
[ $# -ge 2 ] || usage
verb=$1 dir=$2
shift 2
case "$verb" in
    start)
        [ "${1:-}" = -- ] && shift
        [ $# -gt 0 ] || usage
        if [ -e "$dir" ]; then echo "gpu_detach.sh: $dir exists: give a new folder" >&2; exit 2; fi
        mkdir -p "$dir"
        setsid bash -c '"$@" > "$0/log" 2>&1; echo $? > "$0/status.tmp" && mv "$0/status.tmp" "$0/status"' \
            "$dir" "$@" < /dev/null > /dev/null 2>&1 &
        echo "[gpu_detach] started in $dir (pid $!): $*"
        ;;
    collect)
        [ $# -eq 2 ] || usage
        out=$1 seconds=$2
        [ -d "$dir" ] || { echo "gpu_detach.sh: $dir: nothing was started there" >&2; exit 2; }
        waited=0
        while [ ! -f "$dir/status" ] && [ "$waited" -lt "$seconds" ]; do sleep 2; waited=$((waited + 2)); done
        mkdir -p "$out"
        find "$dir" -maxdepth 1 -type f -exec cp {} "$out/" \;
        if [ ! -f "$dir/status" ]; then
            echo "[gpu_detach] $dir: still running after $seconds s; its log so far is in $out" >&2
            exit 124
        fi
        echo "[gpu_detach] $dir: finished (exit $(cat "$dir/status")) after waiting $waited s"
        exit "$(cat "$dir/status")"
        ;;
    *) usage ;;
esac
