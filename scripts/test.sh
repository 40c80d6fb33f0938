#!/usr/bin/env bash
# Lint (including core/'s banned framework imports), then unit, integration and e2e tests.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BIN="${VENV:-$ROOT/.venv}/bin"
export PATH="$BIN:$PATH"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
# PostgreSQL and Redis (Debian's packages; this machine starts no service of its own)
# are installed and started by scripts/services.sh (idempotent; also `make services`).
bash "$ROOT/scripts/services.sh" || {
  [ "${CI:-}" = true ] && exit 1
  echo "services could not be started: the PostgreSQL and Redis tests will skip" >&2
}
"$BIN/ruff" check airflow_tablemgmt tests dags scripts plugins
"$BIN/python" -m mypy  # [tool.mypy] in pyproject.toml: the package type-checks with 0 errors
# The editable package is not in site-packages: compile it once, so the many Airflow subprocesses
# of the e2e tests do not each recompile it (a no-op when PYTHONDONTWRITEBYTECODE is unset).
"$BIN/python" -m compileall -q airflow_tablemgmt >/dev/null
# Three pytest processes (pytest-xdist): the suite mostly waits on subprocesses (Airflow services, Spark
# JVMs, schedulers; a whole run used ~1.1 of the 2 cores), so three test files run side by side even on
# 2 cores. A file stays in one process
# (--dist loadfile: a module's fixtures, e.g. the distributed cluster, are made once), and files are
# handed out in collection order (--no-loadscope-reorder), so tests/distributed and tests/e2e, the
# longest, start first and the many short unit files fill in at the end. TEST_WORKERS=0: one process.
# Each run's JUnit report (every test's time) is kept outside the clone, for finding the slow ones later.
# Spark's scratch directories (spark-<uuid>: ~100 MB each, the jars copied in) go under one directory per
# run, removed when the run ends: a JVM a test kills cannot remove its own, and they filled the disk once.
find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'tablemgmt-test-spark.*' -mmin +240 -exec rm -rf {} + 2>/dev/null || true
SPARK_LOCAL_DIRS="$(mktemp -d "${TMPDIR:-/tmp}/tablemgmt-test-spark.XXXXXX")"
export SPARK_LOCAL_DIRS
trap 'rm -rf "$SPARK_LOCAL_DIRS"' EXIT
# The suite's JVMs (spark-submit jobs, in-process sessions, Connect servers) compile with C1 only: their jobs
# are seconds long on tiny tables, where C2's compilations cost a quarter of a job's CPU and never pay back
# (measured: a spark-submit compaction test 31 -> 23 CPU-s). What a job does is unchanged; deployments keep
# the JVM's default. docs/testing.md says so.
export SPARK_SUBMIT_OPTS="${SPARK_SUBMIT_OPTS:--XX:TieredStopAtLevel=1}"
REPORTS="${TEST_REPORTS:-${TMPDIR:-/tmp}/tablemgmt-test-reports}"
mkdir -p "$REPORTS"
"$BIN/pytest" -q -p no:cacheprovider --durations=25 --junitxml "$REPORTS/junit-$(date -u +%Y%m%dT%H%M%SZ).xml" \
  -n "${TEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder \
  "$@" tests plugins/paimon/tests
