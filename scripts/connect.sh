#!/usr/bin/env bash
# `make connect`: a local Spark Connect server for the Connect engine (docs/spark-connect.md), in the
# foreground (Ctrl-C stops it). Its jars come from the resolver (Iceberg's runtime from the [embedded]
# wheel or the jar cache, spark-connect_2.12 from the jar cache, fetched from Maven Central once and
# checksum-verified); never --packages.
#
#   CONNECT_PORT=15002 CONNECT_MASTER='local[*]' scripts/connect.sh [--need aws] [--conf k=v] ...
#
# The server runs whatever SQL its clients send, so it starts in the same sandbox as a dynamic table's
# job (spark/launch/sandbox.py, docs/security.md): its own PID namespace, AIRFLOW_HOME and the DAGs folder
# hidden, the venv and the package read-only. CONNECT_SANDBOX=off starts it without (where the kernel
# refuses unprivileged user namespaces); a production server runs on a host of its own.
#
# Then point tablemgmt at it:
#   export AIRFLOW_CONN_SPARK_CONNECT_DEFAULT='{"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": 15002}'
#   export AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID=spark_connect_default
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
SERVER=("$PY" -m airflow_tablemgmt.spark.connect.server
  --port "${CONNECT_PORT:-15002}" --host "${CONNECT_HOST:-127.0.0.1}" --master "${CONNECT_MASTER:-local[*]}" "$@")
if [ "${CONNECT_SANDBOX:-on}" = off ]; then
  exec "${SERVER[@]}"
fi
HIDE=(--hide "${AIRFLOW_HOME:-$HOME/airflow}")
if [ -n "${AIRFLOW__CORE__DAGS_FOLDER:-}" ]; then HIDE+=(--hide "$AIRFLOW__CORE__DAGS_FOLDER"); fi
if [ -n "${AIRFLOW_CONFIG:-}" ]; then HIDE+=(--hide "$AIRFLOW_CONFIG"); fi
PREFIX="$("$PY" -c 'import sys; print(sys.prefix)')"
exec "$PY" -m airflow_tablemgmt.spark.launch.sandbox --outer "${HIDE[@]}" \
  --read-only "$PREFIX" --read-only "$PWD/airflow_tablemgmt" -- "${SERVER[@]}"
