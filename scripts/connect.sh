#!/usr/bin/env bash
# `make connect`: a local Spark Connect server for the Connect engine (docs/spark-connect.md), in the
# foreground (Ctrl-C stops it). Its jars come from the resolver (Iceberg's runtime from the [embedded]
# wheel or the jar cache, spark-connect_2.12 from the jar cache, fetched from Maven Central once and
# checksum-verified); never --packages.
#
#   CONNECT_PORT=15002 CONNECT_MASTER='local[*]' scripts/connect.sh [--need aws] [--conf k=v] ...
#
# Then point tablemgmt at it:
#   export AIRFLOW_CONN_SPARK_CONNECT_DEFAULT='{"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": 15002}'
#   export AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID=spark_connect_default
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
exec "$PY" -m airflow_tablemgmt.spark.connect.server \
  --port "${CONNECT_PORT:-15002}" --host "${CONNECT_HOST:-127.0.0.1}" --master "${CONNECT_MASTER:-local[*]}" "$@"
