#!/usr/bin/env bash
# `make ui`: Airflow's api-server, scheduler, dag-processor and triggerer on the demo's home
# (.demo/airflow), example DAGs off, the simple auth manager with an admin and a viewer whose passwords are
# kept in <home>/ui-passwords.json. Prints the URL and the logins; Ctrl-C stops every component. A
# component that exits is reported (its log's last lines) and restarted, up to UI_RESTARTS times in all.
# The api-server starts first: the others start once it answers, so no task's first try meets a server
# that is not up yet. On the first start of a demo home the demo's maintenance schedules are paused before
# any scheduler runs (docs/ui.md: without that, every action would run its latest missed cron tick at once).
#   UI_PORT=8080     the api-server's port
#   UI_SMOKE=1       exit (stopping everything) once every component has started
#   UI_WAIT=300      seconds to wait for the api-server before giving up
#   UI_RESTARTS=5    restarts of exited components before giving up
#   UI_PARALLELISM=4 task processes of the LocalExecutor (Airflow's default, 32, idles 32 processes)
#   UI_PAUSE=1       0: leave the schedules' pause flags as they are on the first start too
#   UI_STOP_WAIT=30  seconds the components get to stop on Ctrl-C before they are killed
# Airflow's metadata DB is SQLite under the home unless AIRFLOW__DATABASE__SQL_ALCHEMY_CONN names another
# (PostgreSQL: docs/ui.md); on SQLite it runs in WAL mode with a 60 s lock wait, so bursts queue.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
DEMO="${DEMO_DIR:-$ROOT/.demo}"
PORT="${UI_PORT:-8080}"
WAIT="${UI_WAIT:-300}"
export PATH="$VENV/bin:$PATH"
export AIRFLOW_HOME="$DEMO/airflow"
LOGS="$AIRFLOW_HOME/ui-logs"
mkdir -p "$AIRFLOW_HOME/dags" "$LOGS"
if [ ! -f "$AIRFLOW_HOME/tablemgmt.db" ]; then
  echo "note: no demo store at $AIRFLOW_HOME/tablemgmt.db (run \`make demo\` first); starting Airflow anyway"
fi

export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_FOLDER="$AIRFLOW_HOME/dags"
export AIRFLOW__CORE__EXECUTOR=LocalExecutor
export AIRFLOW__CORE__AUTH_MANAGER=airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=admin:admin,viewer:viewer
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS=False
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="$AIRFLOW_HOME/ui-passwords.json"
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://127.0.0.1:$PORT/execution/"
export AIRFLOW__API__BASE_URL="http://127.0.0.1:$PORT"
export AIRFLOW__API__PORT="$PORT"
export AIRFLOW__API__WORKERS="${AIRFLOW__API__WORKERS:-1}"
export AIRFLOW__CORE__PARALLELISM="${UI_PARALLELISM:-4}"
SQLITE_DB=""
if [ -z "${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:-}" ]; then
  SQLITE_DB="$AIRFLOW_HOME/airflow.db"
  export AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS=airflow_tablemgmt.hooks.airflow_settings.SQLITE_METADATA_CONNECT_ARGS
fi
LOCAL_SPARK='{"conn_type": "spark", "host": "local[*]"}'
export AIRFLOW_CONN_SPARK_DEFAULT="${AIRFLOW_CONN_SPARK_DEFAULT:-$LOCAL_SPARK}"
export TABLEMGMT_STORE_URL="${TABLEMGMT_STORE_URL:-sqlite:///$AIRFLOW_HOME/tablemgmt.db}"
# Every component must sign and check tokens with the same secret; one is kept per demo home.
SECRET_FILE="$AIRFLOW_HOME/ui-jwt-secret"
[ -s "$SECRET_FILE" ] || { python -c 'import secrets; print(secrets.token_hex(32))' >"$SECRET_FILE"; chmod 600 "$SECRET_FILE"; }
export AIRFLOW__API_AUTH__JWT_SECRET="$(cat "$SECRET_FILE")"
PASSWORD="$(python "$ROOT/scripts/demo_report.py" --ui-password admin)"
VIEWER_PASSWORD="$(python "$ROOT/scripts/demo_report.py" --ui-password viewer)"

echo "==> Airflow metadata DB on $AIRFLOW_HOME"
airflow db migrate >"$LOGS/db-migrate.log" 2>&1 || { tail -20 "$LOGS/db-migrate.log"; exit 1; }
if [ -n "$SQLITE_DB" ]; then
  # WAL: readers (the UI's requests) no longer block the scheduler's writes, nor wait for them.
  python -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("PRAGMA journal_mode=WAL")' "$SQLITE_DB"
fi
# A new shell reads airflow.cfg, not this script's environment: keep the example DAGs off there too.
sed -i 's/^load_examples = True$/load_examples = False/' "$AIRFLOW_HOME/airflow.cfg"

# Every process of this stack carries the marker (unless given an environment of its own): Ctrl-C finds
# and stops what left its component's process group too (scripts/ui_stack.py).
STACK_ID="$(python -c 'import secrets; print(secrets.token_hex(8))')"
export TABLEMGMT_UI_STACK="$STACK_ID"
# ...and works in a directory of its own: a process that retitles itself (setproctitle) overwrites its
# environment as /proc shows it, not its working directory.
RUN_DIR="$LOGS/run-$STACK_ID"
mkdir -p "$RUN_DIR"
cd "$RUN_DIR"
STOP_WAIT="${UI_STOP_WAIT:-30}"
PIDS=()
declare -A PID_OF ARGS_OF
stack_pids() {
  local roots=() pid
  for pid in "${PIDS[@]}"; do roots+=(--root "$pid"); done
  python "$ROOT/scripts/ui_stack.py" list --marker "$STACK_ID" --cwd "$RUN_DIR" "${roots[@]}" --exclude "$$" 2>/dev/null || true
}
stop() {
  trap - INT TERM EXIT
  local pid pending deadline
  # Each component leads its own process group (setsid): TERM the groups, so their workers stop too, and
  # every other process of the stack (found before the components go and their children are re-parented).
  pending="$(stack_pids)"
  for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for pid in $pending; do kill -TERM "$pid" 2>/dev/null || true; done
  # Bounded: a component that does not stop in time is killed, with whatever of the stack is left.
  deadline=$((SECONDS + STOP_WAIT))
  while [ "$SECONDS" -lt "$deadline" ]; do
    pending="$(stack_pids)"
    [ -n "$pending" ] || break
    sleep 0.5
  done
  if [ -n "$pending" ]; then
    echo "killing what did not stop within ${STOP_WAIT}s: pids" $pending
    for pid in "${PIDS[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
    for pid in $pending; do kill -KILL "$pid" 2>/dev/null || true; done
    for pid in $(stack_pids); do kill -KILL "$pid" 2>/dev/null || true; done
  fi
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  cd "$LOGS" && rmdir "$RUN_DIR" 2>/dev/null || true
  echo "stopped api-server, scheduler, dag-processor and triggerer"
}
trap stop EXIT
trap 'stop; exit 130' INT TERM
# A shell started in the background of another (a CI job's `pytest &`) ignores SIGINT from birth, and a
# signal ignored on entry cannot be trapped: Ctrl-C (SIGINT) then does nothing here, TERM still stops it.
if [ "$(trap -p INT)" = "trap -- '' SIGINT" ]; then
  echo "note: SIGINT is ignored in this shell (started in the background): stop it with kill -TERM $$"
fi

# setpriv --pdeathsig: should this script itself be killed (SIGKILL: no trap runs), each component still
# gets a TERM from the kernel instead of running on, orphaned in its own process group.
DEATHSIG=()
if command -v setpriv >/dev/null && setpriv --pdeathsig TERM true 2>/dev/null; then DEATHSIG=(setpriv --pdeathsig TERM); fi
start() {
  setsid "${DEATHSIG[@]}" airflow "$@" >>"$LOGS/$1.log" 2>&1 &
  PID_OF[$1]=$!
  ARGS_OF[$1]="$*"
  PIDS=("${PID_OF[@]}")
  echo "started $1 (pid $!, log $LOGS/$1.log)"
}

# The api-server first: the scheduler's tasks report to its execution API, so a task started before it
# answers fails its first try with ConnectError (and a task with no retries fails for good).
start api-server --port "$PORT" --host 127.0.0.1
deadline=$((SECONDS + WAIT))
until version="$(curl -sf "http://127.0.0.1:$PORT/api/v2/version")"; do
  if ! kill -0 "${PID_OF[api-server]}" 2>/dev/null; then echo "the api-server exited:"; tail -30 "$LOGS/api-server.log"; exit 1; fi
  if [ "$SECONDS" -ge "$deadline" ]; then echo "the api-server did not answer within ${WAIT}s"; exit 1; fi
  sleep 1
done
echo "api-server answers: $version"

# No catch-up storm: Airflow runs the latest missed cron tick of every active DAG as soon as a scheduler
# sees it (catchup=False still runs the latest one), which on the demo's table is every action at once.
# So the first start of a home parses the DAG files and pauses the maintenance DAGs (tms__…) before any
# scheduler runs; from then on the pause flags are the user's (the page's Pause / Resume schedule).
PAUSED_MARK="$AIRFLOW_HOME/ui-schedules-paused"
if [ "${UI_PAUSE:-1}" != 0 ] && [ ! -e "$PAUSED_MARK" ]; then
  airflow dags reserialize >"$LOGS/dags-reserialize.log" 2>&1 || { echo "could not parse the DAG files:"; tail -20 "$LOGS/dags-reserialize.log"; exit 1; }
  airflow dags pause --treat-dag-id-as-regex -y '^tms__' -o plain >"$LOGS/dags-pause.log" 2>&1 || true
  paused="$(grep -c 'tms__' "$LOGS/dags-pause.log" || true)"
  date -u +%FT%TZ >"$PAUSED_MARK"
  echo "paused the demo's ${paused:-0} maintenance schedules (first start of this home): nothing runs until you ask"
  echo "  (Resume schedule on a table's Maintenance tab; UI_PAUSE=0 leaves the schedules as they are)"
fi

start scheduler
start dag-processor
start triggerer
cat <<EOF

  Airflow UI:          http://127.0.0.1:$PORT/
  Table maintenance:   http://127.0.0.1:$PORT/plugin/tablemgmt
  login: admin / $PASSWORD
         viewer / $VIEWER_PASSWORD   (read-only: what a viewer sees)
  REST API:            http://127.0.0.1:$PORT/tablemgmt/v1/docs

  In another shell: export AIRFLOW_HOME=$AIRFLOW_HOME TABLEMGMT_STORE_URL=$TABLEMGMT_STORE_URL
  Ctrl-C stops everything.
EOF
if [ -n "${UI_SMOKE:-}" ]; then exit 0; fi
# Supervise: a component that exits is reported with the end of its log and started again.
RESTARTS=0
MAX_RESTARTS="${UI_RESTARTS:-5}"
while true; do
  EXITED=""
  code=0
  wait -n -p EXITED "${PIDS[@]}" || code=$?
  [ -n "$EXITED" ] || continue
  for name in api-server scheduler dag-processor triggerer; do
    [ "${PID_OF[$name]}" = "$EXITED" ] && break
  done
  echo "$name (pid $EXITED) exited with status $code; the end of $LOGS/$name.log:"
  tail -15 "$LOGS/$name.log" | sed 's/^/    /'
  # What the dead component left in its group (its workers, a task's processes) goes with it.
  kill -KILL -- "-$EXITED" 2>/dev/null || true
  if [ "$RESTARTS" -ge "$MAX_RESTARTS" ]; then
    echo "$name: not restarted ($RESTARTS restarts already, UI_RESTARTS=$MAX_RESTARTS); stopping"
    exit 1
  fi
  RESTARTS=$((RESTARTS + 1))
  # shellcheck disable=SC2086 # the component's own arguments, word-split as they were given
  start ${ARGS_OF[$name]}
  echo "restarted $name ($RESTARTS of $MAX_RESTARTS restarts)"
done
