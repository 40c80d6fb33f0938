"""Table health read with pyiceberg from a real Iceberg table (a SQL catalog on SQLite, no JVM) and
a real store: file figures, the small-file ratio, delete files, snapshots, the per-action last
success/failure, and the one-minute cache."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.services import health
from airflow_tablemgmt.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    from pyiceberg.catalog.sql import SqlCatalog

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = f"file://{tmp_path / 'wh'}"
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    cat.create_namespace("sales")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    table = cat.create_table("sales.orders", schema=schema)
    for i in range(3):  # three appends: three small data files, three snapshots
        table.append(pa.table({"id": [i * 10 + j for j in range(10)], "v": ["x"] * 10}, schema=schema))
    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    s.catalogs.upsert(
        CatalogSpec(name="lake", type="jdbc", warehouse=warehouse, properties={"uri": uri}), Owner.STORE
    )
    s.tables.upsert(
        TableSpec(catalog="lake", namespace="sales", name="orders", actions={"rewrite-files": {}}),
        Owner.STORE,
    )
    yield s
    s.dispose()


def test_health_counts_files_snapshots_and_small_files(store: Store) -> None:
    h = health.table_health(store, "lake.sales.orders", cache=health._Cache(lambda: 0.0))
    assert h.error is None and h.files is not None
    assert (h.files.data_files, h.files.snapshots, h.files.records) == (3, 3, 30)
    assert h.files.small_data_files == 3 and h.files.small_file_ratio == 1.0
    assert h.files.delete_files == 0 and h.files.data_bytes > 0
    assert h.files.snapshot_id is not None
    assert [a.action for a in h.actions] == ["rewrite-files"]
    assert h.actions[0].last_success is None and h.actions[0].last_failure is None


def test_health_reports_last_success_and_failure_per_action(store: Store) -> None:
    ok, _ = store.processes.open("lake.sales.orders", "rewrite-files", datetime(2026, 1, 1, tzinfo=UTC))
    bad, _ = store.processes.open("lake.sales.orders", "rewrite-files", datetime(2026, 1, 2, tzinfo=UTC))
    for pid, end in ((ok.id, ProcessStatus.SUCCESS), (bad.id, ProcessStatus.FAILED)):
        store.processes.transition(pid, ProcessStatus.SUBMITTED, expected=ProcessStatus.PENDING, attempt=1)
        store.processes.transition(pid, ProcessStatus.RUNNING, expected=ProcessStatus.SUBMITTED, attempt=1)
        store.processes.transition(
            pid, end, expected=ProcessStatus.RUNNING, failure_reason="disk full", attempt=1
        )
    (a,) = health.table_health(store, "lake.sales.orders", cache=health._Cache(lambda: 0.0)).actions
    assert (a.last_success_process, a.last_failure_process) == (ok.id, bad.id)
    assert a.last_failure_reason == "disk full" and a.last_success is not None


def test_figures_are_cached_for_a_minute(store: Store) -> None:
    now = [0.0]
    reads: list[str] = []

    def counting_read(catalog: CatalogSpec, table: TableSpec) -> health.FileStats:
        reads.append(table.id)
        return health.read_file_stats(catalog, table)

    cache = health._Cache(lambda: now[0])
    for t in (0.0, 30.0, 59.9):
        now[0] = t
        health.table_health(store, "lake.sales.orders", cache=cache, read=counting_read)
    assert len(reads) == 1
    now[0] = 60.0
    health.table_health(store, "lake.sales.orders", cache=cache, read=counting_read)
    assert len(reads) == 2


def test_an_unreadable_table_answers_with_the_reason(store: Store) -> None:
    store.tables.upsert(TableSpec(catalog="lake", namespace="sales", name="missing"), Owner.STORE)
    h = health.table_health(store, "lake.sales.missing", cache=health._Cache(lambda: 0.0))
    assert h.files is None and h.error is not None and "lake.sales.missing" in h.error
