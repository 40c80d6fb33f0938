#!/usr/bin/env bash
# Lint (including core/'s banned framework imports), then unit, integration and e2e tests.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BIN="${VENV:-$ROOT/.venv}/bin"
export PATH="$BIN:$PATH"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
"$BIN/ruff" check airflow_tablemgmt tests dags scripts
# The editable package is not in site-packages: compile it once, so the many Airflow subprocesses
# of the e2e tests do not each recompile it (a no-op when PYTHONDONTWRITEBYTECODE is unset).
"$BIN/python" -m compileall -q airflow_tablemgmt >/dev/null
"$BIN/pytest" -q -p no:cacheprovider --durations=25 "$@" tests
