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
# The dynamic table declared in tables.demo.yaml (DEMO_DYNAMIC=0 skips its steps).
DYNAMIC="${DEMO_DYNAMIC:-1}"
DT=demo.db.daily_events
DT_DAG="tms__${DT}__refresh"

# DEMO_FORMATS (comma-separated): iceberg is the main demo below and always runs; each other format named
# gets one table of its own, maintained by its actions and reported before/after (scripts/demo_formats.sh).
DEMO_FORMATS="${DEMO_FORMATS:-iceberg}"
for f in ${DEMO_FORMATS//,/ }; do
  case "$f" in iceberg | hudi | delta | paimon) ;; *) echo "DEMO_FORMATS: '$f' is not one of: iceberg, hudi, delta, paimon" >&2; exit 2 ;; esac
done

step() { printf '\n==> %s\n' "$*"; }
midnight() { date -u -d "$1" +%Y-%m-%dT00:00:00+00:00; }
# One run of the dynamic table's refresh DAG at logical date $2 with DAG-run conf $3 (as the scheduler's
# own run would carry: a periodic, SCHEDULED refresh); fails the demo with the log's tail otherwise.
dt_run() {
  local log="$DEMO/dags-test-dt-$1.log"
  airflow dags test "$DT_DAG" "$2" -c "$3" >"$log" 2>&1 || { grep -E "tablemgmt|ERROR|Error" "$log" | tail -30; exit 1; }
  grep -E "tablemgmt:" "$log" | sed 's/^.*tablemgmt:/  tablemgmt:/' | head -6 || true
}
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

if [ "$DYNAMIC" = 1 ]; then
  step "Dynamic table $DT (a daily aggregate of demo.db.events, partitioned by day): its first run creates it (trigger CREATION)"
  dt_run 1-creation "$(midnight '2 days ago')" '{}'
  python "$ROOT/scripts/demo_dynamic.py" expect "$DT" FULL --at "$(midnight '2 days ago')"
fi

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

if [ "$DYNAMIC" = 1 ]; then
  # expire-data above deleted rows of demo.db.events (rewrites alone change no data: NO_DATA).
  step "Periodic refresh of $DT at $(midnight yesterday), as the scheduler's run: demo.db.events changed, so the whole table is rewritten"
  dt_run 2-periodic "$(midnight yesterday)" '{"trigger": "SCHEDULED", "is_periodic": true}'
  python "$ROOT/scripts/demo_dynamic.py" expect "$DT" FULL ${DEMO_ACTIONS:+NO_DATA} --at "$(midnight yesterday)"

  step "A refresh of one day through FLIP-435's REST endpoint, on a real airflow api-server and scheduler (started, then stopped)"
  python "$ROOT/scripts/demo_dynamic.py" rest "$DT" --partition "day=$(date -u +%F)"

  # Unpausing the DAG above may also have let the scheduler run today's tick; then this reuses it.
  step "Periodic refresh at $(midnight today): no source table changed since the last refresh read it: NO_DATA, no Spark job"
  dt_run 3-no-data "$(midnight today)" '{"trigger": "SCHEDULED", "is_periodic": true}'
  python "$ROOT/scripts/demo_dynamic.py" expect "$DT" NO_DATA --at "$(midnight today)"

  step "Refresh history of $DT (tablemgmt dt history $DT)"
  tablemgmt dt history "$DT"
fi

if [ "$DEMO_FORMATS" != iceberg ]; then
  step "Other formats ($DEMO_FORMATS): one table of each, maintained and reported before / after"
  DEMO="$DEMO" WAREHOUSE="$WAREHOUSE" bash "$ROOT/scripts/demo_formats.sh" "$DEMO_FORMATS"
fi

step "Next steps"
NEXT=(); [ "$DYNAMIC" = 1 ] && NEXT=(--dynamic "$DT")
python "$ROOT/scripts/demo_report.py" --table demo.db.events --actions $ACTIONS --next-steps "${NEXT[@]}"
