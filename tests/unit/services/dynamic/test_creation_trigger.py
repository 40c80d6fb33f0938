"""Issue 41 item 6: a refresh that creates its table is recorded with trigger CREATION, whether the CLI runs it
here (``tablemgmt dt refresh`` on a CREATING table) or REST queues it (POST .../refresh). A real SQLite store;
the Spark job is the one stand-in (it answers as a creation does)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.services import dynamic
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store

T = "lake.agg.daily"
SOURCE = "lake.sales.orders"
DEFINITION = {
    "identifier": T,
    "query": f"SELECT day, count(*) AS n FROM {SOURCE} GROUP BY day",
    "freshness": "1 DAY",
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    s.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    yield s
    s.dispose()


class CreationJob:
    """What the refresh job answers when it created the table."""

    def __init__(self) -> None:
        self.jobs: list[JobSpec] = []

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.jobs.append(job)
        return JobResult(
            status="SUCCESS",
            summary={
                "refresh_action": "FULL",
                "created": job.options["mode"] == "create",
                "rows_written": 1,
                "source_tables": [SOURCE],
                "source_snapshots": {SOURCE: 1},
                "schema": [{"name": "day", "type": "date"}, {"name": "n", "type": "bigint"}],
            },
        )

    def kill(self) -> None:
        pass


def test_dt_refresh_of_a_creating_table_is_recorded_as_creation(store: Store) -> None:
    dynamic.declare(store, DEFINITION, Owner.CODE)  # a tables.yaml table: CREATING until its first run
    job = CreationJob()
    process = dynamic.refresh_now(store, T, runner=job)
    assert [j.options["mode"] for j in job.jobs] == ["create"]
    assert process.parameters["trigger"] == "CREATION"
    assert process.parameters["is_periodic"] is False
    assert process.summary is not None and process.summary["trigger"] == "CREATION"
    [row] = [dynamic.history_row(p) for p in dynamic.history(store, T)]
    assert row["trigger"] == "CREATION"
    assert store.dynamic.get(T).state == "ACTIVE"

    time.sleep(1.05)  # a manual refresh's instant is now, to the second: the same second is the same process
    again = dynamic.refresh_now(store, T, runner=job)  # the table exists now: a manual refresh
    assert [j.options["mode"] for j in job.jobs] == ["create", "refresh"]
    assert again.parameters["trigger"] == "MANUAL" and again.summary["trigger"] == "MANUAL"


def test_rest_refresh_of_a_creating_table_opens_a_creation(store: Store) -> None:
    dynamic.declare(store, DEFINITION, Owner.CODE)
    asked: list[Mapping[str, Any]] = []

    def trigger(dag_id: str, logical_date: datetime, conf: Mapping[str, Any]) -> str:
        asked.append(conf)
        return "run-1"

    requested = dynamic.refresh(
        store,
        T,
        is_periodic=False,
        schedule_time=None,
        static_partitions=None,
        dynamic_options=None,
        trigger=trigger,
    )
    assert requested.process.parameters["trigger"] == "CREATION"
    assert [c["trigger"] for c in asked] == ["CREATION"]
    assert dynamic.history_row(requested.process)["trigger"] == "CREATION"
