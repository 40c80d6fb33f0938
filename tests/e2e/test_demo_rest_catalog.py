"""`DEMO_CATALOG=rest make demo`: the demo on Iceberg's REST catalog over S3, in the parts CI can afford.

The whole run (servers, a 520-file table written by Spark through the catalog, every action through
`airflow dags test`, the dynamic table) takes far longer than CI's budget; it was run end to end and its
figures are in docs/catalogs.md. Here: the script refuses an unknown DEMO_CATALOG before it touches
anything; the REST demo's declarations are valid, declare the same table, actions and dynamic table as
the local demo's (only delete-orphans' age differs, since S3 cannot back-date an object), and render
the same S3 settings for Spark and for pyiceberg; and ``scripts/demo_rest.py serve`` starts the real
servers the demo uses (SeaweedFS's S3 gateway, Iceberg's REST catalog server), announces them, and
stops both on SIGTERM, as the demo's exit trap does.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from airflow_tablemgmt.core.storage import pyiceberg_properties
from airflow_tablemgmt.declarations.parse import parse_declarations_text
from airflow_tablemgmt.spark.conf import catalog_conf
from airflow_tablemgmt.spark.launch.artifacts import catalog_needs
from tests.e2e.conftest import BIN, ROOT
from tests.integration.iceberg_session import skip_unless_ci

pytestmark = pytest.mark.e2e

REST_YAML = ROOT / "dags" / "tables.demo.rest.yaml"
LOCAL_YAML = ROOT / "dags" / "tables.demo.yaml"


def _rendered(uri: str = "http://127.0.0.1:8181", endpoint: str = "http://127.0.0.1:8333") -> str:
    return REST_YAML.read_text().replace("__REST_URI__", uri).replace("__S3_ENDPOINT__", endpoint)


@pytest.mark.parametrize("value", ["nessie", "REST", "hadoop"])
def test_an_unknown_demo_catalog_fails_at_once_naming_the_variable_the_value_and_the_choices(
    tmp_path: Path, value: str
) -> None:
    demo_dir = tmp_path / "demo"
    env = {**os.environ, "DEMO_CATALOG": value, "DEMO_DIR": str(demo_dir), "VENV": str(BIN.parent)}
    t0 = time.monotonic()
    res = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"DEMO_CATALOG: '{value}' is not one of: local" in res.stderr and "rest" in res.stderr
    assert res.stdout == ""  # no step started
    assert not demo_dir.exists()  # nothing created, nothing removed
    assert time.monotonic() - t0 < 30


def test_the_rest_demo_declares_the_local_demo_on_a_rest_catalog_over_s3(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded = parse_declarations_text(_rendered(), "tables.demo.rest.yaml")
    assert loaded.errors == []
    [catalog] = loaded.catalogs
    assert catalog.type == "rest" and catalog.properties["uri"] == "http://127.0.0.1:8181"
    # The key pair is a reference the demo exports from the servers it started, never a value in the file.
    assert catalog.properties["s3.access-key-id"] == "env:DEMO_S3_ACCESS_KEY_ID"
    assert catalog.properties["s3.secret-access-key"] == "env:DEMO_S3_SECRET_ACCESS_KEY"

    rest, local = yaml.safe_load(_rendered()), yaml.safe_load(LOCAL_YAML.read_text())
    assert rest["dynamic-tables"] == local["dynamic-tables"]
    [rest_table], [local_table] = rest["tables"], local["tables"]
    rest_actions, local_actions = rest_table.pop("actions"), local_table.pop("actions")
    assert rest_table == local_table
    assert rest_actions.pop("delete-orphans") == {"older-than": "3m", "allow-below-floor": True}
    assert local_actions.pop("delete-orphans") == {"older-than": "3d"}
    assert rest_actions == local_actions

    # One spec, both sides: the Spark job and pyiceberg get the same endpoint, region and keys.
    monkeypatch.setenv("DEMO_S3_ACCESS_KEY_ID", "demo-key")
    monkeypatch.setenv("DEMO_S3_SECRET_ACCESS_KEY", "demo-secret")
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec

    resolved = resolve_catalog_spec(catalog)
    spark = catalog_conf(resolved)
    py = pyiceberg_properties(resolved.warehouse, resolved.properties)
    assert spark["spark.sql.catalog.demo.type"] == "rest"
    for key in ("uri", "s3.endpoint", "s3.access-key-id", "s3.secret-access-key"):
        assert spark[f"spark.sql.catalog.demo.{key}"] == py[key]
    assert spark["spark.sql.catalog.demo.client.region"] == py["s3.region"] == "us-east-1"
    assert py["s3.secret-access-key"] == "demo-secret"
    assert "aws" in catalog_needs(resolved)  # Iceberg's S3FileIO for the job


def _pids_alive(pgids: list[int]) -> list[int]:
    alive = []
    for g in pgids:
        try:
            os.killpg(g, 0)
            alive.append(g)
        except ProcessLookupError:
            pass
    return alive


@pytest.mark.timeout(300)
def test_the_demo_starts_the_rest_catalog_and_s3_and_stops_both_on_sigterm(tmp_path: Path) -> None:
    env_file = tmp_path / "servers.env"
    proc = subprocess.Popen(
        [
            str(BIN / "python"),
            str(ROOT / "scripts" / "demo_rest.py"),
            "serve",
            "--dir",
            str(tmp_path / "servers"),
            "--env-file",
            str(env_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not env_file.exists():
            if proc.poll() is not None:
                out = proc.stdout.read() if proc.stdout else ""
                skip_unless_ci(f"the demo's servers did not start ({proc.returncode}): {out[-2000:]}")
            assert time.monotonic() < deadline, "the servers did not announce themselves in 240 s"
            time.sleep(0.5)
        values = {
            k: shlex.split(v)[0]
            for k, v in (line.split("=", 1) for line in env_file.read_text().splitlines())
        }
        assert env_file.stat().st_mode & 0o077 == 0  # it holds the S3 key pair
        with urllib.request.urlopen(f"{values['DEMO_REST_URI']}/v1/config", timeout=30) as r:
            assert r.status == 200
        host, port = values["DEMO_S3_ENDPOINT"].removeprefix("http://").split(":")
        socket.create_connection((host, int(port)), timeout=10).close()
        pgids = [int(p) for p in values["DEMO_SERVER_PGIDS"].split()]
        assert len(pgids) == 2 and _pids_alive(pgids) == pgids
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stdout.read() if proc.stdout else ""
    deadline = time.monotonic() + 30
    while _pids_alive(pgids) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _pids_alive(pgids) == []
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{values['DEMO_REST_URI']}/v1/config", timeout=5)
