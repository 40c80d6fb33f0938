"""Notifications reach a real SMTP server (aiosmtpd, started here) through Airflow's own SmtpNotifier:
a task that fails for good calls the DAG factory's failure callback (Airflow runs it after the last
retry), which reads the store and sends ``failed``, ``failing-streak`` and ``suspended`` as configured
in ``[tablemgmt] notify`` and a table's ``notify:``."""

from __future__ import annotations

import email
import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from airflow_tablemgmt.core.notify import NotifyEvent, NotifySpec
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.notifications.callback import decide, failing_streak, on_task_failure
from airflow_tablemgmt.notifications.dispatch import send

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
    conn = {"conn_type": "smtp", "host": "127.0.0.1", "port": port,
            "extra": {"disable_ssl": True, "disable_tls": True, "from_email": "tablemgmt@example.com"}}  # fmt: skip
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
    s.tables.upsert(TableSpec.model_validate({"catalog": "lake", "namespace": "sales", "name": "orders",
                                              "actions": {"expire-snapshots": {"retries": 0}}}), Owner.STORE)  # fmt: skip
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
    """The refresh's failure says the table is now suspended and the store has it SUSPENDED."""

    class _Dynamic:
        state, suspended_reason, consecutive_failures = "SUSPENDED", "5 consecutive failed refreshes", 5

    class _Store:
        processes = store.processes
        dynamic = type("R", (), {"find": staticmethod(lambda table_id: _Dynamic())})()

    spec = NotifySpec.model_validate(
        {"notifiers": [_notifier("oncall@example.com")], "events": ["suspended"]}
    )
    error = RuntimeError(
        f"tablemgmt: refresh failed; {TABLE} is now suspended: 5 consecutive failed refreshes"
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
