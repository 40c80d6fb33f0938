"""The discovery DAG end to end: the project's DAG file parsed by Airflow's DagBag builds
``tms__discover__fleet`` for a stored policy, on the policy's discovery interval; ``dag.test()`` runs its pass
over a real pyiceberg SQL catalog, enrolling its tables; a table created afterwards is enrolled by the next
run (one interval later), and the DAG file then builds the policy's planned (policy, action) DAG that runs
the enrolled tables (ADR 0004), not DAGs per enrolled table."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.policies import parse_policy
from airflow_tablemgmt.core.tables import CatalogSpec, Owner

pytestmark = pytest.mark.e2e

SCHEMA = pa.schema([("id", pa.int64())])
DAG_ID = "tms__discover__fleet"


def _write(client: Any, ident: tuple[str, ...]) -> None:
    client.create_table(ident, schema=SCHEMA).append(pa.table({"id": [1]}, schema=SCHEMA))


def test_a_table_created_afterwards_is_enrolled_by_the_next_run(
    airflow_db: str, dags_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.dag_processing.dagbag import DagBag
    from pyiceberg.catalog.sql import SqlCatalog

    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.policies import PolicyRepository

    db, warehouse = tmp_path / "catalog.db", tmp_path / "warehouse"
    warehouse.mkdir()
    client = SqlCatalog("lake", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    client.create_namespace(("sales",))
    client.create_namespace(("sales", "eu"))
    _write(client, ("sales", "eu", "orders"))
    url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("TABLEMGMT_STORE_URL", url)
    store = Store.for_url(url)
    store.catalogs.upsert(
        CatalogSpec(
            name="lake", type="jdbc", warehouse=f"file://{warehouse}", properties={"uri": f"jdbc:sqlite:{db}"}
        ),
        Owner.STORE,
    )
    policy = {
        "name": "fleet",
        "match": {"catalog": "lake", "format": "iceberg"},
        "actions": {"expire-snapshots": {}},
        "discovery-interval": "10m",
    }
    PolicyRepository.of(store).upsert(parse_policy(policy), Owner.STORE)

    bag = DagBag(dag_folder=str(dags_folder))
    dag = bag.get_dag(DAG_ID)
    assert dag is not None, (bag.import_errors, sorted(bag.dag_ids))
    assert dag.timetable.delta == timedelta(minutes=10)  # the policy's discovery interval
    dag.test()
    assert {r.spec.id: r.policy for r in store.tables.list()} == {"lake.sales.eu.orders": "fleet"}

    _write(client, ("sales", "returns"))  # created afterwards
    dag.test()  # the next run
    assert {r.spec.id: r.policy for r in store.tables.list()} == {
        "lake.sales.eu.orders": "fleet",
        "lake.sales.returns": "fleet",
    }
    from airflow_tablemgmt.services.enrolment import enrolment_records

    assert sorted((r.table_id, r.change) for r in enrolment_records(store)) == [
        ("lake.sales.eu.orders", "enrolled"),
        ("lake.sales.returns", "enrolled"),
    ]
    again = DagBag(dag_folder=str(dags_folder))
    # an enrolled table is run by its policy's planned DAG (ADR 0004), not by DAGs of its own
    assert "tms__plan__fleet__expire-snapshots" in again.dag_ids, again.import_errors
    assert "tms__lake.sales.returns__expire-snapshots" not in again.dag_ids
    store.dispose()
    client.engine.dispose()
