#!/usr/bin/env bash
# Installs the real clients of scripts/interop/clients/, each pinned, in its own
# virtual environment under .cache/clients/<name>-venv (git-ignored).
# Idempotent: a venv whose recorded pins match is left alone.
#   scripts/interop/clients/install.sh [openai|instructor|guidellm|aiperf]...   (default: all)
# GuideLLM depends on torch: its venv is ~6 GB (PyPI's Linux torch wheel
# brings CUDA libraries it never uses here).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
DIR="$ROOT/.cache/clients"

# The pins. openai matches scripts/setup.sh; instructor 1.17.0 needs
# jiter<0.15, which caps the openai it can use at 3.3.0.
pins() {
    case "$1" in
    openai) echo "openai==3.54.0" ;;
    instructor) echo "instructor==1.17.0 openai==3.3.0" ;;
    guidellm) echo "guidellm==0.8.1" ;;
    aiperf) echo "aiperf==0.13.0" ;;
    *) echo "unknown client '$1' (openai, instructor, guidellm, aiperf)" >&2; return 1 ;;
    esac
}

log() { printf '[clients] %s\n' "$*" >&2; }

install_one() {
    local name="$1" want venv
    want="$(pins "$name")"
    venv="$DIR/$name-venv"
    if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.afm-pins" 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    log "installing $want into $venv"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    # shellcheck disable=SC2086 # the pins are separate words
    "$venv/bin/python" -m pip install -q --disable-pip-version-check $want >&2
    printf '%s\n' "$want" >"$venv/.afm-pins"
}

# /usr/bin/time (Debian package `time`) measures each client's CPU time.
if [ ! -x /usr/bin/time ] && [ "$(uname -s)" = Linux ]; then
    log "apt: installing time"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq time >/dev/null
fi

mkdir -p "$DIR"
if [ $# -eq 0 ]; then set -- openai instructor guidellm aiperf; fi
for c in "$@"; do
    case "$c" in afm-bench) continue ;; esac
    install_one "$c"
done
