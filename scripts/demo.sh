#!/usr/bin/env bash
# The main job: a 4-rank training demo -> per-rank traces -> summary -> dashboard.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/bootstrap.sh
exec .venv/bin/ringscope demo "$@"
