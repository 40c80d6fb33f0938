"""services.run_now.request_run against a real SQLite store: what it checks before asking Airflow for a
run, and that one instant is one process."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_tablemgmt.core.errors import TableNotFound, UnknownAction
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.services.errors import InvalidInput
from airflow_tablemgmt.services.run_now import DuplicateRun, request_run
from airflow_tablemgmt.store import Store

T = "lake.sales.orders"
AT = datetime(2026, 2, 1, 6, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    s.catalogs.upsert(CatalogSpec(name="lake", warehouse="/data/wh"), Owner.STORE)
    s.tables.upsert(
        TableSpec(catalog="lake", namespace="sales", name="orders", actions={"rewrite-files": {}}),
        Owner.STORE,
    )
    yield s
    s.dispose()


class Airflow:
    """Stands in for Airflow's DAG runs: one run per (dag, logical date), like its unique key."""

    def __init__(self) -> None:
        self.runs: dict[tuple[str, datetime], str] = {}

    def __call__(self, dag_id: str, logical_date: datetime) -> str:
        if (dag_id, logical_date) in self.runs:
            raise DuplicateRun(f"instant: DAG {dag_id} already has a run at {logical_date.isoformat()}")
        self.runs[(dag_id, logical_date)] = run_id = f"manual__{logical_date.isoformat()}"
        return run_id


def test_opens_a_pending_process_for_the_triggered_run(store: Store) -> None:
    airflow = Airflow()
    done = request_run(store, T, "rewrite-files", AT.replace(microsecond=123), airflow)
    assert done.dag_id == "tms__lake.sales.orders__rewrite-files"
    assert list(airflow.runs) == [(done.dag_id, AT)]  # whole seconds, as Airflow stores them
    p = store.processes.get(done.process.id)
    assert (p.status, p.instant, p.run_id, p.dag_id) == ("PENDING", AT, done.run_id, done.dag_id)


def test_the_same_instant_twice_is_refused_before_airflow_is_asked(store: Store) -> None:
    airflow = Airflow()
    first = request_run(store, T, "rewrite-files", AT, airflow)
    airflow.runs.clear()  # a second trigger would succeed: the store alone must refuse
    with pytest.raises(DuplicateRun, match=f"process {first.process.id}"):
        request_run(store, T, "rewrite-files", AT, airflow)
    assert airflow.runs == {}
    assert len(store.processes.list(table_id=T)) == 1


def test_a_run_airflow_already_has_opens_no_process(store: Store) -> None:
    airflow = Airflow()
    airflow.runs[("tms__lake.sales.orders__rewrite-files", AT)] = "scheduled"
    with pytest.raises(DuplicateRun):
        request_run(store, T, "rewrite-files", AT, airflow)
    assert store.processes.list(table_id=T) == []


@pytest.mark.parametrize(
    ("table", "action", "instant", "error", "words"),
    [
        (
            T,
            "expire-snapshots",
            AT,
            InvalidInput,
            "not enabled on table lake.sales.orders; enabled: rewrite-files",
        ),
        (T, "no-such-action", AT, UnknownAction, "known actions"),
        ("lake.sales.nope", "rewrite-files", AT, TableNotFound, "lake.sales.nope"),
        (T, "rewrite-files", AT.replace(tzinfo=None), InvalidInput, "has no time zone"),
    ],
)
def test_refusals_name_what_is_wrong(
    store: Store, table: str, action: str, instant: datetime, error: type[Exception], words: str
) -> None:
    airflow = Airflow()
    with pytest.raises(error, match=words):
        request_run(store, table, action, instant, airflow)
    assert airflow.runs == {} and store.processes.list() == []
