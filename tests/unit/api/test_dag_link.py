"""The DAG page's "Table maintenance" tab (``/tablemgmt/dag-link/{dag_id}``): a maintenance DAG opens its
table at that action, a refresh DAG its dynamic table, any other DAG a page saying it has no table page."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from airflow_tablemgmt.api.app import create_app


@pytest.mark.parametrize(
    ("dag_id", "view"),
    [
        (
            "tms__lake.db.orders__rewrite-files",
            "#/tables/lake.db.orders?tab=maintenance&action=rewrite-files",
        ),
        ("tms__lake.db.daily__refresh", "#/dynamic/lake.db.daily"),
        ("my_etl", "#/dags/my_etl"),
        ("tms__not-a-table", "#/dags/tms__not-a-table"),
    ],
)
def test_the_dag_tab_opens_the_view_of_that_dag(dag_id: str, view: str) -> None:
    r = TestClient(create_app()).get(f"/dag-link/{dag_id}", follow_redirects=False)
    assert r.status_code == 307
    assert r.headers["location"] == f"/tablemgmt/ui/{view}"
