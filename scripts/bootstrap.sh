#!/usr/bin/env bash
# Create .venv and install ringscope with everything it needs (MPI included). Idempotent and quick
# when nothing changed. Usage: scripts/bootstrap.sh [--browser]   (--browser: Debian chromium too)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$py" -m venv .venv
stamp=".venv/.ringscope-installed"
want="$(cat pyproject.toml setup.py tracer/*.c collectives/core/*.c viewer/io/*.c $(ls tracer/*.h collectives/core/*.h 2>/dev/null) | sha1sum | cut -c1-12)"   # every C source
if ! command -v cc >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  # the tracer's C extension (tracer/_record.c) is required: it needs a C compiler
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_="sudo"
  { $sudo_ apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq gcc libc6-dev; } \
    >/dev/null 2>&1 || echo "ringscope: could not install a C compiler; the tracer's build will fail" >&2
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log=.venv/install.log
  echo "ringscope: installing into .venv (log: $log) ..."
  {
    .venv/bin/python -m pip install --upgrade pip &&
    # torch is pinned in pyproject (the CPU wheel here); installing it first keeps pip from
    # resolving a newer CUDA build for anything that depends on torch.
    .venv/bin/python -m pip install "torch==2.13.0" &&
    .venv/bin/python -m pip install -e ".[all]"
  } > "$log" 2>&1 || { tail -n 40 "$log"; echo "ringscope: install failed (see $log)" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
if [ "${1:-}" = "--browser" ] && ! command -v chromium >/dev/null 2>&1; then
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_="sudo"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq chromium chromium-driver >/dev/null
fi
