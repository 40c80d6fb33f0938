#!/usr/bin/env bash
# The embedded default end to end: SQLite store, local Spark, a local Iceberg warehouse.
# DEMO_CATALOG=rest: the same demo with the table in Iceberg's reference REST catalog on S3 (SeaweedFS), both
# servers started here (scripts/demo_rest.py, the ones the tests start) and stopped when the demo exits.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
DEMO="${DEMO_DIR:-$ROOT/.demo}"
# rewrite-deletes runs before rewrite-files, which applies (and so removes) the delete files.
# expire-data runs twice: its first run on a table is a dry run (the first-run policy), the second deletes;
# compute-stats after it, so the statistics are the current snapshot's and the health gate finds nothing to do
# for it until the table changes (docs/health.md).
ACTIONS="${DEMO_ACTIONS:-rewrite-deletes rewrite-files rewrite-manifests expire-data expire-data compute-stats expire-snapshots delete-orphans}"
export PATH="$VENV/bin:$PATH"
export AIRFLOW_HOME="$DEMO/airflow"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_FOLDER="$AIRFLOW_HOME/dags"
export AIRFLOW__LOGGING__LOGGING_LEVEL=INFO
export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[*]"}'
WAREHOUSE="$DEMO/warehouse"
CATALOG="${DEMO_CATALOG:-local}"
case "$CATALOG" in
  local) TABLES_YAML="${DEMO_TABLES_YAML:-$ROOT/dags/tables.demo.yaml}" ;;
  rest) TABLES_YAML="${DEMO_TABLES_YAML:-$ROOT/dags/tables.demo.rest.yaml}" ;;
  *) echo "DEMO_CATALOG: '$CATALOG' is not one of: local (the default: a hadoop catalog on a local directory), rest (a REST catalog on S3, started by the demo)" >&2; exit 2 ;;
esac
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

if [ "$CATALOG" = rest ]; then
  # SeaweedFS's S3 gateway and Iceberg's REST catalog server start while Airflow's DB is migrated below;
  # the exit trap stops them (and their process groups, should the serving process be gone).
  SERVE_PID=""
  stop_servers() {
    if kill -TERM "$SERVE_PID" 2>/dev/null; then
      wait "$SERVE_PID" 2>/dev/null || true
    else
      for g in ${DEMO_SERVER_PGIDS:-}; do kill -TERM -- "-$g" 2>/dev/null || true; done
    fi
  }
  trap stop_servers EXIT
  python "$ROOT/scripts/demo_rest.py" serve --dir "$DEMO/servers" --env-file "$DEMO/servers.env" >"$DEMO/servers.log" 2>&1 &
  SERVE_PID=$!
fi

step "Airflow metadata DB and the tablemgmt store (SQLite under $AIRFLOW_HOME)"
airflow db migrate >"$DEMO/db-migrate.log" 2>&1 || { tail -20 "$DEMO/db-migrate.log"; exit 1; }
# A new shell reads airflow.cfg, not this script's environment: keep the example DAGs off there too.
sed -i 's/^load_examples = True$/load_examples = False/' "$AIRFLOW_HOME/airflow.cfg"
tablemgmt db upgrade

if [ "$CATALOG" = local ]; then
step "A local Iceberg warehouse with a table of many small files and 3 DELETE commits (position deletes)"
python "$ROOT/scripts/demo_table.py" --warehouse "$WAREHOUSE" --table demo.db.events --files 520 --delete-every 50 --delete-commits 3 2>"$DEMO/demo-table.log" || { tail -20 "$DEMO/demo-table.log"; exit 1; }

step "Plant orphan files: 3 written 5 days ago (to delete), 2 fresh ones (to keep)"
DATA_DIR="$WAREHOUSE/db/events/data"
for i in 1 2 3; do echo orphan >"$DATA_DIR/orphan-old-$i.parquet"; touch -d "5 days ago" "$DATA_DIR/orphan-old-$i.parquet"; done
for i in 1 2; do echo orphan >"$DATA_DIR/orphan-young-$i.parquet"; done
ls "$DATA_DIR"/orphan-* | sed 's#^#  #'
else
  step "Iceberg's REST catalog server on SeaweedFS's S3 gateway (local ports, stopped when the demo exits)"
  for _ in $(seq 300); do
    [ -f "$DEMO/servers.env" ] && break
    kill -0 "$SERVE_PID" 2>/dev/null || { tail -30 "$DEMO/servers.log"; exit 1; }
    sleep 1
  done
  [ -f "$DEMO/servers.env" ] || { echo "the REST catalog and S3 servers did not start in 300 s" >&2; tail -30 "$DEMO/servers.log"; exit 1; }
  # shellcheck disable=SC1091
  set -a; . "$DEMO/servers.env"; set +a
  echo "  S3 (SeaweedFS): $DEMO_S3_ENDPOINT, bucket $DEMO_S3_BUCKET; REST catalog: $DEMO_REST_URI, warehouse $DEMO_REST_WAREHOUSE (up in ${DEMO_SERVERS_UP_S}s; logs under $DEMO/servers)"
  REST_YAML="$DEMO/tables.yaml"
  sed -e "s#__REST_URI__#$DEMO_REST_URI#" -e "s#__S3_ENDPOINT__#$DEMO_S3_ENDPOINT#" -e "s#__WAREHOUSE__#$WAREHOUSE#" "$TABLES_YAML" >"$REST_YAML"
  rest() { python "$ROOT/scripts/demo_rest.py" "$@"; }

  step "The table written by Spark through the REST catalog to S3: many small files and 3 DELETE commits (position deletes)"
  rest table --tables-yaml "$REST_YAML" --files 520 --delete-every 50 --delete-commits 3 2>"$DEMO/demo-table.log" || { tail -20 "$DEMO/demo-table.log"; exit 1; }

  step "Plant 3 orphan files on S3 now (to delete); 2 young ones follow just before delete-orphans runs (to keep)"
  echo "  S3 stamps an object when it is written: no back-dating as on a local disk. delete-orphans is declared with"
  echo "  older-than: 3m here, and waits (if it must) until these 3 are older than that; the 2 young ones are younger."
  rest orphans --tables-yaml "$REST_YAML" plant old 3
fi

step "Declare it in dags/tables.yaml and register it"
cp "$ROOT/dags/tablemgmt_dags.py" "$AIRFLOW__CORE__DAGS_FOLDER/"
if [ "$CATALOG" = local ]; then
sed "s#__WAREHOUSE__#$WAREHOUSE#" "$TABLES_YAML" >"$AIRFLOW__CORE__DAGS_FOLDER/tables.yaml"
else
  cp "$REST_YAML" "$AIRFLOW__CORE__DAGS_FOLDER/tables.yaml"
fi
tablemgmt apply "$AIRFLOW__CORE__DAGS_FOLDER/tables.yaml"
tablemgmt tables

if [ "$DYNAMIC" = 1 ]; then
  step "Dynamic table $DT (a daily aggregate of demo.db.events, partitioned by day): its first run creates it (trigger CREATION)"
  dt_run 1-creation "$(midnight '3 days ago')" '{}'
  python "$ROOT/scripts/demo_dynamic.py" expect "$DT" FULL --at "$(midnight '3 days ago')"
fi

run=0
for action in $ACTIONS; do
  run=$((run + 1)); log="$DEMO/dags-test-$run-$action.log"
  if [ "$CATALOG" = rest ] && [ "$action" = delete-orphans ]; then
    step "Before delete-orphans: the 3 old orphans older than its older-than, then 2 young ones written now"
    rest orphans --tables-yaml "$REST_YAML" wait-old
    rest orphans --tables-yaml "$REST_YAML" plant young 2
  fi
  step "airflow dags test tms__demo.db.events__$action"
  airflow dags test "tms__demo.db.events__$action" >"$log" 2>&1 || { grep -E "tablemgmt|ERROR|Error" "$log" | tail -30; exit 1; }
  grep -E "tablemgmt:" "$log" | sed 's/^.*tablemgmt:/  tablemgmt:/' | head -8 || true
done

step "Before / after, read back from the store (live records: what a query returns; physical rows: rows in data files)"
python "$ROOT/scripts/demo_report.py" --table demo.db.events --actions $ACTIONS
if [ "$CATALOG" = local ]; then
echo; echo "orphans left on disk:"; ls "$DATA_DIR"/orphan-* 2>/dev/null | sed 's#^#  #' || echo "  none"
else
  echo; rest orphans --tables-yaml "$REST_YAML" list
  echo "  (delete-orphans deleted what S3 stamped before its cutoff, older_than above; the young ones were written after it)"
fi

if [ "$DYNAMIC" = 1 ]; then
  # expire-data above deleted rows of demo.db.events (rewrites alone change no data: NO_DATA). Its DELETE drops
  # whole files of the old days (rewrite-files applied and removed the delete files), so Iceberg's changelog
  # says which rows went; were delete files left, the refresh would be FULL, naming them.
  step "Periodic refresh of $DT at $(midnight '2 days ago'), as the scheduler's run: expire-data deleted the old days of demo.db.events; the rows it removed are read from Iceberg's changelog and their groups subtracted (INCREMENTAL)"
  dt_run 2-periodic "$(midnight '2 days ago')" '{"trigger": "SCHEDULED", "is_periodic": true}'
  python "$ROOT/scripts/demo_dynamic.py" expect "$DT" INCREMENTAL FULL ${DEMO_ACTIONS:+NO_DATA} --at "$(midnight '2 days ago')"

  if [ "$CATALOG" = local ]; then
    step "New rows arrive: 300 events of today appended to demo.db.events (one append commit)"
    python "$ROOT/scripts/demo_table.py" --warehouse "$WAREHOUSE" --table demo.db.events --append 300 2>"$DEMO/demo-append.log" || { tail -20 "$DEMO/demo-append.log"; exit 1; }
    step "Periodic refresh at $(midnight yesterday): the source only appended, so only the new rows are read and the groups they touch merged in (INCREMENTAL)"
    dt_run 3-incremental "$(midnight yesterday)" '{"trigger": "SCHEDULED", "is_periodic": true}'
    python "$ROOT/scripts/demo_dynamic.py" expect "$DT" INCREMENTAL --at "$(midnight yesterday)"
    NOON="$(date -u -d yesterday +%Y-%m-%dT12:00:00+00:00)"
    step "A DELETE on demo.db.events written merge-on-read (the table's write.delete.mode): a position delete file per partition"
    python "$ROOT/scripts/demo_table.py" --warehouse "$WAREHOUSE" --table demo.db.events --delete-existing 7 2>"$DEMO/demo-delete.log" || { tail -20 "$DEMO/demo-delete.log"; exit 1; }
    step "Periodic refresh at $NOON: Iceberg's changelog does not read delete files, so which rows went is not known and the whole table is recomputed (FULL, and why)"
    dt_run 3-merge-on-read "$NOON" '{"trigger": "SCHEDULED", "is_periodic": true}'
    python "$ROOT/scripts/demo_dynamic.py" expect "$DT" FULL --at "$NOON"
  fi

  step "A refresh of one day through FLIP-435's REST endpoint, on a real airflow api-server and scheduler (started, then stopped)"
  python "$ROOT/scripts/demo_dynamic.py" rest "$DT" --partition "day=$(date -u +%F)"

  # Unpausing the DAG above may also have let the scheduler run today's tick; then this reuses it.
  step "Periodic refresh at $(midnight today): no source table changed since the last refresh read it: NO_DATA, no Spark job"
  dt_run 4-no-data "$(midnight today)" '{"trigger": "SCHEDULED", "is_periodic": true}'
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
if [ "$CATALOG" = rest ]; then
  echo
  echo "The REST catalog and S3 servers stop as the demo exits: the store's tables, processes and history stay"
  echo "readable; what reads the table itself (health, the UI's table page, a new action run) needs a catalog"
  echo "that is up: point the 'demo' catalog at your own (tablemgmt catalog set) or run the demo again."
fi
