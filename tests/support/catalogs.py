"""Helpers for tests on real catalog servers: write tables with pyiceberg through the same (resolved)
settings the product renders, read their content back independently, and run one action as a real
spark-submit through ``SparkJobHook``."""

from __future__ import annotations

import json
from typing import Any

from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.storage import pyiceberg_properties
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
from airflow_tablemgmt.hooks.spark_job import SparkJobHook
from tests.support.servers import REGION, SeaweedS3

#: The S3 key pair as references: the test exports these variables into the workers' environment.
S3_REFS = {"s3.access-key-id": "env:TMS_TEST_S3_KEY_ID", "s3.secret-access-key": "env:TMS_TEST_S3_SECRET"}


def s3_properties(s3: SeaweedS3, endpoint: str | None = None) -> dict[str, str]:
    return {"s3.endpoint": endpoint or s3.endpoint, "client.region": REGION, **S3_REFS}


def writer(catalog: CatalogSpec) -> Any:
    """pyiceberg's catalog for writing test tables, with the same (resolved) settings the product renders."""
    from pyiceberg.catalog import load_catalog

    from airflow_tablemgmt.metadata.iceberg import sqlalchemy_url

    resolved = resolve_catalog_spec(catalog)
    props = pyiceberg_properties(resolved.warehouse, resolved.properties)
    if catalog.type == CatalogType.JDBC:
        props["uri"] = sqlalchemy_url(props["uri"], props.pop("jdbc.user"), props.pop("jdbc.password"))
        return load_catalog(catalog.name, type="sql", warehouse=resolved.warehouse, **props)
    if catalog.type == CatalogType.HIVE:
        return load_catalog(catalog.name, type="hive", warehouse=resolved.warehouse, **props)
    return load_catalog(catalog.name, type="rest", **props)


def seed(
    catalog: CatalogSpec,
    name: str,
    appends: int = 6,
    *,
    namespace: str = "db",
    properties: dict[str, str] | None = None,
) -> TableIdentifier:
    """A table of ``appends`` small files in ``namespace`` (``a.b``: a namespace of two levels, each created)."""
    import pyarrow as pa

    cat = writer(catalog)
    levels = tuple(namespace.split("."))
    for depth in range(1, len(levels) + 1):
        try:
            cat.create_namespace(levels[:depth])
        except Exception:  # noqa: BLE001 - it exists
            pass
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    table = cat.create_table((*levels, name), schema=schema, properties=properties or {})
    for i in range(appends):
        table.append(pa.table({"id": list(range(i * 10, i * 10 + 10)), "v": [f"v{i}"] * 10}))
    return TableIdentifier(catalog.name, namespace, name)


def content(catalog: CatalogSpec, table: TableIdentifier) -> tuple[int, int, int, int]:
    """(rows, sum of ids, data files, snapshots), read with pyiceberg."""
    t = writer(catalog).load_table((*table.namespace_parts, table.name))
    data = t.scan().to_arrow()
    files = len(list(t.scan().plan_files()))
    return data.num_rows, sum(data.column("id").to_pylist()), files, len(t.metadata.snapshots)


def run(catalog: CatalogSpec, table: TableIdentifier, action: str, raw: dict[str, Any]) -> Any:
    options = ACTIONS.get(action).settings(raw).options()
    job = JobSpec(
        table={"catalog": table.catalog, "namespace": table.namespace, "name": table.name},
        catalog=catalog.model_dump(mode="json"),
        action=action,
        options=options,
        process_id=1,
    )
    result = SparkJobHook().submit(job)
    assert result.ok, result.error
    # the job's phases (session, table load, metrics, procedure, JVM exit...), for `pytest -s` readers
    print(f"phases {catalog.type} {action}: {json.dumps(result.summary.get('timings'))}")
    return result


def submit(catalog: CatalogSpec, table: TableIdentifier, action: str, raw: dict[str, Any]) -> Any:
    """As :func:`run`, without asserting success: the job's result as the lifecycle would see it."""
    options = ACTIONS.get(action).settings(raw).options()
    job = JobSpec(
        table={"catalog": table.catalog, "namespace": table.namespace, "name": table.name},
        catalog=catalog.model_dump(mode="json"),
        action=action,
        options=options,
        process_id=1,
    )
    return SparkJobHook().submit(job)


def table_state(catalog: CatalogSpec, table_id: str) -> Any:
    """The table as ``tests/e2e/iceberg_reads.read_state`` reads a local one (data files, records, the
    checksum of every row, current snapshot), loaded through the catalog server instead of a path."""
    import hashlib

    from tests.e2e.iceberg_reads import TableState

    t = TableIdentifier.parse(table_id)
    table = writer(catalog).load_table((*t.namespace_parts, t.name))
    files = list(table.scan().plan_files())
    arrow = table.scan().to_arrow().sort_by([("id", "ascending")])
    digest = hashlib.sha256()
    for batch in arrow.to_batches(max_chunksize=50_000):
        for col in batch.columns:
            digest.update(str(col.to_pylist()).encode())
    snap = table.current_snapshot()
    return TableState(len(files), arrow.num_rows, digest.hexdigest(), snap.snapshot_id if snap else None)


def scan(catalog: CatalogSpec, table_id: str) -> Any:
    """Every row of ``table_id`` (a pyarrow table), read through the catalog server."""
    t = TableIdentifier.parse(table_id)
    return writer(catalog).load_table((*t.namespace_parts, t.name)).scan().to_arrow()
