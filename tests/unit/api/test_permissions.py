"""``GET /tablemgmt/v1/permissions`` refuses what is not a list of DAG ids, naming the field, before it asks
Airflow's auth manager (the page's disabled buttons: tests/e2e/test_ui_browser.py asks it as admin and viewer
of a real api-server)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.fixture(scope="module")
def client() -> TestClient:
    from airflow.api_fastapi.core_api.security import get_user

    from airflow_tablemgmt.api.app import create_api_app

    app = create_api_app()
    app.dependency_overrides[get_user] = lambda: object()
    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(
    "query, says",
    [
        ("", "Field required"),
        ("?dag_id=", "'' is not a DAG id"),
        ("?dag_id=" + "x" * 251, "is not a DAG id (1 to 250 printable characters)"),
        ("?dag_id=a%00b", "is not a DAG id"),
        ("?" + "&".join(["dag_id=a"] * 101), "give 1 to 100 DAG ids, got 101"),
    ],
)
def test_what_is_not_a_list_of_dag_ids_is_a_422_naming_the_field(
    client: TestClient, query: str, says: str
) -> None:
    r = client.get("/permissions" + query)
    assert r.status_code == 422 and r.json()["field"] == "dag_id" and says in r.json()["detail"], r.text
