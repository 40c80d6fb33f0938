"""Which snapshots an expiry keeps for the dynamic tables reading a table (``lifecycle/retention.py``), and
how they reach the Iceberg job's options, on a real SQLite store. The job keeping them on real Spark:
tests/integration/spark/test_spark_snapshots.py."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.dynamic.spec import DynamicState, DynamicTableSpec
from airflow_tablemgmt.core.factory import TriggerContext
from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.formats.iceberg.actions import KEEP_SNAPSHOTS_OPTION
from airflow_tablemgmt.formats.iceberg.factory import IcebergProcessFactory
from airflow_tablemgmt.lifecycle.retention import snapshots_to_keep
from airflow_tablemgmt.store import Store

SOURCE = "lake.sales.orders"
T0 = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    s.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    yield s
    s.dispose()


def _dynamic(store: Store, name: str, *, mode: str = "AUTO", state: str = DynamicState.ACTIVE) -> str:
    spec = DynamicTableSpec.model_validate(
        {
            "identifier": f"lake.agg.{name}",
            "query": f"SELECT day, count(*) AS n FROM {SOURCE} GROUP BY day",
            "freshness": "1 DAY",
            "refresh-mode": mode,
        }
    )
    store.dynamic.upsert(spec, state=state)
    return spec.id


def _refreshed(store: Store, table_id: str, hours: int, summary: dict[str, Any]) -> None:
    process, _ = store.processes.open(table_id, "refresh", T0 + timedelta(hours=hours))
    for to, expected in ((S.SUBMITTED, S.PENDING), (S.RUNNING, S.SUBMITTED)):
        process = store.processes.transition(process.id, to, expected=expected, attempt=process.attempt)
    store.processes.transition(
        process.id, S.SUCCESS, expected=S.RUNNING, attempt=process.attempt, summary=summary
    )


def test_only_active_incremental_readers_hold_a_snapshot_back(store: Store) -> None:
    assert snapshots_to_keep(store, SOURCE) == {}
    daily = _dynamic(store, "daily")
    _refreshed(store, daily, 1, {"incremental_base": True, "source_snapshots": {SOURCE: 11}})
    _refreshed(store, daily, 2, {"incremental_base": True, "source_snapshots": {SOURCE: 12}})
    full = _dynamic(store, "full", mode="FULL")
    _refreshed(store, full, 1, {"incremental_base": True, "source_snapshots": {SOURCE: 5}})
    suspended = _dynamic(store, "suspended", state=DynamicState.SUSPENDED)
    _refreshed(store, suspended, 1, {"incremental_base": True, "source_snapshots": {SOURCE: 6}})
    partition = _dynamic(store, "partition")
    _refreshed(store, partition, 1, {"incremental_base": False, "source_snapshots": {SOURCE: 7}})
    _dynamic(store, "never_refreshed")

    # The last refresh to finish counts: its snapshot is where the next one starts.
    assert snapshots_to_keep(store, SOURCE) == {daily: 12}
    assert snapshots_to_keep(store, "lake.sales.customers") == {}


def test_the_iceberg_expiry_is_told_what_to_keep_and_nothing_else_is(store: Store) -> None:
    factory = IcebergProcessFactory()
    table = TableSpec.model_validate(
        {"catalog": "lake", "namespace": "sales", "name": "orders", "actions": {"expire-snapshots": {}}}
    )
    catalog = store.catalogs.get("lake")
    told = TriggerContext(instant=T0, catalog=catalog, retain_snapshots={"lake.agg.daily": 12})

    options = factory._run_options(table, "expire-snapshots", {"older-than": "5d"}, told)
    assert options == {"older-than": "5d", KEEP_SNAPSHOTS_OPTION: {"lake.agg.daily": 12}}
    untold = TriggerContext(instant=T0, catalog=catalog)
    assert factory._run_options(table, "expire-snapshots", {"older-than": "5d"}, untold) == {
        "older-than": "5d"
    }
    assert KEEP_SNAPSHOTS_OPTION not in factory._run_options(table, "rewrite-files", {}, told)
