"""The Spark job gets the task's OpenLineage run as its parent, as ``SparkSubmitOperator`` hands it
(``[openlineage] spark_inject_parent_job_info = True``): the properties ``lineage/spark.py`` computes from a
real task's context name the run the OpenLineage provider reports for that task (its START event, written
by the real file transport), and ``SparkJobHook`` passes them to spark-submit as ``--conf``.

``dag.test()`` runs in a subprocess: the OpenLineage provider caches its configuration per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

DAG_FILE = textwrap.dedent(
    """
    import json, os
    from datetime import datetime
    from airflow.sdk import DAG
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow_tablemgmt.lineage.spark import parent_job_conf

    def record(**context):
        with open(os.environ["TMS_PARENT_OUT"], "w") as out:
            json.dump(parent_job_conf(context), out)

    with DAG("tms_lineage_parent", start_date=datetime(2026, 1, 1), schedule=None):
        PythonOperator(task_id="record", python_callable=record)
    """
)
SCRIPT = textwrap.dedent(
    """
    import sys
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=sys.argv[1])
    bag.get_dag("tms_lineage_parent").test()
    """
)


def _run(folder: Path, tmp_path: Path, inject: bool) -> tuple[dict[str, str], list[dict[str, object]]]:
    events_file = tmp_path / f"events-{inject}.jsonl"
    out = tmp_path / f"parent-{inject}.json"
    env = {
        **os.environ,
        "TMS_PARENT_OUT": str(out),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(events_file), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "tms-test",
        "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
        "AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO": str(inject),
    }
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(folder)], env=env, capture_output=True, text=True, timeout=240
    )
    assert out.exists(), res.stdout[-3000:] + res.stderr[-3000:]
    events = [json.loads(x) for x in events_file.read_text().splitlines()] if events_file.exists() else []
    return json.loads(out.read_text()), events


def test_the_spark_job_gets_the_tasks_run_as_its_openlineage_parent(
    airflow_db: str, dags_folder: Path, tmp_path: Path
) -> None:
    (dags_folder / "tms_lineage_parent.py").write_text(DAG_FILE)
    conf, events = _run(dags_folder, tmp_path, inject=True)
    start = next(
        e for e in events if e["eventType"] == "START" and e["job"]["name"] == "tms_lineage_parent.record"
    )
    assert conf["spark.openlineage.parentRunId"] == start["run"]["runId"]
    assert conf["spark.openlineage.parentJobName"] == "tms_lineage_parent.record"
    assert conf["spark.openlineage.parentJobNamespace"] == "tms-test"
    assert all(key.startswith("spark.openlineage.") for key in conf)

    off, _ = _run(dags_folder, tmp_path, inject=False)
    assert off == {}


def test_the_hook_passes_the_parent_to_spark_submit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``extra_conf`` reaches spark-submit's command line as ``--conf`` with the default settings (the JVM
    class cache on); the job's own settings win."""
    from airflow_tablemgmt.core.factory import JobSpec
    from airflow_tablemgmt.hooks.spark_job import SparkJobHook
    from airflow_tablemgmt.hooks.spark_submit_direct import SparkConnection

    argv_file = tmp_path / "argv.json"
    binary = tmp_path / "spark-submit"
    binary.write_text(
        f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(argv_file)!r}, 'w'))\n"
        "sys.exit(3)\n"
    )
    binary.chmod(0o755)
    # The default settings: the JVM class cache on (its options are added to the submitted conf).
    monkeypatch.delenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE", raising=False)
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE_DIR", str(tmp_path / "jvm-cache"))
    from airflow_tablemgmt.spark.launch import class_cache

    # This set-up's archive exists (made the way a run makes it), so the job maps it: the cache's options
    # are added to the submitted conf, which must still carry the parent run.
    planned: list[dict[str, Any]] = []
    real_plan = class_cache.plan
    monkeypatch.setattr(class_cache, "plan", lambda **kw: planned.append(kw) or real_plan(**kw))
    job = JobSpec(
        table={"catalog": "lake", "namespace": "db", "name": "t"},
        catalog={"name": "lake", "type": "hadoop", "warehouse": str(tmp_path / "wh"), "properties": {}},
        action="rewrite-files",
        process_id=7,
    )

    def submit() -> list[str]:
        hook = SparkJobHook("spark_default", workdir=str(tmp_path))
        monkeypatch.setattr(
            hook, "_direct_connection", lambda: SparkConnection(master="local[1]", spark_binary=str(binary))
        )
        hook.extra_conf.update(
            {"spark.openlineage.parentRunId": "run-1", "spark.sql.session.timeZone": "Asia/Tokyo"}
        )
        assert not hook.submit(job).ok  # the stand-in exits 3 without a result line
        argv = json.loads(argv_file.read_text())
        return [argv[i + 1] for i, a in enumerate(argv) if a == "--conf"]

    assert "spark.openlineage.parentRunId=run-1" in submit()  # no archive yet: the job runs without one
    creating, _ = real_plan(**planned[-1])
    assert creating.mode == "create" and creating.temp is not None, creating.reason
    creating.temp.write_bytes((0xF00BABA8).to_bytes(4, "little") + b"\0" * 4092)  # as the JVM writes it
    assert "created" in str(creating.finish([], succeeded=True, result_seen=True)[0])

    confs = submit()
    assert "spark.openlineage.parentRunId=run-1" in confs
    # The class cache's options went onto the same conf (it was not turned off behind the test's back).
    assert any(c.startswith("spark.driver.extraJavaOptions=") and "SharedArchiveFile" in c for c in confs), (
        confs
    )
    assert "spark.sql.session.timeZone=UTC" in confs and "spark.sql.session.timeZone=Asia/Tokyo" not in confs
