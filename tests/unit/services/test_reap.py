"""``tablemgmt reap`` and ``POST /processes/reap``: one service closes the rows whose worker is gone, and
the CLI's commands that start work reap first (issue 23, item 7). Real SQLite store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Table, update

from airflow_tablemgmt.cli import main
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.models import ProcessRow

S = ProcessStatus
TABLE = "lake.db.t"
_T = cast(Table, ProcessRow.__table__)


@pytest.fixture
def url(tmp_path) -> str:  # type: ignore[no-untyped-def]
    return f"sqlite:///{tmp_path / 'tms.db'}"


def stuck_rows(store: Store) -> tuple[int, int]:
    """One RUNNING row silent for 10 minutes, one live (just beaten)."""
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/tmp/wh"), Owner.STORE)
    store.tables.upsert(
        TableSpec.model_validate(
            {"catalog": "lake", "namespace": "db", "name": "t", "actions": {"rewrite-files": {}}}
        ),
        Owner.STORE,
    )
    ids = []
    for h in (0, 1):
        p, _ = store.processes.open(TABLE, "rewrite-files", datetime(2026, 1, 1, h, tzinfo=UTC))
        p = store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
        p = store.processes.transition(p.id, S.RUNNING, expected=S.SUBMITTED, attempt=1)
        ids.append(p.id)
    old = store.processes.now() - timedelta(minutes=10)
    with store.engine.begin() as conn:
        conn.execute(update(_T).where(_T.c.id == ids[0]).values(heartbeat_at=old))
    return ids[0], ids[1]


def test_tablemgmt_reap_closes_only_the_lost_rows(url, capsys):
    store = Store(url)
    lost, live = stuck_rows(store)
    assert main(["--store-url", url, "reap"]) == 0
    out = capsys.readouterr().out
    assert f"process {lost} ({TABLE} rewrite-files at 2026-01-01T00:00:00+00:00): RUNNING -> FAILED" in out
    assert "1 process(es) reaped" in out
    assert store.processes.get(lost).status == S.FAILED
    assert store.processes.get(live).status == S.RUNNING
    assert main(["--store-url", url, "reap", "--json"]) == 0
    assert capsys.readouterr().out.strip() == "[]"


def test_a_cli_run_reaps_first_even_when_it_then_fails(url, capsys):
    store = Store(url)
    lost, live = stuck_rows(store)
    assert main(["--store-url", url, "run", "lake.db.missing", "rewrite-files"]) == 2  # unknown table
    assert store.processes.get(lost).status == S.FAILED
    assert store.processes.get(live).status == S.RUNNING


def test_rest_reap_uses_the_same_service_and_needs_run_permission_on_every_dag(url, monkeypatch):
    from airflow.api_fastapi.core_api.security import get_user

    from airflow_tablemgmt.api import processes as routes
    from airflow_tablemgmt.api.deps import get_store
    from airflow_tablemgmt.api.errors import install_error_handlers

    store = Store(url)
    lost, live = stuck_rows(store)
    checks: list[tuple[str, list[str | None], bool]] = []
    monkeypatch.setattr(
        routes, "authorize_dags", lambda _r, _u, m, dags, run=False: checks.append((m, list(dags), run))
    )
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(routes.router)
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[get_user] = lambda: None
    with TestClient(app) as client:
        answer = client.post("/processes/reap", params={"stale_after_s": 120})
        assert answer.status_code == 200, answer.text
        assert [r["process_id"] for r in answer.json()] == [lost]
        assert answer.json()[0]["was"] == "RUNNING" and answer.json()[0]["status"] == "FAILED"
        assert client.post("/processes/reap", params={"stale_after_s": 0}).status_code in (400, 422)
    assert checks[0] == ("PUT", [None], True)
    assert store.processes.get(live).status == S.RUNNING
