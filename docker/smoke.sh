#!/usr/bin/env bash
# Smoke test of the compose deployment: start it, wait for health, get a token, make a small Iceberg
# table on the shared warehouse, register it through the REST API, run rewrite-files now, and read the
# process back until it ends. Exit 0 only when the process succeeded on the Spark cluster.
#
#   cp docker/.env.example docker/.env   # and fill it in
#   docker/smoke.sh                      # SMOKE_KEEP=1 leaves the deployment running
set -euo pipefail
cd "$(dirname "$0")"
[ -f .env ] || { echo "error: docker/.env is missing: cp docker/.env.example docker/.env and fill it in" >&2; exit 2; }
set -a; . ./.env; set +a
PORT="${AIRFLOW_API_PORT:-8080}"
API="http://localhost:${PORT}"
TABLE="lake.smoke.events"
compose() { docker compose -f docker-compose.yaml "$@"; }

compose up -d --build
if [ -z "${SMOKE_KEEP:-}" ]; then trap 'compose down' EXIT; fi

echo "waiting for the api-server at ${API} ..."
for _ in $(seq 1 90); do
  curl -fsS "${API}/api/v2/monitor/health" >/dev/null 2>&1 && break
  sleep 5
done
curl -fsS "${API}/api/v2/monitor/health" >/dev/null

# The simple auth manager writes the generated admin password into the api-server's AIRFLOW_HOME.
PASSWORD=$(compose exec -T api-server cat /opt/airflow/simple_auth_manager_passwords.json.generated \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["admin"])')
TOKEN=$(curl -fsS -X POST "${API}/auth/token" -H 'Content-Type: application/json' \
  -d "{\"username\": \"admin\", \"password\": \"${PASSWORD}\"}" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
auth=(-H "Authorization: Bearer ${TOKEN}" -H 'Content-Type: application/json')

echo "making ${TABLE} (24 small files) on the shared warehouse ..."
compose exec -T airflow-worker-1 python /opt/tablemgmt/scripts/demo_table.py \
  --warehouse /data/warehouse --table "${TABLE}" --files 24 --rows 24000 >/dev/null

# Catalog `lake` (/data/warehouse) is declared in dags/tables.yaml; it reaches the store at the first parse.
echo "registering ${TABLE} ..."
for _ in $(seq 1 60); do
  code=$(curl -s -o /tmp/tms-smoke.json -w '%{http_code}' -X POST "${API}/tablemgmt/v1/tables" "${auth[@]}" \
    -d '{"catalog": "lake", "namespace": "smoke", "name": "events", "queue": "maintenance",
         "actions": {"rewrite-files": {"trigger": "schedule", "interval": "1d", "min-input-files": 2}}}')
  [ "$code" = 200 ] || [ "$code" = 201 ] && break
  sleep 5
done
[ "$code" = 200 ] || [ "$code" = 201 ] || { cat /tmp/tms-smoke.json >&2; exit 1; }

# Run now answers 404 until the dag-processor has parsed the new table's DAG.
echo "running rewrite-files now ..."
for _ in $(seq 1 60); do
  code=$(curl -s -o /tmp/tms-smoke.json -w '%{http_code}' -X POST \
    "${API}/tablemgmt/v1/tables/${TABLE}/actions/rewrite-files/runs" "${auth[@]}" -d '{}')
  [ "$code" = 201 ] && break
  sleep 5
done
[ "$code" = 201 ] || { cat /tmp/tms-smoke.json >&2; exit 1; }
PROCESS=$(python3 -c 'import json; print(json.load(open("/tmp/tms-smoke.json"))["process_id"])')

for _ in $(seq 1 120); do
  STATUS=$(curl -fsS "${API}/tablemgmt/v1/processes/${PROCESS}" "${auth[@]}" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')
  case "$STATUS" in SUCCESS|FAILED|KILLED|CANCELED) break ;; esac
  sleep 5
done
curl -fsS "${API}/tablemgmt/v1/processes/${PROCESS}" "${auth[@]}" | python3 -m json.tool
echo "Spark master: $(curl -fsS http://localhost:8081/json/ | python3 -c \
  'import json,sys; s=json.load(sys.stdin); print(len(s["completedapps"]), "completed application(s)")')"
[ "$STATUS" = SUCCESS ] || { echo "error: process ${PROCESS} ended ${STATUS}" >&2; exit 1; }
echo "smoke test passed: process ${PROCESS} SUCCESS"
