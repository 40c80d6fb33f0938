"""Through a real ``spark-submit``: the user's jars reach the driver beside ours, and the job's environment
is an allow-list.

A jar compiled here (``javac``) is named by ``spark-defaults.conf`` or by a catalog property
(``spark.jars``); the submission is built as every job's is (``build_submit_spec``: the resolver's
``--jars`` plus the user's), and run by both submitters (the CLI's direct one and Airflow's
SparkSubmitHook) with a probe application in place of the job, which calls the user's class through
Spark SQL and reads a canary secret of the submitting process's environment from Python and from the JVM.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.hooks import spark_job, spark_submit_direct
from airflow_tablemgmt.spark.launch.submit import build_submit_spec

pytestmark = pytest.mark.integration

CANARY_ENV = "TMS_TEST_CANARY_SECRET"
CANARY = "canary-4f1e9b-do-not-leak"
PROBE = """
import json, os, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
out = {"python_env": os.environ.get(%(env)r), "airflow_env": sorted(k for k in os.environ if k.startswith("AIRFLOW"))}
out["jvm_env"] = spark.sql("SELECT java_method('java.lang.System', 'getenv', %(env)r) AS v").first().v
for cls in ("tmsuser.Defaults", "tmsuser.Catalog"):
    try:
        out[cls] = spark.sql(f"SELECT java_method('{cls}', 'hello') AS v").first().v
    except Exception as e:
        out[cls] = "missing: " + type(e).__name__
out["iceberg"] = type(spark._jvm.org.apache.iceberg.spark.SparkCatalog).__name__ == "JavaClass"
sys.stdout.write("PROBE " + json.dumps(out) + "\\n")  # one write: print's two let the JVM's log in between
sys.stdout.flush()
spark.stop()
"""


def _jar(tmp: Path, cls: str) -> Path:
    if shutil.which("javac") is None or shutil.which("jar") is None:
        pytest.skip("javac/jar not installed (a JDK)")
    src = tmp / "src" / cls
    (src / "tmsuser").mkdir(parents=True)
    (src / "tmsuser" / f"{cls}.java").write_text(
        f'package tmsuser; public class {cls} {{ public static String hello() {{ return "hello from {cls}"; }} }}'
    )
    subprocess.run(
        ["javac", "--release", "8", f"tmsuser/{cls}.java"], cwd=src, check=True, capture_output=True
    )
    jar = tmp / f"{cls.lower()}.jar"
    subprocess.run(["jar", "cf", str(jar), f"tmsuser/{cls}.class"], cwd=src, check=True)
    return jar


@pytest.fixture(scope="module")
def user_jars(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("user-jars")
    return {"Defaults": _jar(tmp, "Defaults"), "Catalog": _jar(tmp, "Catalog")}


def _probe(submitter: str, spec: Any, tmp_path: Path) -> dict[str, Any]:
    application = tmp_path / "probe.py"
    application.write_text(PROBE % {"env": CANARY_ENV})
    kwargs = {
        "conf": spec.conf,
        "jars": ",".join(spec.jars) or None,
        "packages": ",".join(spec.packages) or None,
        "name": "tms-probe",
        "application_args": [],
        "env_vars": spec.env,
    }
    if submitter == "direct":
        hook: Any = spark_submit_direct.DirectSparkSubmit(
            spark_submit_direct.SparkConnection(master="local[1]"), **kwargs
        )
    else:
        hook = spark_job._airflow_hook_class()(conn_id="tms_missing_spark_conn", **kwargs)
    hook.submit(application=str(application))
    lines = [ln for ln in hook.lines if ln.startswith("PROBE ")]
    assert lines, "\n".join(list(hook.lines)[-30:])
    # the JSON object, even if a log line of the JVM (same pipe) ended up on its line
    return json.JSONDecoder().raw_decode(lines[-1][len("PROBE ") :])[0]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("submitter", ["direct", "airflow"])
def test_user_jars_reach_the_driver_and_secrets_stay_out(
    submitter: str,
    user_jars: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(f"spark.jars {user_jars['Defaults']}\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    monkeypatch.setenv(CANARY_ENV, CANARY)
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", CANARY)

    def spec(properties: dict[str, str]) -> Any:
        catalog = {
            "name": "lake",
            "type": "hadoop",
            "warehouse": str(tmp_path / "wh"),
            "properties": properties,
        }
        job = JobSpec(
            table={"catalog": "lake", "namespace": "db", "name": "t"}, catalog=catalog, action="rewrite-files"
        )
        return build_submit_spec(job, tmp_path / "spec.json")

    # spark-defaults.conf's spark.jars: before, our --jars replaced it and the class was missing.
    from_defaults = _probe(submitter, spec({}), tmp_path)
    assert from_defaults["tmsuser.Defaults"] == "hello from Defaults"
    assert from_defaults["iceberg"] is True
    # A catalog property replaces the defaults file's value, as a --conf does in spark-submit.
    from_catalog = _probe(submitter, spec({"spark.jars": str(user_jars["Catalog"])}), tmp_path)
    assert from_catalog["tmsuser.Catalog"] == "hello from Catalog"
    assert from_catalog["tmsuser.Defaults"].startswith("missing")
    # The submitting process's secrets are not in the job's environment, in Python or in the JVM.
    for seen in (from_defaults, from_catalog):
        # (java_method renders a null as "null")
        assert seen["python_env"] is None and seen["jvm_env"] in (None, "null"), seen
        assert seen["airflow_env"] == [], seen
