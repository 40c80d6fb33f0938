"""POST /dynamic-tables stores the definition and queues the creation on a worker: the api-server runs
no Spark (issue 22). The Airflow stand-in, store and client are test_dynamic_routes' fixtures."""

from __future__ import annotations

from fastapi.testclient import TestClient

from airflow_tablemgmt.store import Store
from tests.unit.api import test_dynamic_routes as _routes
from tests.unit.api.test_dynamic_routes import DEFINITION, Airflow

airflow, client, store = _routes.airflow, _routes.client, _routes.store  # its fixtures

NEW = "lake.agg.created"
NEW_DAG = f"tms__{NEW}__refresh"
BODY = {**DEFINITION, "name": "created"}


def test_create_answers_202_and_triggers_the_creation_run(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    airflow.paused[NEW_DAG] = True  # Airflow knows the DAG (dropped before, so paused)
    r = client.post("/dynamic-tables", json=BODY)
    assert r.status_code == 202, r.text
    out = r.json()
    assert (out["state"], out["creation"], out["table"]) == ("CREATING", "triggered", NEW)
    process = store.processes.get(out["process_id"])
    assert (process.status, process.parameters["trigger"]) == ("PENDING", "CREATION")
    ((key, (run_id, conf)),) = [(k, v) for k, v in airflow.runs.items() if k[0] == NEW_DAG]
    assert out["dag_run_id"] == run_id and conf["trigger"] == "CREATION"
    assert airflow.paused[NEW_DAG] is False  # a paused DAG's run would wait forever
    assert store.dynamic.get(NEW).state == "CREATING"


def test_create_before_airflow_has_the_dag_stores_it_and_waits(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    r = client.post("/dynamic-tables", json=BODY)
    assert r.status_code == 202, r.text
    assert (r.json()["creation"], r.json()["process_id"]) == ("waiting for the DAG", None)
    assert store.dynamic.get(NEW).state == "CREATING" and store.processes.list(table_id=NEW) == []
    again = client.post("/dynamic-tables", json=BODY)
    assert again.status_code == 409, again.text


def test_a_new_query_through_rest_is_422_and_changes_nothing(client: TestClient, store: Store) -> None:
    table = f"{DEFINITION['catalog']}.{DEFINITION['namespace']}.{DEFINITION['name']}"
    before = store.dynamic.get(table).definition.query
    r = client.patch(f"/dynamic-tables/{table}", json={"query": "SELECT 1 AS day"})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "query" and "api-server" in r.json()["detail"]
    assert store.dynamic.get(table).definition.query == before


def test_a_dynamic_option_that_widens_the_session_is_refused_before_any_run(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    table = f"{DEFINITION['catalog']}.{DEFINITION['namespace']}.{DEFINITION['name']}"
    body = {"isPeriodic": False, "dynamicOptions": {"spark.sql.catalog.evil": "org.example.Evil"}}
    r = client.post(f"/dynamic-tables/{table}/refresh", json=body)
    assert r.status_code == 400, r.text
    assert "spark.sql.catalog" in r.json()["detail"] and "registered catalogs" in r.json()["detail"]
    assert airflow.runs == {} and store.processes.list(table_id=table) == []
    ok = client.post(
        f"/dynamic-tables/{table}/refresh", json={"dynamicOptions": {"spark.sql.shuffle.partitions": "4"}}
    )
    assert ok.status_code == 200, ok.text
