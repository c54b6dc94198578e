#!/usr/bin/env bash
# Run every test: installs what it needs (venv, MPI, torch CPU, Chromium), then pytest.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/bootstrap.sh --browser
exec .venv/bin/python -m pytest "$@"
