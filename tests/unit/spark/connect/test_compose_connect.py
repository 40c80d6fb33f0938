"""docker/docker-compose.yaml's spark-connect service and docker/docker-compose.connect.yaml (the switch
that turns the engine on for the workers) as YAML: no container is started here (images cannot be pulled
where the suite runs; `docker compose config` checks it where compose exists)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from airflow_tablemgmt.hooks.spark_connect import connect_url
from airflow_tablemgmt.spark.connect.server import DEFAULT_PORT

DOCKER = Path(__file__).resolve().parents[4] / "docker"


def test_the_server_runs_on_the_cluster_and_the_override_points_the_workers_at_it() -> None:
    base = yaml.safe_load((DOCKER / "docker-compose.yaml").read_text())["services"]
    override = yaml.safe_load((DOCKER / "docker-compose.connect.yaml").read_text())["services"]
    server = base["spark-connect"]
    assert server["image"] == base["scheduler"]["image"]
    assert server["entrypoint"] == ["python", "-m", "airflow_tablemgmt.spark.connect.server"]
    assert "--master=spark://spark-master:7077" in server["command"]
    assert f"--port={DEFAULT_PORT}" in server["command"]
    assert not any("packages" in arg for arg in server["command"])
    assert not any("warehouse" in str(v) for v in server.get("volumes", []))  # the tables live on S3
    for worker in ("airflow-worker-1", "airflow-worker-2"):
        assert worker in base
        conn = json.loads(base[worker]["environment"]["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"])
        assert conn["conn_type"] == "spark_connect"
        assert connect_url(conn["host"], conn["port"]) == f"sc://spark-connect:{DEFAULT_PORT}"
        # spark-submit stays the base file's engine; the override alone switches Connect on.
        assert "AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID" not in base[worker]["environment"]
        env = override[worker]["environment"]
        assert env["AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID"] == "spark_connect_default"
        assert override[worker]["depends_on"]["spark-connect"]["condition"] == "service_healthy"
