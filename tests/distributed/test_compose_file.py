"""docker/docker-compose.yaml and the distributed test read one settings file, and compose validates.

No container is started here: images cannot be pulled on the machines this suite runs on. The
topology itself is proven by test_celery_spark_cluster.py with native processes.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.distributed.cluster import ENDPOINT_KEYS, SECRET_KEYS, SETTINGS_FILE, read_settings
from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.distributed

DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "docker-compose.yaml"
AIRFLOW_SERVICES = {
    "airflow-init", "api-server", "scheduler", "dag-processor", "triggerer", "airflow-worker-1", "airflow-worker-2",
}  # fmt: skip
SPARK_SERVICES = {"spark-master", "spark-worker"}


def _compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())  # type: ignore[no-any-return]


def test_compose_has_the_production_topology() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "redis", *AIRFLOW_SERVICES, *SPARK_SERVICES}
    commands = {name: services[name].get("command") for name in AIRFLOW_SERVICES - {"airflow-init"}}
    assert commands == {
        "api-server": "api-server", "scheduler": "scheduler", "dag-processor": "dag-processor",
        "triggerer": "triggerer", "airflow-worker-1": "celery worker", "airflow-worker-2": "celery worker",
    }  # fmt: skip
    for name in SPARK_SERVICES:  # the same image: Spark, the Iceberg jar and Python match the drivers'
        assert services[name]["image"] == services["scheduler"]["image"]
        assert services[name]["entrypoint"] == ["/opt/spark/bin/spark-class"]
        assert "warehouse:/data/warehouse" in services[name]["volumes"]
    assert services["spark-worker"]["command"][:2] == [
        "org.apache.spark.deploy.worker.Worker",
        "spark://spark-master:7077",
    ]
    for name in AIRFLOW_SERVICES:
        assert "warehouse:/data/warehouse" in services[name]["volumes"], name


def test_compose_and_the_distributed_test_share_one_settings_file() -> None:
    """Every Airflow service reads airflow.env and sets only endpoints and secrets itself, so the
    compose deployment and tests/distributed/ cannot drift apart."""
    settings = read_settings()
    assert settings["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert not set(settings) & {*ENDPOINT_KEYS, *SECRET_KEYS}, (
        "endpoints and secrets do not belong in airflow.env"
    )
    services = _compose()["services"]
    for name in AIRFLOW_SERVICES:
        service = services[name]
        assert service["env_file"] == [SETTINGS_FILE.name], name
        assert (DOCKER / service["env_file"][0]).resolve() == SETTINGS_FILE.resolve()
        env = service["environment"]
        assert set(env) == {*ENDPOINT_KEYS, *SECRET_KEYS}, (
            name,
            sorted(set(env) ^ {*ENDPOINT_KEYS, *SECRET_KEYS}),
        )
        for key in SECRET_KEYS:  # from docker/.env, required, never a literal
            assert str(env[key]).startswith("${") and ":?" in str(env[key]), (name, key)
    assert "spark://spark-master:7077" in services["scheduler"]["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"]
    assert '"deploy-mode": "client"' in services["scheduler"]["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"]


def test_no_secret_is_committed() -> None:
    example = (DOCKER / ".env.example").read_text().splitlines()
    values = dict(line.split("=", 1) for line in example if line and not line.startswith("#"))
    for key in ("AIRFLOW_FERNET_KEY", "AIRFLOW_JWT_SECRET", "AIRFLOW_API_SECRET_KEY", "POSTGRES_PASSWORD"):
        assert values[key] == "", f".env.example must leave {key} empty"
    assert ".env" in (DOCKER / ".gitignore").read_text().splitlines()


def _compose_cli() -> list[str]:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip(
            "the docker CLI is not installed: `docker compose config` cannot validate docker-compose.yaml"
        )
    if subprocess.run([docker, "compose", "version"], capture_output=True, timeout=60).returncode != 0:
        pytest.skip("the docker CLI has no compose plugin (`docker compose version` fails): cannot validate")
    return [docker, "compose"]


def test_docker_compose_config_validates(tmp_path: Path) -> None:
    compose = _compose_cli()
    env = tmp_path / "test.env"
    env.write_text(
        "AIRFLOW_FERNET_KEY=k\nAIRFLOW_JWT_SECRET=j\nAIRFLOW_API_SECRET_KEY=a\nPOSTGRES_PASSWORD=p\n"
    )
    res = subprocess.run(
        [*compose, "-f", str(COMPOSE), "--env-file", str(env), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    missing = subprocess.run(
        [*compose, "-f", str(COMPOSE), "--env-file", "/dev/null", "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode != 0 and "docker/.env" in missing.stderr, missing.stderr
