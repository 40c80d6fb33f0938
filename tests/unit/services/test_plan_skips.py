"""A skipped process per table the plan left out, only when its reason changed (``services/plan_skips.py``,
``store/plan_skips.py``; ADR 0004 decision 2), on a real SQLite store: the first plan records each idle or
unreadable table once, an unchanged plan writes nothing, a moved reason or a process in between writes one row,
the rows are finished processes the history and the overview read, and one run writes at most its limit."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.services import health
from airflow_tablemgmt.services.plan_runs import plan_run
from airflow_tablemgmt.services.plan_skips import record_skips
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.enrolment import EnrolmentRepository

MIB = 1024 * 1024
ACTION = "rewrite-files"
DAG = "tms__plan__fleet__rewrite-files"
SMALL = FileStats(
    snapshot_id=1,
    snapshots=1,
    data_files=60,
    small_data_files=60,
    small_file_threshold_bytes=384 * MIB,
    delete_files=0,
    data_bytes=60 * MIB,
    delete_bytes=0,
    records=6000,
    compacted_data_files=1,
    partitions=1,
    removable_data_files=59,
)
COMPACT = replace(
    SMALL, data_files=4, small_data_files=4, compacted_data_files=4, partitions=4, removable_data_files=0
)
T0 = datetime(2026, 11, 28, tzinfo=UTC)
HEALTHY = [f"h{i}" for i in range(6)]


def _id(name: str) -> str:
    return f"lake.s.{name}"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    enrol = EnrolmentRepository.of(s)
    for name in [*HEALTHY, "pays", "broken"]:
        enrol.enrol(TableSpec(catalog="lake", namespace="s", name=name, actions={ACTION: {}}), "fleet", "m")
    enrol.enrol(  # the action is off: never a skip of it
        TableSpec(catalog="lake", namespace="s", name="off", actions={"expire-snapshots": {}}), "fleet", "m"
    )
    cache = health._Cache(lambda: 0.0)
    for name in HEALTHY:
        health.remember(s, _id(name), COMPACT, cache=cache)
    health.remember(s, _id("pays"), SMALL, cache=cache)
    yield s
    s.dispose()


def _unreadable(store: Store, table_id: str) -> None:
    raise RuntimeError(f"table {table_id}: its metadata cannot be read")


def _plan_and_record(store: Store, hour: int, **kw: Any) -> Any:
    planned = plan_run(store, "fleet", ACTION, budget=10, max_batches=10, measure=_unreadable)
    instant = T0 + timedelta(hours=hour)
    run_id = f"scheduled__{instant.isoformat()}"
    return planned, record_skips(
        store, "fleet", planned, instant=instant, dag_id=DAG, run_id=run_id, task_id="plan", **kw
    )


def _skips(store: Store) -> list[Any]:
    return [
        p for p in store.processes.list(action=ACTION, limit=1000) if (p.summary or {}).get("gate") == "plan"
    ]


def test_each_left_out_table_is_recorded_once_and_again_only_when_its_reason_changes(store: Store) -> None:
    planned, done = _plan_and_record(store, 0)
    assert planned.batches == [[_id("pays")]]
    assert (done.written, done.unchanged, done.deferred) == (7, 0, 0)  # 6 idle, 1 unreadable
    skips = {p.table_id: p for p in _skips(store)}
    assert sorted(skips) == sorted(_id(n) for n in [*HEALTHY, "broken"])  # not pays, not off
    h0 = skips[_id("h0")]
    assert h0.status == ProcessStatus.SUCCESS and h0.summary["skipped"] is True  # type: ignore[index]
    assert h0.summary["reason"].startswith("not planned: ")  # type: ignore[index]
    assert h0.summary["reason"] == f"not planned: {planned.plan.idle[_id('h0')]}"  # type: ignore[index]
    assert (h0.dag_id, h0.task_id, h0.instant) == (DAG, "plan", T0)
    assert h0.parameters["plan"]["policy"] == "fleet" and h0.finished_at is not None
    broken = skips[_id("broken")].summary["reason"]  # type: ignore[index]
    assert broken.startswith(
        "not planned: its health could not be measured: RuntimeError: table lake.s.broken"
    )

    # the next plans, nothing changed: no row
    for hour in (1, 2):
        _, again = _plan_and_record(store, hour)
        assert (again.written, again.unchanged) == (0, 7)
    assert len(_skips(store)) == 7

    # h1 measured again with other figures (still idle, another reason); h2's newest process is a batch's run
    health.remember(store, _id("h1"), replace(COMPACT, data_files=3, compacted_data_files=3, partitions=3))
    ran, _ = store.processes.open(_id("h2"), ACTION, T0 + timedelta(hours=2, minutes=30), task_id="run_batch")
    for to, frm in ((ProcessStatus.SUBMITTED, "PENDING"), (ProcessStatus.RUNNING, "SUBMITTED")):
        ran = store.processes.transition(ran.id, to, expected=ProcessStatus(frm), attempt=1)
    store.processes.transition(ran.id, ProcessStatus.SUCCESS, expected=ProcessStatus.RUNNING, attempt=1)
    _, moved = _plan_and_record(store, 3)
    assert (moved.written, moved.unchanged) == (2, 5)
    latest = {p.table_id for p in _skips(store) if p.instant == T0 + timedelta(hours=3)}
    assert latest == {_id("h1"), _id("h2")}
    # the history says why, newest first: h2's skip after its run
    history = store.processes.list(table_id=_id("h2"), action=ACTION, limit=10)
    assert [p.task_id for p in history][:2] == ["plan", "run_batch"]


def test_one_run_writes_at_most_its_limit_and_the_next_run_the_rest(store: Store) -> None:
    _, first = _plan_and_record(store, 0, limit=3)
    assert (first.written, first.deferred) == (3, 4)
    _, second = _plan_and_record(store, 1, limit=3)
    assert (second.written, second.unchanged, second.deferred) == (3, 3, 1)
    _, third = _plan_and_record(store, 2, limit=3)
    assert (third.written, third.unchanged, third.deferred) == (1, 6, 0)
    assert len({p.table_id for p in _skips(store)}) == 7


def test_a_table_with_a_process_at_the_instant_keeps_it(store: Store) -> None:
    mine, _ = store.processes.open(_id("h0"), ACTION, T0, task_id="run_batch")  # e.g. a run-now opened it
    _, done = _plan_and_record(store, 0)
    assert done.written == 6
    assert store.processes.find(_id("h0"), ACTION, T0).id == mine.id  # type: ignore[union-attr]
