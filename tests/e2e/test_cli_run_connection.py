"""The Spark connection read without Airflow is Airflow's own answer, or no answer at all.

``connection_from_environment`` decides when ``tablemgmt run`` may skip Airflow's import; for every
connection it accepts, SparkSubmitHook (real Airflow, the same environment) must build the same
``spark-submit`` command line; everything it is unsure of is left to Airflow (None).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.hooks import spark_job
from airflow_tablemgmt.hooks.airflow_settings import metrics_may_be_on, secrets_backend_may_be_configured
from airflow_tablemgmt.hooks.spark_submit_direct import DirectSparkSubmit, connection_from_environment

pytestmark = pytest.mark.e2e

SUBMIT: dict[str, Any] = {
    "conf": {"spark.ui.enabled": "false", "spark.sql.session.timeZone": "UTC"},
    "jars": "/x/iceberg.jar",
    "packages": None,
    "name": "tms-rewrite-files-lake.db.t-p1a1",
    "application_args": ["--spec", "/tmp/job.json"],
    "env_vars": {"SPARK_HOME": "/x/pyspark"},
}

ACCEPTED = [
    {"conn_type": "spark", "host": "local[2]"},
    {"conn_type": "spark", "host": "local[*]", "extra": {"deploy-mode": "client"}},
    {"conn_type": "spark", "host": "spark://master", "port": 7077, "extra": '{"deploy-mode": "client"}'},
    {"conn_type": "spark", "host": "master", "port": "7077"},
    {
        "conn_type": "spark",
        "host": "spark://m:7077",
        "extra": {"spark-binary": "spark3-submit", "queue": "q"},
    },
    {"conn_type": "spark", "host": "local", "description": "d", "login": "u", "password": "p", "schema": ""},
    {"conn_type": "spark-x", "host": "h", "port": 1},
]
REFUSED = [
    {"conn_type": "spark", "host": "yarn"},
    {"conn_type": "spark", "host": "k8s://https://api:6443"},
    {"conn_type": "spark", "host": "spark://m:7077", "extra": {"deploy-mode": "cluster"}},
    {"conn_type": "spark", "host": "local", "extra": {"keytab": "AAAA", "principal": "me"}},
    {"conn_type": "spark", "host": "local", "extra": {"spark-binary": "/bin/evil"}},
    {"conn_type": "spark", "host": "local", "extra": {"spark-home": "/opt/spark"}},
    {"conn_type": "spark", "host": "local", "port": "not-a-port"},
    {"conn_type": "spark", "host": "local", "unknown_field": 1},
    {"conn_type": "spark", "host": "local", "extra": "not json"},
    {"host": "local[2]"},
]


def _airflow_command(monkeypatch: pytest.MonkeyPatch, value: str) -> list[str]:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", value)
    hook = spark_job._airflow_hook_class()(conn_id="spark_default", **SUBMIT)
    return list(hook._build_spark_submit_command("/x/job_main.py"))


@pytest.mark.parametrize("conn", ACCEPTED, ids=lambda c: json.dumps(c)[:60])
def test_an_accepted_connection_gives_sparksubmithooks_command(
    monkeypatch: pytest.MonkeyPatch, conn: dict
) -> None:
    value = json.dumps(conn)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", value)
    direct = connection_from_environment("spark_default")
    assert direct is not None
    command = DirectSparkSubmit(direct, **SUBMIT).command("/x/job_main.py")
    assert command == _airflow_command(monkeypatch, value)


@pytest.mark.parametrize("conn", REFUSED, ids=lambda c: json.dumps(c)[:60])
def test_anything_else_is_left_to_airflow(monkeypatch: pytest.MonkeyPatch, conn: dict) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(conn))
    assert connection_from_environment("spark_default") is None


def test_a_uri_or_a_missing_variable_is_left_to_airflow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", "spark://master:7077")
    assert connection_from_environment("spark_default") is None
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT")
    assert connection_from_environment("spark_default") is None


@pytest.mark.parametrize(
    "env",
    [
        {"AIRFLOW__SECRETS__BACKEND": "airflow.secrets.local_filesystem.LocalFilesystemBackend"},
        {"AIRFLOW__SECRETS__BACKEND_CMD": "echo x"},
        {"AIRFLOW__WORKERS__SECRETS_BACKEND": "some.Backend"},
    ],
)
def test_a_secrets_backend_in_the_environment_is_left_to_airflow(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(ACCEPTED[0]))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert secrets_backend_may_be_configured()
    assert connection_from_environment("spark_default") is None


@pytest.mark.parametrize(
    ("text", "configured"),
    [
        ("[secrets]\nbackend = airflow.secrets.local_filesystem.LocalFilesystemBackend\n", True),
        ("[secrets]\nbackend_secret = x\n", True),
        ("[workers]\nsecrets_backend = some.Backend\n", True),
        ("[secrets]\nbackend =\nbackend_kwargs =\n", False),
        ("[core]\nexecutor = LocalExecutor\n", False),
        ("this is [not an ini file", True),
    ],
)
def test_a_secrets_backend_in_the_config_file_is_left_to_airflow(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str, configured: bool
) -> None:
    cfg = tmp_path / "airflow.cfg"
    cfg.write_text(text)
    monkeypatch.setenv("AIRFLOW_CONFIG", str(cfg))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(ACCEPTED[0]))
    assert secrets_backend_may_be_configured() is configured
    assert (connection_from_environment("spark_default") is None) is configured


@pytest.mark.parametrize(
    ("env", "text", "on"),
    [
        ({}, "", False),
        ({"AIRFLOW__METRICS__STATSD_ON": "True"}, "", True),
        ({"AIRFLOW__METRICS__OTEL_ON": "false"}, "", False),
        ({}, "[metrics]\nstatsd_datadog_enabled = t\n", True),
        ({}, "[metrics]\notel_on = False\nstatsd_on = 0\n", False),
        ({"AIRFLOW__METRICS__STATSD_ON_CMD": "echo True"}, "", True),
    ],
)
def test_metrics_are_known_off_only_when_no_exporter_may_be_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], text: str, on: bool
) -> None:
    cfg = tmp_path / "airflow.cfg"
    cfg.write_text(text)
    monkeypatch.setenv("AIRFLOW_CONFIG", str(cfg))
    for key in ("STATSD_ON", "OTEL_ON", "STATSD_DATADOG_ENABLED"):
        monkeypatch.delenv(f"AIRFLOW__METRICS__{key}", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert metrics_may_be_on() is on
