"""Maintenance on the catalogs teams run, over object storage, against real servers started here.

Backends: **REST + S3** (Iceberg's reference REST catalog server, its warehouse on SeaweedFS's S3 gateway)
and **JDBC + S3** (Iceberg's JdbcCatalog on the local PostgreSQL, with PostgreSQL's JDBC driver from the
artifact resolver; the warehouse on the same S3 gateway). Tables are written by pyiceberg; every job is a
real ``spark-submit`` through ``SparkJobHook``, which takes the catalog's secrets from references
(``env:``) and its jars (Iceberg, its AWS bundle, the JDBC driver) from the resolver. Each effect is read
back independently with pyiceberg (rows and checksum, data files, snapshots, files on S3) and through the
product's own reader (the gate and watcher's snapshot state).

CI runs rewrite-files on each backend; ``TABLEMGMT_CATALOG_MATRIX=1`` runs every action on both
(``-m catalog_matrix`` selects only those).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType, parse_catalog
from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
from airflow_tablemgmt.metadata.iceberg import SnapshotReader
from tests.integration.catalogs.conftest import postgres_database
from tests.support.catalogs import content, run, s3_properties, seed, writer
from tests.support.servers import ACCESS_KEY, REGION, SECRET_KEY, IcebergRestServer, SeaweedS3

pytestmark = [pytest.mark.integration]
MATRIX = os.environ.get("TABLEMGMT_CATALOG_MATRIX") == "1"


@pytest.fixture(scope="module", autouse=True)
def _secrets_in_the_workers_environment() -> Iterator[None]:
    saved = {
        k: os.environ.get(k) for k in ("TMS_TEST_S3_KEY_ID", "TMS_TEST_S3_SECRET", "TMS_TEST_PG_PASSWORD")
    }
    os.environ.update(
        TMS_TEST_S3_KEY_ID=ACCESS_KEY, TMS_TEST_S3_SECRET=SECRET_KEY, TMS_TEST_PG_PASSWORD="unused"
    )
    os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory, s3: SeaweedS3) -> Iterator[IcebergRestServer]:
    server = IcebergRestServer(tmp_path_factory.mktemp("rest"), s3).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def jdbc_database() -> Iterator[str]:
    with postgres_database("tms_jdbc") as name:
        yield name


@pytest.fixture(scope="module", params=["rest-s3", "jdbc-s3"])
def backend(request: pytest.FixtureRequest, s3: SeaweedS3) -> CatalogSpec:
    if request.param == "rest-s3":
        rest: IcebergRestServer = request.getfixturevalue("rest")
        return CatalogSpec(
            name="restlake", type=CatalogType.REST, properties={"uri": rest.uri, **s3_properties(s3)}
        )
    database = request.getfixturevalue("jdbc_database")
    return CatalogSpec(
        name="jdbclake",
        type=CatalogType.JDBC,
        warehouse=f"s3://{s3.bucket}/jdbc",
        properties={
            "uri": f"jdbc:postgresql://127.0.0.1:5432/{database}",
            "jdbc.user": "postgres",
            "jdbc.password": "env:TMS_TEST_PG_PASSWORD",
            **s3_properties(s3),
        },
    )


@pytest.mark.timeout(900)
def test_compaction_on_the_catalog_over_s3(backend: CatalogSpec, tmp_path: Path) -> None:
    # On the REST catalog the table sits in a namespace of two levels (a.b), as Nessie and Polaris nest them.
    namespace = "a.b" if backend.type == CatalogType.REST else "db"
    table = seed(backend, f"compact_{uuid.uuid4().hex[:6]}", namespace=namespace)
    assert str(table).count(".") == (3 if backend.type == CatalogType.REST else 2)
    rows, checksum, files, _ = content(backend, table)
    assert files == 6
    reader = SnapshotReader(resolve_catalog_spec(backend))
    before = reader.current_state(table)
    assert before.snapshot_id is not None

    result = run(backend, table, "rewrite-files", {"min-input-files": 2})

    assert result.summary["before"]["data_files"] == 6 and result.summary["after"]["data_files"] == 1
    assert content(backend, table)[:3] == (rows, checksum, 1)
    # The product's reader (gate, watcher) sees the new snapshot, and that it changed no data.
    reader.forget()
    after = reader.current_state(table)
    assert after.snapshot_id == result.summary["after"]["current_snapshot_id"] != before.snapshot_id
    assert not after.data_changed_since(before.snapshot_id)
    _the_api_reads_the_table_as_pyiceberg_does(backend, table, tmp_path)


def _the_api_reads_the_table_as_pyiceberg_does(backend: CatalogSpec, table: Any, tmp_path: Path) -> None:
    """Health and the table page's reads (the REST API the page calls) on the catalog over S3, its secrets
    as references: the figures are pyiceberg's own reading of the compacted table."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_tablemgmt.api.app import create_api_app
    from airflow_tablemgmt.api.deps import get_store
    from airflow_tablemgmt.core.tables import Owner, TableSpec
    from airflow_tablemgmt.store import Store

    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    store.catalogs.upsert(backend, Owner.STORE)
    store.tables.upsert(
        TableSpec(
            catalog=backend.name, namespace=table.namespace, name=table.name, actions={"rewrite-files": {}}
        ),
        Owner.STORE,
    )
    app = create_api_app()
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[get_user] = lambda: object()
    api, tid = TestClient(app), str(table)
    loaded = writer(backend).load_table((*table.namespace_parts, table.name))
    try:
        health = api.get(f"/tables/{tid}/health")
        assert health.status_code == 200, health.text
        h = health.json()
        assert h["error"] is None and h["files"]["data_files"] == 1, h
        assert h["files"]["data_bytes"] == sum(
            r["file_size_in_bytes"] for r in loaded.inspect.files().to_pylist()
        )
        files = api.get(f"/tables/{tid}/files").json()
        assert files["totals"]["data_files"] == 1
        details = api.get(f"/tables/{tid}/details").json()
        assert [c["name"] for c in details["columns"]] == [f.name for f in loaded.schema().fields]
        snapshots = api.get(f"/tables/{tid}/snapshots").json()
        assert len(snapshots["snapshots"]) == len(loaded.metadata.snapshots)
        assert SECRET_KEY not in health.text + json.dumps(details)
    finally:
        store.dispose()


@pytest.mark.catalog_matrix
@pytest.mark.timeout(1800)
@pytest.mark.skipif(not MATRIX, reason="the full catalog matrix runs with TABLEMGMT_CATALOG_MATRIX=1")
def test_every_action_on_the_catalog_over_s3(backend: CatalogSpec, s3: SeaweedS3) -> None:
    table = seed(backend, f"matrix_{uuid.uuid4().hex[:6]}")
    rows, checksum, _, snapshots = content(backend, table)

    run(backend, table, "rewrite-manifests", {})
    run(backend, table, "compute-stats", {})
    run(backend, table, "rewrite-files", {"min-input-files": 2})
    assert content(backend, table)[:3] == (rows, checksum, 1)

    time.sleep(2)
    expired = run(
        backend, table, "expire-snapshots", {"older-than": "1s", "retain-last": 1, "allow-below-floor": True}
    )
    assert content(backend, table)[:2] == (rows, checksum) and content(backend, table)[3] < snapshots + 3
    assert expired.summary

    location = writer(backend).load_table((*table.namespace_parts, table.name)).metadata.location
    prefix = location.removeprefix("s3://")
    fs = s3.filesystem()
    old, new = f"{prefix}/data/orphan-old.parquet", f"{prefix}/data/orphan-new.parquet"
    with fs.open_output_stream(old) as f:
        f.write(b"orphan")
    # The cutoff is taken when the job starts (Spark's start-up after the second file): the first file is
    # older than it, the second younger, whatever the start-up costs below 45 s.
    time.sleep(60)
    with fs.open_output_stream(new) as f:
        f.write(b"orphan")
    written = fs.get_file_info(new).mtime
    written = written if written.tzinfo else written.replace(tzinfo=UTC)
    result = run(backend, table, "delete-orphans", {"older-than": "45s", "allow-below-floor": True})
    import pyarrow.fs as pafs

    cutoff = datetime.fromisoformat(result.summary["older_than"])
    assert fs.get_file_info(old).type == pafs.FileType.NotFound
    # Kept when younger than the job's cutoff (Spark's start-up took under 45 s), deleted otherwise.
    expected = pafs.FileType.File if written > cutoff else pafs.FileType.NotFound
    assert fs.get_file_info(new).type == expected, (written, cutoff)
    assert content(backend, table)[:2] == (rows, checksum)


@pytest.mark.timeout(300)
def test_gc_disabled_declines_expire_snapshots_and_delete_orphans_before_any_jvm(
    rest: IcebergRestServer, s3: SeaweedS3, tmp_path: Path
) -> None:
    """A table created with ``gc.enabled=false`` (Project Nessie's default) on the REST catalog: both
    file-deleting actions are recorded as skipped processes naming the property, without a Spark job (no
    application id on the row). Before, each started Spark and failed with Iceberg's "Cannot expire
    snapshots: GC is disabled"."""
    from airflow_tablemgmt.core.process import ProcessStatus
    from airflow_tablemgmt.core.tables import Owner, TableSpec
    from airflow_tablemgmt.services.processes import run_now
    from airflow_tablemgmt.store import Store

    catalog = CatalogSpec(
        name="restgc", type=CatalogType.REST, properties={"uri": rest.uri, **s3_properties(s3)}
    )
    table = seed(
        catalog,
        f"nogc_{uuid.uuid4().hex[:6]}",
        appends=2,
        namespace="a.b",
        properties={"gc.enabled": "false"},
    )
    snapshots = content(catalog, table)[3]
    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    try:
        store.catalogs.upsert(catalog, Owner.STORE)
        spec = TableSpec(
            catalog=catalog.name,
            namespace=table.namespace,
            name=table.name,
            actions={"expire-snapshots": {}, "delete-orphans": {}},
        )
        store.tables.upsert(spec, Owner.STORE)
        for action in ("expire-snapshots", "delete-orphans"):
            result = run_now(store, str(table), action, datetime.now(UTC).replace(microsecond=0))
            p = store.processes.get(result.process.id)
            assert p.status == ProcessStatus.SUCCESS and p.external_id is None, p
            assert p.summary["skipped"] is True and p.summary["declined"] is True, p.summary
            assert "gc.enabled is 'false'" in p.summary["reason"] and action in p.summary["reason"]
    finally:
        store.dispose()
    assert content(catalog, table)[3] == snapshots  # nothing expired


def test_a_hadoop_catalog_on_an_object_store_needs_an_explicit_opt_in(tmp_path: Path) -> None:
    with pytest.raises(InvalidDeclaration, match="allow-unsafe-commits"):
        parse_catalog({"name": "h", "type": "hadoop", "warehouse": "s3://bucket/wh"})
    ok = parse_catalog(
        {"name": "h", "warehouse": "s3://bucket/wh", "properties": {"allow-unsafe-commits": "true"}}
    )
    assert ok.warehouse == "s3://bucket/wh"
    assert parse_catalog({"name": "h", "warehouse": str(tmp_path)}).warehouse == str(tmp_path)
    # A row stored before the rule still loads (its jobs run as before); writing it again needs the opt-in.
    assert CatalogSpec(name="h", warehouse="s3://bucket/wh").warehouse == "s3://bucket/wh"


@pytest.fixture
def rest_from_connection(
    rest: IcebergRestServer, s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch
) -> CatalogSpec:
    """The REST catalog declared only by an Airflow ``iceberg`` connection: its host is the server's
    URI and its extra carries the S3 settings (the key pair as it would sit in the connection store)."""
    extra = {
        "s3.endpoint": s3.endpoint,
        "client.region": REGION,
        "s3.access-key-id": ACCESS_KEY,
        "s3.secret-access-key": SECRET_KEY,
    }
    monkeypatch.setenv(
        "AIRFLOW_CONN_TMS_REST_ICEBERG",
        json.dumps({"conn_type": "iceberg", "host": rest.uri, "extra": extra}),
    )
    return parse_catalog(
        {"name": "restconn", "type": "rest", "properties": {"airflow-connection": "tms_rest_iceberg"}}
    )


@pytest.mark.timeout(300)
def test_a_catalog_declared_by_an_iceberg_connection_reaches_the_real_server(
    rest_from_connection: CatalogSpec,
) -> None:
    table = seed(rest_from_connection, f"conn_{uuid.uuid4().hex[:6]}", appends=2)
    reader = SnapshotReader(resolve_catalog_spec(rest_from_connection))
    state = reader.current_state(table)
    assert state.snapshot_id is not None
    assert content(rest_from_connection, table)[:3] == (20, sum(range(20)), 2)


@pytest.mark.catalog_matrix
@pytest.mark.timeout(900)
@pytest.mark.skipif(not MATRIX, reason="the full catalog matrix runs with TABLEMGMT_CATALOG_MATRIX=1")
def test_compaction_on_a_catalog_declared_by_an_iceberg_connection(rest_from_connection: CatalogSpec) -> None:
    table = seed(rest_from_connection, f"connc_{uuid.uuid4().hex[:6]}", appends=4)
    rows, checksum, files, _ = content(rest_from_connection, table)
    result = run(rest_from_connection, table, "rewrite-files", {"min-input-files": 2})
    assert result.summary["before"]["data_files"] == files == 4
    assert content(rest_from_connection, table)[:3] == (rows, checksum, 1)
