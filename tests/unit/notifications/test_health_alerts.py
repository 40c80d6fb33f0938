"""The ``unhealthy`` decision (notifications/health.py) on a real SQLite store, with scores given: a crossing
below a route's ``health-below`` makes one notification per route of that threshold, staying below makes
none, recovering makes none and re-arms; no route taking ``unhealthy`` means no metadata read at all."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.notify import DEFAULT_HEALTH_BELOW, NotifyEvent, NotifySpec
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.health import Finding, HealthScore
from airflow_tablemgmt.notifications import health
from airflow_tablemgmt.notifications.dispatch import parse_notify
from airflow_tablemgmt.store import Store

TABLE = "lake.sales.orders"
NOTIFIER = {
    "class": "airflow.providers.smtp.notifications.smtp.SmtpNotifier",
    "kwargs": {"to": "a@example.com"},
}
SMALL = Finding("small_files", 35, "rewrite-files", "40 data files where 1 would hold the data")
SNAPS = Finding("snapshots", 20, "expire-snapshots", "120 of 130 snapshots are older than 5 d")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    s.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    s.tables.upsert(
        TableSpec(catalog="lake", namespace="sales", name="orders", actions={"rewrite-files": {}}),
        Owner.STORE,
    )
    yield s
    s.dispose()


def _spec(**kw: Any) -> NotifySpec:
    return NotifySpec.model_validate({"notifiers": [NOTIFIER], **kw})


def _reader(scores: list[HealthScore], reads: list[str] | None = None) -> health.HealthReader:
    def read(store: Store, spec: TableSpec) -> HealthScore:
        if reads is not None:
            reads.append(spec.id)
        return scores.pop(0)

    return read


def _evaluate(store: Store, score: HealthScore, **kw: Any) -> list[Any]:
    kw.setdefault("global_spec", _spec())
    return health.evaluate(store, TABLE, "expire-snapshots", read=_reader([score]), **kw)


def test_one_notification_per_crossing_none_while_below_none_on_recovery(store: Store) -> None:
    low, lower, ok = HealthScore(45, (SMALL, SNAPS)), HealthScore(30, (SMALL, SNAPS)), HealthScore(100, ())
    first = _evaluate(store, low, process_id=7)
    assert [(str(n.event), n.health_score, n.health_below) for _, n in first] == [("unhealthy", 45, 50)]
    assert _evaluate(store, lower) == []  # still below: said already
    assert _evaluate(store, ok) == []  # recovered: nothing sent, the alert re-arms
    again = _evaluate(store, lower)
    assert [n.health_score for _, n in again] == [30]
    note = first[0][1]
    assert note.subject == f"[tablemgmt] {TABLE} health score 45 is below 50"
    assert note.process_id == 7 and note.action == "expire-snapshots"
    assert [(f["action"], f["enabled"]) for f in note.findings] == [
        ("rewrite-files", True),
        ("expire-snapshots", False),
    ]
    text = note.text
    assert "- rewrite-files, -35 points: 40 data files" in text
    assert "- expire-snapshots (not among the table's actions), -20 points" in text
    assert f"tablemgmt run {TABLE} rewrite-files" in text
    assert f"tablemgmt run {TABLE} expire-snapshots" not in text
    assert f"/plugin/tablemgmt#/tables/{TABLE}" in text and f"/tablemgmt/v1/tables/{TABLE}/health" in text


def test_the_threshold_is_below_not_at(store: Store) -> None:
    assert _evaluate(store, HealthScore(50, (SMALL,))) == []
    assert len(_evaluate(store, HealthScore(49, (SMALL,)))) == 1


def test_each_threshold_is_its_own_crossing_and_routes_of_one_threshold_share_it(store: Store) -> None:
    table = _spec(**{"health-below": 80})
    store.tables.upsert(
        TableSpec(
            catalog="lake", namespace="sales", name="orders", actions={"rewrite-files": {}}, notify=table
        ),
        Owner.STORE,
    )
    got = _evaluate(store, HealthScore(60, (SMALL,)), global_spec=_spec())
    assert [n.health_below for _, n in got] == [80]  # the table's route; 60 is not below the global 50
    got = _evaluate(store, HealthScore(40, (SMALL,)), global_spec=_spec())
    assert [n.health_below for _, n in got] == [50]  # the global route crosses now; 80's was said
    got = _evaluate(store, HealthScore(20, (SMALL,)), global_spec=_spec(**{"health-below": 80}))
    assert got == []  # both routes at 80: one state, said already


def test_no_route_taking_unhealthy_means_no_read(store: Store) -> None:
    reads: list[str] = []
    only_failures = _spec(events=["failed", "failing-streak"])
    got = health.evaluate(store, TABLE, "x", global_spec=only_failures, read=_reader([], reads))
    assert got == [] and reads == []
    got = health.evaluate(store, TABLE, "x", global_spec=None, read=_reader([], reads))
    assert got == [] and reads == []


def test_after_process_never_raises(store: Store, monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__NOTIFY", json.dumps({"notifiers": [NOTIFIER]}))

    def unreadable(store: Store, spec: TableSpec) -> HealthScore:
        raise HealthUnavailable(f"table {spec.id}: cannot read its Iceberg metadata: no such file")

    caplog.set_level(logging.INFO, logger=health.log.name)
    assert health.after_process(store, TABLE, "rewrite-files", read=unreadable) == 0
    assert "no such file" in caplog.text
    assert health.after_process(store, "lake.sales.missing", "rewrite-files", read=unreadable) == 0
    assert "lake.sales.missing" in caplog.text


def test_health_below_is_validated_and_defaults_to_50() -> None:
    assert NotifySpec().health_below == DEFAULT_HEALTH_BELOW == 50
    assert NotifyEvent.UNHEALTHY in NotifySpec().events  # the default is every event
    with pytest.raises(InvalidDeclaration, match="health-below") as e:
        parse_notify('{"health-below": 0}', "[tablemgmt] notify")
    assert "greater than or equal to 1" in str(e.value)
    assert parse_notify({"health-below": 75, "events": ["unhealthy"]}, "t").health_below == 75
