"""Catalog secrets reach the Spark job through its 0600 spec file, never through argv, logs, XCom or the store.

Both tests run real ``spark-submit`` jobs: one a probe that starts its session exactly as ``job_main``
does and reports what Spark holds (as hashes) and what its parent JVM's command line shows; one a
real maintenance action through ``ProcessRunner`` + ``SparkJobHook`` (Airflow's ``SparkSubmitHook``),
after which everything it wrote is searched for the secret.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.hooks.secrets import resolve_catalog
from airflow_tablemgmt.hooks.spark_job import SparkJobHook
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
from airflow_tablemgmt.spark.launch.submit import build_submit_spec, write_spec
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.integration.spark.spark_tables import TableFactory, Tables

pytestmark = pytest.mark.integration

SECRET = "tms-probe-secret-31415926"
ENV = "TMS_TEST_SECRET"

PROBE = r"""
import hashlib, json, os, sys
from pathlib import Path
from airflow_tablemgmt.spark.job import main as job_main
from airflow_tablemgmt.spark.job.session import build_session

job = job_main.load_spec(Path(sys.argv[2]))
table = job_main.table_of(job)
catalog = job_main.catalog_of(job, table)
spark = build_session(catalog, "tms-secrets-probe")
def digest(v):
    return None if v is None else hashlib.sha256(v.encode()).hexdigest()
header = spark.conf.get("spark.sql.catalog.lake.header.x-test", None)
hadoop = spark.sparkContext._jsc.hadoopConfiguration().get("tms.test.secret-key")
with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
    parent = f.read().replace(b"\0", b" ").decode(errors="replace")
print("PROBE " + json.dumps({
    "header": digest(header),
    "hadoop": digest(hadoop),
    "table_exists": spark.catalog.tableExists(str(table)),
    "parent_is_spark_submit": "org.apache.spark.deploy.SparkSubmit" in parent,
    "secret_in_parent_argv": header is not None and header in parent,
    "header_key_in_parent_argv": "header.x-test" in parent,
}), flush=True)
spark.stop()
"""


def _secret_catalog(warehouse: Path) -> CatalogSpec:
    # The same hadoop catalog the session fixture uses, plus two secret-looking references.
    return CatalogSpec(
        name="lake",
        warehouse=str(warehouse),
        properties={"header.x-test": f"env:{ENV}", "spark.hadoop.tms.test.secret-key": f"env:{ENV}"},
    )


def test_job_applies_resolved_secrets_to_its_session_and_argv_has_none(
    make_table: TableFactory, warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, SECRET)
    table = make_table("id bigint", prefix="probe")
    catalog = resolve_catalog(_secret_catalog(warehouse).model_dump(mode="json"))
    job = JobSpec(
        table={"catalog": table.catalog, "namespace": table.namespace, "name": table.name},
        catalog=catalog,
        action="rewrite-manifests",
    )
    spec_path = write_spec(job, tmp_path / "private" / "job.json")
    spec = build_submit_spec(job, spec_path)
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    argv = spec.argv(str(Path(spec.env["SPARK_HOME"]) / "bin" / "spark-submit"), "local[1]")
    argv[argv.index(spec.application)] = str(probe)
    env = {k: v for k, v in os.environ.items() if k != ENV}  # the job gets the value from the file only

    out = subprocess.run(argv, env={**env, **spec.env}, capture_output=True, text=True, timeout=300)

    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("PROBE ")]
    assert lines, f"probe printed no result (exit {out.returncode}):\n{out.stderr[-3000:]}"
    seen = json.loads(lines[-1].removeprefix("PROBE "))
    expected = hashlib.sha256(SECRET.encode()).hexdigest()
    assert seen["header"] == expected, "spark.sql.catalog.lake.header.x-test not set on the session"
    assert seen["hadoop"] == expected, "spark.hadoop.* not applied to the Hadoop configuration"
    assert seen["table_exists"] is True
    assert seen["parent_is_spark_submit"] is True
    assert seen["secret_in_parent_argv"] is False
    assert seen["header_key_in_parent_argv"] is False
    assert SECRET not in " ".join(argv)
    assert stat.S_IMODE(spec_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(spec_path.parent.stat().st_mode) == 0o700


class _WatchingSubmitter:
    """The real SparkJobHook; when the job reports its application id, the spec file is looked at."""

    def __init__(self, hook: SparkJobHook, workdir: Path) -> None:
        self.hook = hook
        self.workdir = workdir
        self.spec_files: list[dict[str, Any]] = []

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        def started(app_id: str) -> None:
            for path in self.workdir.glob("*/*.json"):
                self.spec_files.append(
                    {
                        "mode": stat.S_IMODE(path.stat().st_mode),
                        "dir_mode": stat.S_IMODE(path.parent.stat().st_mode),
                        "text": path.read_text(),
                    }
                )
            if on_started is not None:
                on_started(app_id)

        return self.hook.submit(job, on_started=started)

    def kill(self) -> None:
        self.hook.kill()


def test_real_job_leaves_no_secret_in_argv_logs_result_xcom_or_store(
    make_table: TableFactory,
    tables: Tables,
    warehouse: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(ENV, SECRET)
    table = make_table("id bigint, p string, v string", prefix="leakcheck")
    tables.small_files(table, files=2)
    db = tmp_path / "store.db"
    store = Store(f"sqlite:///{db}")
    store.catalogs.upsert(_secret_catalog(warehouse), Owner.STORE)
    store.tables.upsert(
        TableSpec(
            catalog="lake", namespace=table.namespace, name=table.name, actions={"rewrite-manifests": {}}
        ),
        Owner.STORE,
    )
    workdir = tmp_path / "jobs"
    workdir.mkdir()
    submitter = _WatchingSubmitter(SparkJobHook("spark_default", workdir=str(workdir)), workdir)
    runner = ProcessRunner(store, default_factories(), submitter)  # type: ignore[arg-type]

    with caplog.at_level(logging.INFO):
        outcome = runner.run(
            RunRequest(
                table_id=str(table),
                action="rewrite-manifests",
                instant=datetime(2026, 1, 1, tzinfo=UTC),
                dag_id="d",
                run_id="r",
                task_id="t",
                try_number=1,
                holder="d/r/t/1",
            )
        )

    process = store.processes.get(outcome.process.id)
    assert str(process.status) == "SUCCESS", process.failure_reason
    # The secret did travel: resolved in the spec file, which only the job's user can read.
    assert submitter.spec_files, "no spec file seen while the job ran"
    spec_file = submitter.spec_files[0]
    assert (spec_file["mode"], spec_file["dir_mode"]) == (0o600, 0o700)
    assert json.loads(spec_file["text"])["catalog"]["properties"]["header.x-test"] == SECRET
    assert not list(workdir.iterdir()), "the spec file outlived the job"
    # ... and nowhere else.
    spark_output = "\n".join(submitter.hook._hook.lines)  # everything spark-submit printed
    assert "tms_result" in spark_output
    captured = capfd.readouterr()  # Airflow's structlog output: what a task log would hold
    task_log = "\n".join((caplog.text, captured.out, captured.err))
    submit_cmd = [ln for ln in task_log.splitlines() if "Spark-Submit cmd" in ln]
    assert submit_cmd and "job/main.py" in submit_cmd[0], task_log[:3000]
    written = {
        "spark-submit output": spark_output,
        "task log": task_log,
        "XCom summary": json.dumps(outcome.summary),
        "process row": json.dumps(process.to_dict(), default=str),
        "store file": db.read_bytes().decode("latin-1"),
    }
    leaks = {where: text.count(SECRET) for where, text in written.items() if SECRET in text}
    assert leaks == {}
    store.dispose()
