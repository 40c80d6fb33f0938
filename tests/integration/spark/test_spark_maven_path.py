"""A real maintenance job on a host without the ``[embedded]`` jar wheel: Iceberg's runtime comes from Maven.

The submitting process runs with an empty ``snowpark_connect_deps_iceberg`` package first on its import
path (the wheel "not installed") and an empty jar cache: the resolver fetches
``iceberg-spark-runtime-3.5_2.12`` from Maven Central, verifies its checksum, and the job runs with it as
a local ``--jars`` path (no ``--packages``, so spark-submit resolves nothing). A second job on the same
host takes the jar from the cache without the network (an unroutable repository). Skipped locally when
Maven Central cannot be reached; under ``CI=true`` that fails.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.spark.launch.artifacts import ICEBERG_RUNTIME, MAVEN_CENTRAL
from tests.integration.iceberg_session import skip_unless_ci
from tests.integration.spark.spark_tables import TableFactory, Tables, job_spec

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]

CHILD = """
import json, sys
from pathlib import Path
from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.spark.launch.artifacts import ArtifactSettings
from airflow_tablemgmt.spark.launch.submit import build_submit_spec, run_local
job = JobSpec(**json.loads(sys.argv[1]))
settings = ArtifactSettings(directory=Path(sys.argv[2]), repository=sys.argv[3], offline=sys.argv[4] == "1")
work = Path(sys.argv[5])
spec = build_submit_spec(job, work / "probe-spec.json", artifacts=settings)
result = run_local(job, work, timeout=600, artifacts=settings)
print("CHILD " + json.dumps({"jars": spec.jars, "packages": spec.packages, "ok": result.ok,
                              "error": result.error, "summary": result.summary}))
"""


def _maven_reachable() -> bool:
    try:
        socket.create_connection(("repo1.maven.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


def _child(job: dict, jars: Path, repository: str, offline: bool, work: Path, shadow: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow), str(ROOT)])}
    work.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            json.dumps(job),
            str(jars),
            repository,
            "1" if offline else "0",
            str(work),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("CHILD ")]
    assert lines, res.stdout[-3000:] + res.stderr[-3000:]
    return json.loads(lines[-1][len("CHILD ") :])


@pytest.mark.on_demand(
    reason="the CI Hudi and Delta jobs resolve their runtimes from Maven Central through the same resolver, "
    "and tests/unit/spark/launch/test_artifacts.py verifies downloads against a real HTTP repository"
)
@pytest.mark.timeout(900)
def test_a_job_runs_on_the_iceberg_runtime_fetched_from_maven(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec, tmp_path: Path
) -> None:
    if not _maven_reachable():
        skip_unless_ci(f"Maven Central ({MAVEN_CENTRAL}) is not reachable")
    shadow = tmp_path / "no-wheel"
    (shadow / "snowpark_connect_deps_iceberg").mkdir(parents=True)
    (shadow / "snowpark_connect_deps_iceberg" / "__init__.py").write_text("")
    table = make_table("id bigint, p string, v string", partitioned_by="p", prefix="maven")
    tables.small_files(table, files=6)
    before = tables.content(table)
    job = job_spec(table, catalog, "rewrite-files", {"min-input-files": 2}).to_json_dict()
    jars = tmp_path / "jars"

    first = _child(job, jars, MAVEN_CENTRAL, False, tmp_path / "w1", shadow)

    cached = jars / ICEBERG_RUNTIME.repository_path
    assert first["jars"] == [str(cached)] and first["packages"] == [], first
    assert first["ok"], first["error"]
    assert first["summary"]["after"]["data_files"] == 2
    record = json.loads(Path(f"{cached}.verified").read_text())
    assert record["size"] == cached.stat().st_size and record["algorithm"] in ("sha512", "sha256", "sha1")
    assert tables.content(table) == before
    # The next job on this host: from the cache, with no repository to reach and downloads off.
    tables.small_files(table, files=3)
    second = _child(job, jars, "http://127.0.0.1:1", True, tmp_path / "w2", shadow)
    assert second["ok"] and second["jars"] == [str(cached)], second
