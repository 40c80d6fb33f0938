"""The overview's fleet section (``services/fleet.py``, ``store/fleet.py``) on SQLite and PostgreSQL, through
the real store and the real REST app: a policy with the tables it enrolled and retired, runs the health gate
skipped (the gate's own summary) with their reasons, and cost per day per policy from the processes' cost;
what is older than the window, a declared table's cost and a job that ran are left out where they must be."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from airflow_tablemgmt.core.policies import parse_policy
from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.metadata.health import Decision
from airflow_tablemgmt.services import fleet as fleet_service
from airflow_tablemgmt.services import overview
from airflow_tablemgmt.services.fleet import DAYS, fleet
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.enrolment import EnrolmentRepository
from airflow_tablemgmt.store.models import EnrolmentRow
from airflow_tablemgmt.store.policies import PolicyRepository

pytestmark = pytest.mark.integration

ORDERS, REFUNDS, GONE, DECLARED = (
    "lake.sales.orders",
    "lake.sales.refunds",
    "lake.sales.gone",
    "lake.ops.logs",
)
GiB = 1 << 30


def _spec(name: str, namespace: str = "sales") -> TableSpec:
    return TableSpec(catalog="lake", namespace=namespace, name=name, actions={"rewrite-files": {}})


def _finish(
    store: Store, table: str, action: str, instant: datetime, summary: dict[str, Any], **kw: Any
) -> int:
    p, _ = store.processes.open(table, action, instant)
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    store.processes.transition(p.id, S.RUNNING, expected=S.SUBMITTED, attempt=1)
    store.processes.transition(p.id, S.SUCCESS, expected=S.RUNNING, attempt=1, summary=summary, **kw)
    return p.id


def _skip(files: int) -> dict[str, Any]:
    """The health gate's summary of a skipped rewrite-files, as ``FormatFactory.health_gate`` records it."""
    figures = {"small_files": files, "thresholds": {"min-small-files": 5}}
    return Decision(
        "rewrite-files", False, f"{files} small files, fewer than min-small-files 5", figures, 96
    ).summary()


def _cost(core: float, read: int, written: int) -> dict[str, Any]:
    cost = {
        "core_seconds": core,
        "cpu_seconds": core / 2,
        "bytes_read": read,
        "bytes_written": written,
        "tasks": 2,
    }
    return {"before": {"data_files": 9}, "after": {"data_files": 1}, "cost": cost}


@pytest.fixture
def fleet_store(store: Store) -> Store:
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/tmp/w"), Owner.STORE)
    policies = PolicyRepository.of(store)
    policies.upsert(
        parse_policy(
            {
                "name": "sales",
                "match": {"catalog": "lake", "namespace": "sales"},
                "actions": {"rewrite-files": {}},
            }
        ),
        Owner.STORE,
    )
    policies.upsert(parse_policy({"name": "idle", "match": {"catalog": "sea"}}), Owner.STORE)
    enrol = EnrolmentRepository.of(store)
    for name in ("orders", "refunds", "gone"):
        assert enrol.enrol(_spec(name), "sales", "matches policy sales") == "enrolled"
    assert enrol.retire(GONE, "sales", "dropped from catalog lake")
    store.tables.upsert(_spec("logs", "ops"), Owner.STORE)  # declared on its own: no policy
    now = store.processes.now()
    old = now - timedelta(days=DAYS + 3)
    # An enrolment change older than the window (its record moved back) is not counted.
    with store.engine.begin() as conn:
        conn.execute(
            update(EnrolmentRow.__table__)  # type: ignore[arg-type]
            .where(EnrolmentRow.__table__.c.table_id == REFUNDS)  # type: ignore[attr-defined]
            .values(at=old)
        )
    # Skipped for health: two in the window on the policy's tables, one on the declared table, one too old.
    _finish(store, ORDERS, "rewrite-files", now - timedelta(hours=5), _skip(2))
    _finish(store, REFUNDS, "rewrite-files", now - timedelta(hours=3), _skip(3))
    _finish(store, DECLARED, "rewrite-files", now - timedelta(hours=2), _skip(1))
    _finish(store, ORDERS, "rewrite-files", old, _skip(4), finished_at=old)
    # A declined run that is not the gate's, and a job that ran with no cost measured: not skips for health.
    _finish(
        store,
        ORDERS,
        "expire-snapshots",
        now - timedelta(hours=4),
        {"skipped": True, "declined": True, "reason": "gc.enabled is false"},
    )
    _finish(store, REFUNDS, "expire-snapshots", now - timedelta(hours=4), {"expired_snapshots": 2})
    # Cost: two runs on the policy's tables today and one yesterday, the declared table's, one too old.
    today = now - timedelta(minutes=5)
    _finish(
        store, ORDERS, "rewrite-files", now - timedelta(hours=1), _cost(3600, 2 * GiB, GiB), finished_at=today
    )
    _finish(
        store, REFUNDS, "rewrite-files", now - timedelta(minutes=50), _cost(1800, GiB, GiB), finished_at=today
    )
    yesterday = now - timedelta(days=1)
    _finish(
        store,
        REFUNDS,
        "rewrite-files",
        yesterday - timedelta(hours=1),
        _cost(7200, 4 * GiB, 0),
        finished_at=yesterday,
    )
    _finish(
        store,
        DECLARED,
        "rewrite-files",
        now - timedelta(hours=1, minutes=5),
        _cost(99999, GiB, GiB),
        finished_at=today,
    )
    _finish(store, ORDERS, "rewrite-files", old - timedelta(hours=1), _cost(50000, GiB, GiB), finished_at=old)
    return store


def test_the_fleet_counts_tables_enrolments_skips_and_cost_per_policy(fleet_store: Store) -> None:
    store = fleet_store
    now = store.processes.now()
    f = fleet(store, now)
    by_name = {p["name"]: p for p in f["policies"]}
    assert list(by_name) == ["idle", "sales"]
    sales, idle = by_name["sales"], by_name["idle"]
    assert sales["tables"] == 2  # orders and refunds live; gone retired
    assert sales["enrolled"] == 2 and sales["retired"] == 1  # refunds' enrolment is older than the window
    assert sales["skipped"] == 2 and f["skipped"] == 3  # the declared table's skip counts for no policy
    assert sales["cost"] == {
        "runs": 7,  # every finished process of its tables in the window: skips, the declined run, the expiry
        "measured": 3,
        "core_seconds": 3600 + 1800 + 7200,
        "bytes_read": 7 * GiB,
        "bytes_written": 2 * GiB,
    }
    assert sales["per_day"] == {
        "core_hours": round(12600 / 3600 / DAYS, 4),
        "bytes_read": 7 * GiB // DAYS,
        "bytes_written": 2 * GiB // DAYS,
    }
    assert (idle["tables"], idle["enrolled"], idle["skipped"], idle["cost"]["runs"]) == (0, 0, 0, 0)
    daily = {(d["day"], d["policy"]): d["core_seconds"] for d in f["cost_daily"]}
    expected: dict[tuple[str, str], float] = {}
    for finished, core in ((now - timedelta(minutes=5), 5400.0), (now - timedelta(days=1), 7200.0)):
        key = (finished.strftime("%Y-%m-%d"), "sales")
        expected[key] = expected.get(key, 0.0) + core
    assert daily == expected  # per UTC day and policy; the declared table's cost is no policy's

    # The newest enrolment changes: the retirement first; a retired table has no page to link to.
    changes = [(e["table"], e["change"], e["live"]) for e in f["enrolments"]]
    assert changes == [(GONE, "retired", False), (GONE, "enrolled", False), (ORDERS, "enrolled", True)]
    assert f["enrolments"][0]["reason"] == "dropped from catalog lake"

    # The newest skips with their reasons and figures, the declared table's too (policy None).
    skips = [(s["table"], s["policy"], s["reason"]) for s in f["skips"]]
    assert skips == [
        (DECLARED, None, "does not pay now: 1 small files, fewer than min-small-files 5"),
        (REFUNDS, "sales", "does not pay now: 3 small files, fewer than min-small-files 5"),
        (ORDERS, "sales", "does not pay now: 2 small files, fewer than min-small-files 5"),
    ]
    assert f["skips"][1]["figures"]["small_files"] == 3 and f["skips"][1]["score"] == 96
    assert all(s["live"] and s["action"] == "rewrite-files" for s in f["skips"])


def test_no_policy_reads_nothing_else(store: Store) -> None:
    f = fleet(store, store.processes.now())
    assert f["policies"] == [] and f["skips"] == [] and f["skipped"] == 0


def _client(store: Store) -> Any:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from airflow_tablemgmt.api.deps import get_store
    from airflow_tablemgmt.api.overview import router

    app = FastAPI()
    app.include_router(router)
    app.dependency_overrides[get_store] = lambda: store
    overview._FIGURES.clear()
    fleet_service._CACHE.clear()
    return TestClient(app)


def test_get_overview_carries_the_fleet(fleet_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet_service, "WAIT_SECONDS", 60.0)  # this test reads the figures, not the timing
    body = _client(fleet_store).get("/overview").json()
    assert body["fleet_pending"] is False
    f = body["fleet"]
    sales = next(p for p in f["policies"] if p["name"] == "sales")
    assert (sales["tables"], sales["enrolled"], sales["retired"], sales["skipped"]) == (2, 2, 1, 2)
    assert sales["cost"]["core_seconds"] == 12600.0 and sales["per_day"]["core_hours"] == 0.5
    assert f["skips"][1]["reason"].startswith("does not pay now: 3 small files")
    assert f["enrolments"][0]["change"] == "retired" and f["enrolments"][0]["live"] is False


def test_the_first_overview_does_not_wait_for_the_fleet(
    fleet_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An api-server's first overview answers without the fleet while a thread computes it (pending), then
    serves it; no request waits longer than WAIT_SECONDS for it."""
    release = threading.Event()
    computed = fleet_service.fleet

    def slow(store: Store, now: datetime) -> dict[str, Any]:
        release.wait(30)
        return computed(store, now)

    monkeypatch.setattr(fleet_service, "fleet", slow)
    monkeypatch.setattr(fleet_service, "WAIT_SECONDS", 0.05)
    client = _client(fleet_store)
    t = time.monotonic()
    first = client.get("/overview").json()
    assert time.monotonic() - t < 10
    assert first["fleet"] is None and first["fleet_pending"] is True and first["tables"] == 3
    release.set()
    deadline = time.monotonic() + 30
    while (body := client.get("/overview").json())["fleet_pending"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert body["fleet"]["policies"][1]["tables"] == 2 and body["fleet_pending"] is False
