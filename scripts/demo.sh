#!/usr/bin/env bash
# The embedded default end to end: SQLite store, local Spark, a local Iceberg warehouse.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
DEMO="${DEMO_DIR:-$ROOT/.demo}"
# rewrite-deletes runs before rewrite-files, which applies (and so removes) the delete files.
# expire-data runs twice: its first run on a table is a dry run (the first-run policy), the second deletes.
ACTIONS="${DEMO_ACTIONS:-rewrite-deletes rewrite-files rewrite-manifests compute-stats expire-data expire-data expire-snapshots delete-orphans}"
export PATH="$VENV/bin:$PATH"
export AIRFLOW_HOME="$DEMO/airflow"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_FOLDER="$AIRFLOW_HOME/dags"
export AIRFLOW__LOGGING__LOGGING_LEVEL=INFO
export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[*]"}'
WAREHOUSE="$DEMO/warehouse"
TABLES_YAML="${DEMO_TABLES_YAML:-$ROOT/dags/tables.demo.yaml}"

step() { printf '\n==> %s\n' "$*"; }
rm -rf "$DEMO"; mkdir -p "$AIRFLOW__CORE__DAGS_FOLDER" "$WAREHOUSE"

step "Airflow metadata DB and the tablemgmt store (SQLite under $AIRFLOW_HOME)"
airflow db migrate >"$DEMO/db-migrate.log" 2>&1 || { tail -20 "$DEMO/db-migrate.log"; exit 1; }
# A new shell reads airflow.cfg, not this script's environment: keep the example DAGs off there too.
sed -i 's/^load_examples = True$/load_examples = False/' "$AIRFLOW_HOME/airflow.cfg"
tablemgmt db upgrade

step "A local Iceberg warehouse with a table of many small files and 3 DELETE commits (position deletes)"
python "$ROOT/scripts/demo_table.py" --warehouse "$WAREHOUSE" --table demo.db.events --files 520 --delete-every 50 --delete-commits 3 2>"$DEMO/demo-table.log" || { tail -20 "$DEMO/demo-table.log"; exit 1; }

step "Plant orphan files: 3 written 5 days ago (to delete), 2 fresh ones (to keep)"
DATA_DIR="$WAREHOUSE/db/events/data"
for i in 1 2 3; do echo orphan >"$DATA_DIR/orphan-old-$i.parquet"; touch -d "5 days ago" "$DATA_DIR/orphan-old-$i.parquet"; done
for i in 1 2; do echo orphan >"$DATA_DIR/orphan-young-$i.parquet"; done
ls "$DATA_DIR"/orphan-* | sed 's#^#  #'

step "Declare it in dags/tables.yaml and register it"
cp "$ROOT/dags/tablemgmt_dags.py" "$AIRFLOW__CORE__DAGS_FOLDER/"
sed "s#__WAREHOUSE__#$WAREHOUSE#" "$TABLES_YAML" >"$AIRFLOW__CORE__DAGS_FOLDER/tables.yaml"
tablemgmt apply "$AIRFLOW__CORE__DAGS_FOLDER/tables.yaml"
tablemgmt tables

run=0
for action in $ACTIONS; do
  run=$((run + 1)); log="$DEMO/dags-test-$run-$action.log"
  step "airflow dags test tms__demo.db.events__$action"
  airflow dags test "tms__demo.db.events__$action" >"$log" 2>&1 || { grep -E "tablemgmt|ERROR|Error" "$log" | tail -30; exit 1; }
  grep -E "tablemgmt:" "$log" | sed 's/^.*tablemgmt:/  tablemgmt:/' | head -8 || true
done

step "Before / after, read back from the store (live records: what a query returns; physical rows: rows in data files)"
python "$ROOT/scripts/demo_report.py" --table demo.db.events --actions $ACTIONS
echo; echo "orphans left on disk:"; ls "$DATA_DIR"/orphan-* 2>/dev/null | sed 's#^#  #' || echo "  none"

step "Next steps"
python "$ROOT/scripts/demo_report.py" --table demo.db.events --actions $ACTIONS --next-steps
