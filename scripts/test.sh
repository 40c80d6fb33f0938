#!/usr/bin/env bash
# Lint (including core/'s banned framework imports), then unit, integration and e2e tests.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BIN="${VENV:-$ROOT/.venv}/bin"
export PATH="$BIN:$PATH"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
"$BIN/ruff" check airflow_tablemgmt tests dags scripts
"$BIN/pytest" -q -p no:cacheprovider "$@" tests
