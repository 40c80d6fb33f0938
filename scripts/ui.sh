#!/usr/bin/env bash
# `make ui`: Airflow's api-server, scheduler, dag-processor and triggerer on the demo's home
# (.demo/airflow), example DAGs off, the simple auth manager with one admin whose password is kept in
# <home>/ui-passwords.json. Prints the URL and the login; Ctrl-C stops every component.
#   UI_PORT=8080     the api-server's port
#   UI_SMOKE=1       exit (stopping everything) once the api-server answers /api/v2/version
#   UI_WAIT=300      seconds to wait for the api-server before giving up
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
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=admin:admin
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS=False
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="$AIRFLOW_HOME/ui-passwords.json"
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://127.0.0.1:$PORT/execution/"
export AIRFLOW__API__BASE_URL="http://127.0.0.1:$PORT"
export AIRFLOW__API__PORT="$PORT"
LOCAL_SPARK='{"conn_type": "spark", "host": "local[*]"}'
export AIRFLOW_CONN_SPARK_DEFAULT="${AIRFLOW_CONN_SPARK_DEFAULT:-$LOCAL_SPARK}"
export TABLEMGMT_STORE_URL="${TABLEMGMT_STORE_URL:-sqlite:///$AIRFLOW_HOME/tablemgmt.db}"
# Every component must sign and check tokens with the same secret; one is kept per demo home.
SECRET_FILE="$AIRFLOW_HOME/ui-jwt-secret"
[ -s "$SECRET_FILE" ] || { python -c 'import secrets; print(secrets.token_hex(32))' >"$SECRET_FILE"; chmod 600 "$SECRET_FILE"; }
export AIRFLOW__API_AUTH__JWT_SECRET="$(cat "$SECRET_FILE")"
PASSWORD="$(python "$ROOT/scripts/demo_report.py" --ui-password)"

echo "==> Airflow metadata DB on $AIRFLOW_HOME"
airflow db migrate >"$LOGS/db-migrate.log" 2>&1 || { tail -20 "$LOGS/db-migrate.log"; exit 1; }
# A new shell reads airflow.cfg, not this script's environment: keep the example DAGs off there too.
sed -i 's/^load_examples = True$/load_examples = False/' "$AIRFLOW_HOME/airflow.cfg"

PIDS=()
stop() {
  trap - INT TERM EXIT
  # Each component leads its own process group (setsid): TERM the group, so its workers stop too.
  for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "stopped api-server, scheduler, dag-processor and triggerer"
}
trap stop EXIT
trap 'stop; exit 130' INT TERM

start() {
  setsid airflow "$@" >"$LOGS/$1.log" 2>&1 &
  PIDS+=("$!")
  echo "started $1 (pid $!, log $LOGS/$1.log)"
}
start api-server --port "$PORT" --host 127.0.0.1
start scheduler
start dag-processor
start triggerer

deadline=$((SECONDS + WAIT))
until version="$(curl -sf "http://127.0.0.1:$PORT/api/v2/version")"; do
  if ! kill -0 "${PIDS[0]}" 2>/dev/null; then echo "the api-server exited:"; tail -30 "$LOGS/api-server.log"; exit 1; fi
  if [ "$SECONDS" -ge "$deadline" ]; then echo "the api-server did not answer within ${WAIT}s"; exit 1; fi
  sleep 1
done
echo "api-server answers: $version"
cat <<EOF

  Airflow UI:          http://127.0.0.1:$PORT/
  Table maintenance:   http://127.0.0.1:$PORT/plugin/tablemgmt
  login: admin / $PASSWORD
  REST API:            http://127.0.0.1:$PORT/tablemgmt/v1/docs

  In another shell: export AIRFLOW_HOME=$AIRFLOW_HOME TABLEMGMT_STORE_URL=$TABLEMGMT_STORE_URL
  Ctrl-C stops everything.
EOF
if [ -n "${UI_SMOKE:-}" ]; then exit 0; fi
wait -n "${PIDS[@]}" || true
echo "a component exited; see $LOGS"
