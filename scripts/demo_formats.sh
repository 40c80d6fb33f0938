#!/usr/bin/env bash
# The demo's other formats: `bash scripts/demo_formats.sh hudi,delta,paimon` (iceberg in the list is the main
# demo's and is passed over). Called by scripts/demo.sh after the Iceberg demo, with DEMO, WAREHOUSE,
# AIRFLOW_HOME and PATH (the venv) exported. Per format: a table written by Spark that needs maintenance,
# declared in $AIRFLOW_HOME/dags/tables.d/formats.yaml and applied, each action run as its DAG
# (`airflow dags test tms__<table>__<action>`), then the before / after report, read back from the table.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
: "${DEMO:?DEMO (the demo directory) must be set}" "${WAREHOUSE:?WAREHOUSE must be set}" "${AIRFLOW_HOME:?AIRFLOW_HOME must be set}"
export DEMO WAREHOUSE AIRFLOW_HOME
PY="python $ROOT/scripts/demo_formats.py"

FORMATS=()
for f in ${1//,/ }; do
  case "$f" in
    iceberg) ;;
    hudi | delta | paimon) FORMATS+=("$f") ;;
    *) echo "demo_formats.sh: '$f' is not one of: iceberg, hudi, delta, paimon" >&2; exit 2 ;;
  esac
done
[ ${#FORMATS[@]} -gt 0 ] || exit 0
if [[ " ${FORMATS[*]} " == *" paimon "* ]] && ! python -c "import tablemgmt_paimon" 2>/dev/null; then
  echo "paimon: the format plugin is not installed; install it with: pip install -e $ROOT/plugins/paimon" >&2
  exit 2
fi

step() { printf '\n==> %s\n' "$*"; }

for f in "${FORMATS[@]}"; do
  step "$f: write $($PY table-id "$f") with Spark (a session of $f alone)"
  $PY write "$f" 2>"$DEMO/formats-write-$f.log" || { tail -30 "$DEMO/formats-write-$f.log"; exit 1; }
done

DECL="$AIRFLOW_HOME/dags/tables.d/formats.yaml"
step "Declare them in $DECL (the DAG file reads tables.d/*.yaml beside tables.yaml) and apply it"
$PY declare "${FORMATS[@]}" --out "$DECL"
# --no-prune: this file declares only these tables; the Iceberg demo's stay as tables.yaml declares them
tablemgmt apply --no-prune "$DECL"
tablemgmt tables

status=0
for f in "${FORMATS[@]}"; do
  table="$($PY table-id "$f")"
  run=0
  for action in $($PY actions "$f"); do
    run=$((run + 1)); log="$DEMO/formats-dags-test-$f-$run-$action.log"
    if [ "${action#+}" != "$action" ]; then  # a step of the demo's writer between two actions, not an action
      step "$f: ${action#+} (a writer's commit)"
      $PY "${action#+}" "$f" 2>"$log" || { tail -30 "$log"; exit 1; }
      continue
    fi
    step "airflow dags test tms__${table}__$action"
    airflow dags test "tms__${table}__$action" >"$log" 2>&1 || { grep -E "tablemgmt|ERROR|Error" "$log" | tail -30; exit 1; }
    grep -E "tablemgmt:" "$log" | sed 's/^.*tablemgmt:/  tablemgmt:/' | head -8 || true
  done
  step "$f: before / after ($table)"
  $PY read "$f" 2>"$DEMO/formats-read-$f.log" || { tail -30 "$DEMO/formats-read-$f.log"; exit 1; }
  $PY report "$f" || status=1
done
exit $status
