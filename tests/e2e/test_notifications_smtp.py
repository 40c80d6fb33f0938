"""Notifications reach a real SMTP server (aiosmtpd, started here) through Airflow's own SmtpNotifier:
a task that fails for good calls the DAG factory's failure callback (Airflow runs it after the last
retry), which reads the store and sends ``failed``, ``failing-streak`` and ``suspended`` as configured
in ``[tablemgmt] notify`` and a table's ``notify:``."""

from __future__ import annotations

import email
import json
import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from airflow_tablemgmt.core.factory import TableOutcome
from airflow_tablemgmt.core.notify import NotifyEvent, NotifySpec
from airflow_tablemgmt.core.outcomes import TableHalted
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.notifications.callback import decide, failing_streak, on_task_failure
from airflow_tablemgmt.notifications.dispatch import send
from airflow_tablemgmt.notifications.health import health_routes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
SMTP_NOTIFIER = "airflow.providers.smtp.notifications.smtp.SmtpNotifier"
TABLE = "lake.sales.orders"
DAG_ID = f"tms__{TABLE}__expire-snapshots"


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's name
        self.messages.append((list(envelope.rcpt_tos), email.message_from_bytes(envelope.content)))
        return "250 Message accepted for delivery"

    def bodies(self) -> list[str]:
        out = []
        for _, msg in self.messages:
            parts = msg.walk() if msg.is_multipart() else [msg]
            out.append(
                "".join(
                    str(p.get_payload(decode=True) or b"", "utf-8") for p in parts if not p.is_multipart()
                )
            )
        return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def inbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Inbox]:
    handler = _Inbox()
    port = _free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    conn = {
        "conn_type": "smtp",
        "host": "127.0.0.1",
        "port": port,
        "extra": {"disable_ssl": True, "disable_tls": True, "from_email": "tablemgmt@example.com"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_TMS", json.dumps(conn))
    try:
        yield handler
    finally:
        controller.stop()


def _notifier(to: str) -> dict[str, Any]:
    return {"class": SMTP_NOTIFIER, "kwargs": {"to": to, "smtp_conn_id": "smtp_tms"}}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
    from airflow_tablemgmt.store import Store

    url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("TABLEMGMT_STORE_URL", url)
    s = Store.for_url(url)
    s.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    s.tables.upsert(
        TableSpec.model_validate(
            {
                "catalog": "lake",
                "namespace": "sales",
                "name": "orders",
                "actions": {"expire-snapshots": {"retries": 0}},
            }
        ),
        Owner.STORE,
    )
    return s


def _failed_process(store: Any, instant: datetime, reason: str) -> int:
    process, _ = store.processes.open(TABLE, "expire-snapshots", instant)
    store.processes.transition(
        process.id, ProcessStatus.FAILED, expected=ProcessStatus.PENDING, attempt=1, failure_reason=reason
    )
    return int(process.id)


def test_a_final_failure_mails_through_the_smtp_notifier(
    airflow_db: str, dags_folder: Path, inbox: _Inbox, store: Any, monkeypatch
) -> None:
    """The DAG the factory builds for a table whose warehouse does not exist fails for good; Airflow runs
    the factory's failure callback; it is the third failed process in a row, so with a streak of 3 two
    mails arrive at the server, naming the table, the process and the failure."""
    from airflow.dag_processing.dagbag import DagBag

    notify = {"notifiers": [_notifier("oncall@example.com")], "failing-streak": 3}
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__NOTIFY", json.dumps(notify))
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for day in range(2):
        _failed_process(store, start + timedelta(days=day), "Spark job exited 1")

    bag = DagBag(dag_folder=str(dags_folder))
    dag = bag.get_dag(DAG_ID)
    assert dag is not None, (bag.import_errors, sorted(bag.dag_ids))
    dag.test()

    subjects = sorted(str(m["Subject"]) for _, m in inbox.messages)
    assert subjects == [
        f"[tablemgmt] {TABLE} expire-snapshots failed",
        f"[tablemgmt] {TABLE} expire-snapshots: 3 failed processes in a row",
    ]
    assert all(rcpt == ["oncall@example.com"] for rcpt, _ in inbox.messages)
    last = store.processes.list(table_id=TABLE, action="expire-snapshots", limit=1)[0]
    assert str(last.status) == "FAILED" and last.dag_id == DAG_ID
    body = inbox.bodies()[0]
    assert f"process: {last.id}" in body and f"DAG run: {DAG_ID}" in body


def test_a_tables_own_notifiers_and_events_come_before_the_global_ones(inbox: _Inbox, store: Any) -> None:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    _failed_process(store, start, "boom")
    table = NotifySpec.model_validate({"notifiers": [_notifier("team@example.com")], "events": ["failed"]})
    everyone = NotifySpec.model_validate(
        {"notifiers": [_notifier("platform@example.com")], "events": ["failing-streak"]}
    )
    decided = decide(store, TABLE, "expire-snapshots", table_notify=table, global_spec=everyone)
    assert [(str(n.event), r.notifiers[0].kwargs["to"]) for r, n in decided] == [
        ("failed", "team@example.com")
    ]
    for route, note in decided:
        assert send(route.notifiers, note, {}) == 1
    assert [rcpt for rcpt, _ in inbox.messages] == [["team@example.com"]]
    # inherit: false drops the global notifiers; a streak of 2 reaches a threshold of 2 on either.
    _failed_process(store, start + timedelta(days=1), "boom")
    alone = table.model_copy(update={"inherit": False, "events": list(NotifyEvent), "failing_streak": 2})
    decided = decide(store, TABLE, "expire-snapshots", table_notify=alone, global_spec=everyone)
    assert sorted(str(n.event) for _, n in decided) == ["failed", "failing-streak"]
    assert {r.notifiers[0].kwargs["to"] for r, _ in decided} == {"team@example.com"}


def test_an_auto_suspended_dynamic_table_is_announced(inbox: _Inbox, store: Any, monkeypatch) -> None:
    """The refresh's failure carries the outcome that halted the table and the store has it SUSPENDED."""

    class _Dynamic:
        state, suspended_reason, consecutive_failures = "SUSPENDED", "5 consecutive failed refreshes", 5

    class _Store:
        processes = store.processes
        dynamic = type("R", (), {"find": staticmethod(lambda table_id: _Dynamic())})()

    spec = NotifySpec.model_validate(
        {"notifiers": [_notifier("oncall@example.com")], "events": ["suspended"]}
    )
    halted = f"{TABLE} is now suspended: 5 consecutive failed refreshes"
    error = TableHalted(
        f"tablemgmt: refresh failed; {halted}", TableOutcome(state="SUSPENDED", halted=halted)
    )
    decided = decide(_Store(), TABLE, "refresh", table_notify=None, global_spec=spec, exception=error)
    assert [str(n.event) for _, n in decided] == ["suspended"]
    route, note = decided[0]
    assert send(route.notifiers, note, {}) == 1
    assert str(inbox.messages[0][1]["Subject"]) == f"[tablemgmt] {TABLE} suspended after 5 failed refreshes"
    assert "tablemgmt dt resume" in inbox.bodies()[0]


def test_the_streak_counts_ended_processes_only() -> None:
    from airflow_tablemgmt.core.process import Process

    def p(status: ProcessStatus) -> Process:
        return Process(id=1, table_id=TABLE, action="a", instant=datetime.now(UTC), status=status)

    S = ProcessStatus
    assert failing_streak([p(S.RUNNING), p(S.FAILED), p(S.KILLED), p(S.SUCCESS), p(S.FAILED)]) == 2
    assert failing_streak([p(S.SUCCESS), p(S.FAILED)]) == 0


def test_the_dag_factory_attaches_the_callback_to_every_task() -> None:
    from airflow_tablemgmt.core.tables import CatalogSpec, parse_table
    from airflow_tablemgmt.dag_factory import build_dags
    from airflow_tablemgmt.factories.discovery import load_factories

    t = parse_table({"catalog": "lake", "namespace": "db", "name": "t", "actions": {"expire-snapshots": {}}})
    dags = build_dags(
        [t], load_factories(), catalogs={"lake": CatalogSpec(name="lake", warehouse="/tmp/w")}
    ).dags
    callbacks = [task.on_failure_callback for dag in dags.values() for task in dag.tasks]
    assert callbacks and all(on_task_failure in (c if isinstance(c, list) else [c]) for c in callbacks)


def test_a_tables_notify_is_declared_in_yaml_and_kept_by_the_store(store: Any) -> None:
    from airflow_tablemgmt.core.tables import Owner
    from airflow_tablemgmt.declarations import parse_declarations_text

    text = (
        "catalogs: [{name: lake, warehouse: /data/wh}]\n"
        "tables:\n- catalog: lake\n  namespace: sales\n  name: orders\n  actions: {expire-snapshots: {}}\n"
        f"  notify:\n    events: [failing-streak]\n    failing-streak: 5\n    notifiers:\n"
        f"    - {{class: {SMTP_NOTIFIER}, kwargs: {{to: team@example.com}}}}\n"
    )
    loaded = parse_declarations_text(text, "tables.yaml")
    assert loaded.errors == []
    spec = loaded.tables[0]
    store.tables.upsert(spec, Owner.CODE)
    kept = store.tables.get(TABLE).notify
    assert kept == spec.notify and kept is not None
    assert kept.failing_streak == 5 and [str(e) for e in kept.events] == ["failing-streak"]
    bad = text.replace("failing-streak: 5", "failing-streak: 1")
    assert any("failing-streak" in e.message for e in parse_declarations_text(bad, "tables.yaml").errors)


# --- unhealthy: a table's health score crossing below health-below (notifications/health.py) ---------------

HEALTH_TABLE = "lake.sales.events"


@pytest.fixture
def small_files_lake(tmp_path: Path) -> tuple[Any, Any]:
    """An Iceberg table in a SQL catalog on SQLite, written by pyiceberg as the health score's own tests
    write theirs (tests/unit/metadata/test_health.py): no JVM. Returns (the pyiceberg table, a store that
    registers it with ``notify: {events: [unhealthy]}`` to one mailbox)."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
    from airflow_tablemgmt.store import Store

    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", f"file://{tmp_path / 'wh'}"
    catalog = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    catalog.create_namespace("sales")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    table = catalog.create_table("sales.events", schema=schema)
    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    store.catalogs.upsert(
        CatalogSpec(name="lake", type="jdbc", warehouse=warehouse, properties={"uri": uri}), Owner.STORE
    )
    notify = {"notifiers": [_notifier("oncall@example.com")], "events": ["unhealthy"]}
    spec = {
        "catalog": "lake",
        "namespace": "sales",
        "name": "events",
        "notify": notify,
        "actions": {"expire-snapshots": {}, "rewrite-files": {}},
    }
    store.tables.upsert(TableSpec.model_validate(spec), Owner.STORE)
    return table, store


#: Enough small files that they alone take the score below 50 (60 files: 59 removable, 59 points).
SMALL_APPENDS = 60


def _append_small_files(table: Any, n: int) -> None:
    import pyarrow as pa

    for i in range(n):
        rows = pa.table(
            {"id": [i * 10 + j for j in range(10)], "v": ["x"] * 10}, schema=table.schema().as_arrow()
        )
        table.append(rows)


def test_a_health_crossing_mails_once_and_again_only_after_recovering(
    inbox: _Inbox, small_files_lake: tuple[Any, Any], tmp_path: Path
) -> None:
    """Sixty small appends take the table below 50 (the default; the score's small-files points grow with the
    files a compaction would remove, docs/health.md): two workers finishing a process of it at the same moment
    measure it, and the server receives exactly one mail; measured again while still below, none; rewritten
    into one file it recovers (none), and sixty appends later it crosses again: one."""
    import threading

    from airflow_tablemgmt.notifications.health import after_process, read_health
    from airflow_tablemgmt.store import Store

    table, store = small_files_lake
    _append_small_files(table, SMALL_APPENDS)
    spec = store.tables.get(HEALTH_TABLE)
    low = read_health(store, spec)
    assert low.score < 50 and {f.action for f in low.findings} >= {"rewrite-files"}, low

    # Two workers, each with its own connection to the store, finish a process of the table at once.
    workers = [Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}") for _ in range(2)]
    barrier, sent = threading.Barrier(2), [0, 0]

    def worker(i: int) -> None:
        barrier.wait(timeout=30)
        sent[i] = after_process(workers[i], HEALTH_TABLE, "expire-snapshots", process_id=41 + i)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(sent) == [0, 1] and len(inbox.messages) == 1
    rcpt, message = inbox.messages[0]
    assert rcpt == ["oncall@example.com"]
    assert str(message["Subject"]) == f"[tablemgmt] {HEALTH_TABLE} health score {low.score} is below 50"
    body = inbox.bodies()[0]
    assert f"health score is {low.score} of 100, below 50" in body
    assert "- rewrite-files, -" in body and f"compaction would remove {SMALL_APPENDS - 1}" in body
    assert f"tablemgmt run {HEALTH_TABLE} rewrite-files" in body
    assert f"/plugin/tablemgmt#/tables/{HEALTH_TABLE}" in body

    # Still below after another small append: measured, nothing sent.
    _append_small_files(table, 1)
    assert after_process(store, HEALTH_TABLE, "rewrite-files", process_id=43) == 0
    assert len(inbox.messages) == 1

    # Rewritten into one file (what a compaction does): recovered, nothing sent, the alert re-armed.
    table.overwrite(table.scan().to_arrow())
    healthy = read_health(store, spec)
    assert healthy.score >= 50, healthy
    assert after_process(store, HEALTH_TABLE, "rewrite-files", process_id=44) == 0
    _append_small_files(table, SMALL_APPENDS)
    assert after_process(store, HEALTH_TABLE, "expire-snapshots", process_id=45) == 1
    assert len(inbox.messages) == 2
    print("\n" + str(inbox.messages[0][1]["Subject"]) + "\n\n" + body)  # what docs/notifications.md quotes


SPARK_TABLE = "lake.sales.clicks"


@pytest.mark.skipif(
    os.environ.get("TABLEMGMT_NOTIFY_FULL") != "1",
    reason="the unhealthy notification through a real Spark run runs with TABLEMGMT_NOTIFY_FULL=1",
)
@pytest.mark.timeout(1200)
def test_the_operator_mails_once_when_its_process_leaves_the_table_unhealthy(
    airflow_db: str, dags_folder: Path, inbox: _Inbox, tmp_path: Path, monkeypatch
) -> None:
    """On demand (two spark-submit runs and a table written by Spark, minutes on 2 cores): the DAG the
    factory builds runs expire-snapshots on a Spark-written table of many small files; after its process
    the operator measures the table (its small files cost it about 33 points, below health-below 80): one
    mail. The next run measures it still below: none. Measured: 240 s (2 cores, load 8)."""
    from airflow.dag_processing.dagbag import DagBag

    from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
    from airflow_tablemgmt.store import Store
    from tests.e2e.conftest import make_table

    table = make_table(tmp_path / "wh", SPARK_TABLE, files=24, rows=2400)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("TABLEMGMT_STORE_URL", url)
    monkeypatch.delenv("AIRFLOW__TABLEMGMT__NOTIFY", raising=False)
    store = Store.for_url(url)
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(table.warehouse)), Owner.STORE)
    notify = {"notifiers": [_notifier("oncall@example.com")], "events": ["unhealthy"], "health-below": 80}
    spec = {
        "catalog": "lake",
        "namespace": "sales",
        "name": "clicks",
        "notify": notify,
        "actions": {"expire-snapshots": {"retries": 0}, "rewrite-files": {}},
    }
    store.tables.upsert(TableSpec.model_validate(spec), Owner.STORE)

    bag = DagBag(dag_folder=str(dags_folder))
    dag = bag.get_dag(f"tms__{SPARK_TABLE}__expire-snapshots")
    assert dag is not None, (bag.import_errors, sorted(bag.dag_ids))
    for day in (1, 2):
        run = dag.test(logical_date=datetime(2026, 11, day, tzinfo=UTC))
        assert str(run.state) == "success", run
        assert len(inbox.messages) == 1, [str(m["Subject"]) for _, m in inbox.messages]
    processes = store.processes.list(table_id=SPARK_TABLE, action="expire-snapshots", limit=10)
    assert [str(p.status) for p in processes] == ["SUCCESS", "SUCCESS"]
    subject = str(inbox.messages[0][1]["Subject"])
    assert subject.startswith(f"[tablemgmt] {SPARK_TABLE} health score ") and subject.endswith(" is below 80")
    body = inbox.bodies()[0]
    first = min(p.id for p in processes)
    assert f"after its expire-snapshots process {first} ended" in body
    assert f"tablemgmt run {SPARK_TABLE} rewrite-files" in body and f"DAG run: tms__{SPARK_TABLE}" in body


def test_a_dynamic_tables_notify_is_declared_in_yaml_and_kept_by_the_store(store: Any) -> None:
    """A dynamic table's own ``notify:`` reaches its store row, which the failure callback and the health
    evaluation read (as a maintained table's)."""
    from airflow_tablemgmt.declarations import parse_declarations_text
    from airflow_tablemgmt.declarations.sync import apply_declarations

    text = (
        "catalogs: [{name: lake, warehouse: /data/wh}]\n"
        "dynamic-tables:\n- identifier: lake.sales.daily\n"
        "  query: SELECT order_day, count(*) AS n FROM lake.sales.orders GROUP BY order_day\n"
        "  freshness: 1 DAY\n"
        "  notify:\n    events: [suspended, unhealthy]\n    health-below: 70\n    notifiers:\n"
        f"    - {{class: {SMTP_NOTIFIER}, kwargs: {{to: team@example.com}}}}\n"
    )
    loaded = parse_declarations_text(text, "tables.yaml")
    assert loaded.errors == [] and len(loaded.dynamic_tables) == 1
    apply_declarations(store, loaded, prune=False)
    kept = store.tables.get("lake.sales.daily").notify
    assert kept is not None and kept == loaded.dynamic_tables[0].notify
    assert kept.health_below == 70 and [str(e) for e in kept.events] == ["suspended", "unhealthy"]
    routes = health_routes(kept, None)
    assert [(r.health_below, r.notifiers[0].kwargs["to"]) for r in routes] == [(70, "team@example.com")]
