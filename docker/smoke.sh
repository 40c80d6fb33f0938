#!/usr/bin/env bash
# Smoke test of the compose deployment: start it, wait for health, get a token, make a small Iceberg
# table in the REST catalog on S3 (catalog `lake`, docker/tables.yaml), register it through the REST API,
# run rewrite-files now, and read the process back until it ends. Exit 0 only when the process succeeded.
# With -f docker-compose.connect.yaml in SMOKE_COMPOSE_FILES the job runs on the spark-connect server.
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
read -r -a FILES <<<"${SMOKE_COMPOSE_FILES:--f docker-compose.yaml}"
compose() { docker compose "${FILES[@]}" "$@"; }

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

echo "making ${TABLE} (24 small files) in the REST catalog on S3 ..."
# pyiceberg on the worker, with the catalog's settings as the product renders them (the S3 keys through
# the env: references the worker resolves).
compose exec -T airflow-worker-1 python - <<'PY'
import os, yaml
import pyarrow as pa
from pyiceberg.catalog import load_catalog
from airflow_tablemgmt.core.storage import pyiceberg_properties
from airflow_tablemgmt.core.tables import parse_catalog
from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
[declared] = yaml.safe_load(open("/opt/airflow/dags/tables.yaml"))["catalogs"]
spec = resolve_catalog_spec(parse_catalog(declared))
cat = load_catalog("lake", type="rest", **pyiceberg_properties(spec.warehouse, spec.properties))
try:
    cat.create_namespace("smoke")
except Exception:
    pass
t = cat.create_table(("smoke", "events"), schema=pa.schema([("id", pa.int64()), ("v", pa.string())]))
for i in range(24):
    t.append(pa.table({"id": list(range(i * 1000, i * 1000 + 1000)), "v": [f"v{i}"] * 1000}))
PY

# Catalog `lake` is declared in docker/tables.yaml (mounted as the dags' tables.yaml); it reaches the
# store at the first parse.
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
