"""docker/docker-compose.yaml and the distributed test read one settings file, and compose validates.

No container is started here: images cannot be pulled on the machines this suite runs on. The
topology itself is proven by test_celery_spark_cluster.py with native processes. Checked here: the
services (an S3 store, the Iceberg REST catalog, Spark standalone and a Spark Connect server on it; no
shared warehouse volume), the catalog's S3 settings agreeing between the REST catalog service, the Spark
job and pyiceberg (both rendered by the product from docker/tables.yaml), and no secret in plain text.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.distributed.cluster import ENDPOINT_KEYS, SECRET_KEYS, SETTINGS_FILE, read_settings
from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.distributed

DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "docker-compose.yaml"
AIRFLOW_SERVICES = {
    "airflow-init",
    "api-server",
    "scheduler",
    "dag-processor",
    "triggerer",
    "airflow-worker-1",
    "airflow-worker-2",
}
SPARK_SERVICES = {"spark-master", "spark-worker"}
STORAGE_SERVICES = {"s3", "iceberg-rest"}
CONNECT = DOCKER / "docker-compose.connect.yaml"
TABLES = DOCKER / "tables.yaml"
# Compose-only keys of the Airflow services beside ENDPOINT_KEYS and SECRET_KEYS: the Connect server's
# connection (an endpoint) and the S3 key pair the catalog's env: references read (secrets).
COMPOSE_ENDPOINT_KEYS = ("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT",)
S3_SECRET_KEYS = ("TMS_S3_ACCESS_KEY_ID", "TMS_S3_SECRET_ACCESS_KEY")
_REQUIRED = re.compile(r"^\$\{([A-Z0-9_]+):\?[^}]*\}$")


def _compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())  # type: ignore[no-any-return]


def test_compose_has_the_production_topology() -> None:
    compose = _compose()
    services = compose["services"]
    assert set(services) == {
        "postgres",
        "redis",
        *AIRFLOW_SERVICES,
        *SPARK_SERVICES,
        *STORAGE_SERVICES,
        "spark-connect",
    }
    commands = {name: services[name].get("command") for name in AIRFLOW_SERVICES - {"airflow-init"}}
    assert commands == {
        "api-server": "api-server",
        "scheduler": "scheduler",
        "dag-processor": "dag-processor",
        "triggerer": "triggerer",
        "airflow-worker-1": "celery worker",
        "airflow-worker-2": "celery worker",
    }
    for name in SPARK_SERVICES:  # the same image: Spark, the Iceberg jar and Python match the drivers'
        assert services[name]["image"] == services["scheduler"]["image"]
        assert services[name]["entrypoint"] == ["/opt/spark/bin/spark-class"]
    assert services["spark-worker"]["command"][:2] == [
        "org.apache.spark.deploy.worker.Worker",
        "spark://spark-master:7077",
    ]
    # Production looks like production: data is reached through the catalog and S3, not a shared disk.
    assert "warehouse" not in (compose.get("volumes") or {}), "a shared warehouse volume is back"
    for name, service in services.items():
        mounts = [str(v) for v in service.get("volumes", [])]
        assert not [m for m in mounts if "warehouse" in m], (name, mounts)
    for name in AIRFLOW_SERVICES:
        assert "./tables.yaml:/opt/airflow/dags/tables.yaml:ro" in services[name]["volumes"], name
        if name != "airflow-init":  # migrations need no catalog
            assert services[name]["depends_on"]["iceberg-rest"] == {"condition": "service_healthy"}, name
    assert services["iceberg-rest"]["depends_on"]["s3"] == {"condition": "service_healthy"}


def test_spark_connect_runs_against_the_cluster_and_the_override_only_switches_it_on() -> None:
    services = _compose()["services"]
    connect = services["spark-connect"]
    assert connect["image"] == services["scheduler"]["image"]
    assert connect["entrypoint"] == ["python", "-m", "airflow_tablemgmt.spark.connect.server"]
    args = dict(
        a.removeprefix("--").split("=", 1) for a in connect["command"] if a.startswith("--") and "=" in a
    )
    assert (args["master"], args["host"], args["port"], args["need"]) == (
        "spark://spark-master:7077",
        "0.0.0.0",
        "15002",
        "aws",
    )
    assert "--conf=spark.driver.host=spark-connect" in connect["command"]
    assert connect["hostname"] == "spark-connect"
    assert not connect.get("volumes"), "the Connect server reads data through the catalog and S3"
    conn = json.loads(services["scheduler"]["environment"]["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"])
    assert (conn["conn_type"], conn["host"], conn["port"]) == ("spark_connect", "sc://spark-connect", 15002)
    override = yaml.safe_load(CONNECT.read_text())["services"]
    assert set(override) == {"airflow-worker-1", "airflow-worker-2"}, (
        "the override only switches the engine on"
    )
    for name, service in override.items():
        assert service["environment"] == {
            "AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID": "spark_connect_default"
        }
        assert service["depends_on"] == {"spark-connect": {"condition": "service_healthy"}}, name


def _catalog_settings() -> Any:
    """docker/tables.yaml's catalog as the product renders it for the Spark job and for pyiceberg, with
    its env: references resolved to markers."""
    import os

    from airflow_tablemgmt.core.storage import pyiceberg_properties
    from airflow_tablemgmt.core.tables import parse_catalog
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
    from airflow_tablemgmt.spark.conf import catalog_conf

    [declared] = yaml.safe_load(TABLES.read_text())["catalogs"]
    catalog = parse_catalog(declared)
    refs = {k: v for k, v in catalog.properties.items() if str(v).startswith("env:")}
    saved = {v[4:]: os.environ.get(v[4:]) for v in refs.values()}
    os.environ.update({v[4:]: f"marker-{v[4:].lower()}" for v in refs.values()})
    try:
        resolved = resolve_catalog_spec(catalog)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    prefix = f"spark.sql.catalog.{catalog.name}."
    spark = {k.removeprefix(prefix): v for k, v in catalog_conf(resolved).items() if k.startswith(prefix)}
    return catalog, refs, spark, pyiceberg_properties(resolved.warehouse, resolved.properties)


def test_the_catalogs_s3_settings_agree_between_the_rest_server_spark_and_pyiceberg() -> None:
    services = _compose()["services"]
    rest_env = services["iceberg-rest"]["environment"]
    s3 = services["s3"]
    catalog, refs, spark, py = _catalog_settings()
    assert catalog.type.value == "rest"
    # The catalog's URI is the REST service, on the port the fixture serves (rest.port, default 8181).
    uri = urlsplit(spark["uri"])
    assert (uri.hostname, uri.port) == (services["iceberg-rest"]["hostname"], 8181) and py["uri"] == spark[
        "uri"
    ]
    # One S3 endpoint: the s3 service's gateway, as the REST server, the job and pyiceberg address it.
    endpoint = urlsplit(rest_env["CATALOG_S3_ENDPOINT"])
    s3_args = dict(a.lstrip("-").split("=", 1) for a in s3["command"] if "=" in a)
    assert (endpoint.hostname, endpoint.port) == (s3["hostname"], int(s3_args["s3.port"]))
    assert spark["s3.endpoint"] == py["s3.endpoint"] == rest_env["CATALOG_S3_ENDPOINT"]
    # Path-style addressing on all three (a bucket subdomain of `s3` would not resolve).
    assert rest_env["CATALOG_S3_PATH__STYLE__ACCESS"] == spark["s3.path-style-access"] == "true"
    assert py["s3.force-virtual-addressing"] == "false"
    # One region.
    assert (
        rest_env["CATALOG_CLIENT_REGION"]
        == rest_env["AWS_REGION"]
        == spark["client.region"]
        == py["s3.region"]
    )
    # The warehouse bucket is the one the store creates, and S3FileIO writes it.
    assert urlsplit(rest_env["CATALOG_WAREHOUSE"]).netloc == s3_args["bucket"]
    assert rest_env["CATALOG_IO__IMPL"] == "org.apache.iceberg.aws.s3.S3FileIO"
    # One key pair: the store's identity, the REST server's and the job's/pyiceberg's (through the
    # catalog's env: references to the Airflow services' variables) come from the same docker/.env keys.
    source = {
        "id": _REQUIRED.match(s3["environment"]["AWS_ACCESS_KEY_ID"]).group(1),  # type: ignore[union-attr]
        "secret": _REQUIRED.match(s3["environment"]["AWS_SECRET_ACCESS_KEY"]).group(1),  # type: ignore[union-attr]
    }
    assert _REQUIRED.match(rest_env["CATALOG_S3_ACCESS__KEY__ID"]).group(1) == source["id"]  # type: ignore[union-attr]
    assert _REQUIRED.match(rest_env["CATALOG_S3_SECRET__ACCESS__KEY"]).group(1) == source["secret"]  # type: ignore[union-attr]
    assert refs == {
        "s3.access-key-id": "env:TMS_S3_ACCESS_KEY_ID",
        "s3.secret-access-key": "env:TMS_S3_SECRET_ACCESS_KEY",
    }
    airflow_env = services["scheduler"]["environment"]
    assert _REQUIRED.match(airflow_env["TMS_S3_ACCESS_KEY_ID"]).group(1) == source["id"]  # type: ignore[union-attr]
    assert _REQUIRED.match(airflow_env["TMS_S3_SECRET_ACCESS_KEY"]).group(1) == source["secret"]  # type: ignore[union-attr]
    assert spark["s3.access-key-id"] == py["s3.access-key-id"] == "marker-tms_s3_access_key_id"
    assert spark["s3.secret-access-key"] == py["s3.secret-access-key"] == "marker-tms_s3_secret_access_key"


def _environments(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    out = []
    for name, service in doc.get("services", {}).items():
        env = service.get("environment") or {}
        if isinstance(env, list):
            env = dict(str(e).split("=", 1) for e in env)
        out += [(name, str(k), str(v)) for k, v in env.items()]
    return out


def test_no_secret_in_plain_text() -> None:
    """A variable whose name the project treats as a secret (core/secrets.py: Airflow's sensitive words,
    credential/key/secret/token...) is a required interpolation from docker/.env in both compose files;
    a password inside a DSN is one too; the catalog's secrets are references."""
    from airflow_tablemgmt.core.secrets import check_secret_properties, is_sensitive

    for doc in (_compose(), yaml.safe_load(CONNECT.read_text())):
        for name, key, value in _environments(doc):
            if is_sensitive(key.lower().replace("__", "-").replace("_", "-")) or "PASSWORD" in key:
                assert _REQUIRED.match(value), f"{name}: {key} is not a required ${{VAR:?}} from docker/.env"
            plain = re.sub(r"\$\{[^}]*\}", "<var>", value)  # interpolations from docker/.env
            for dsn in re.findall(r"[a-z0-9+]+://([^/@\s\"']*)@", plain):  # user:password@host
                password = dsn.partition(":")[2]
                assert password in ("", "<var>"), f"{name}: {key} has a literal password"
    [declared] = yaml.safe_load(TABLES.read_text())["catalogs"]
    check_secret_properties(declared["properties"])  # a plaintext secret there would raise


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
        expected = {*ENDPOINT_KEYS, *SECRET_KEYS, *COMPOSE_ENDPOINT_KEYS, *S3_SECRET_KEYS}
        assert set(env) == expected, (name, sorted(set(env) ^ expected))
        for key in (*SECRET_KEYS, *S3_SECRET_KEYS):  # from docker/.env, required, never a literal
            assert str(env[key]).startswith("${") and ":?" in str(env[key]), (name, key)
    assert "spark://spark-master:7077" in services["scheduler"]["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"]
    assert '"deploy-mode": "client"' in services["scheduler"]["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"]


def test_no_secret_is_committed() -> None:
    example = (DOCKER / ".env.example").read_text().splitlines()
    values = dict(line.split("=", 1) for line in example if line and not line.startswith("#"))
    for key in (
        "AIRFLOW_FERNET_KEY",
        "AIRFLOW_JWT_SECRET",
        "AIRFLOW_API_SECRET_KEY",
        "POSTGRES_PASSWORD",
        "S3_ACCESS_KEY_ID",
        "S3_SECRET_ACCESS_KEY",
    ):
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
        "S3_ACCESS_KEY_ID=s\nS3_SECRET_ACCESS_KEY=t\n"
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
