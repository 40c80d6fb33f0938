"""The planning task of a planned DAG run (``services/plan_runs.py``) on a real SQLite store: the tables it cannot
decide are measured within the budget and planned in the same run, a run naming its tables runs those, the
batches stay within Airflow's ``max_map_length``, the settings name themselves when wrong."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.tables import Owner, TableSpec
from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.services import health
from airflow_tablemgmt.services.errors import InvalidInput
from airflow_tablemgmt.services.plan_runs import measure_budget, plan_run
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.enrolment import EnrolmentRepository

MIB = 1024 * 1024
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
ACTION = "rewrite-files"


def _id(name: str) -> str:
    return f"lake.s.{name}"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    enrol = EnrolmentRepository.of(s)
    for name in ("p1", "p2", "p3", "p4", "p5", "idle", "new1", "new2", "new3", "broken"):
        enrol.enrol(TableSpec(catalog="lake", namespace="s", name=name, actions={ACTION: {}}), "fleet", "m")
    enrol.enrol(
        TableSpec(catalog="lake", namespace="s", name="off", actions={"expire-snapshots": {}}), "fleet", "m"
    )
    s.tables.upsert(
        TableSpec(catalog="lake", namespace="s", name="declared", actions={ACTION: {}}), Owner.STORE
    )
    cache = health._Cache(lambda: 0.0)
    for name in ("p1", "p2", "p3", "p4", "p5"):
        health.remember(s, _id(name), SMALL, cache=cache)
    health.remember(s, _id("idle"), COMPACT, cache=cache)
    yield s
    s.dispose()


def _measure(readings: dict[str, FileStats]) -> Any:
    measured: list[str] = []

    def measure(store: Store, table_id: str) -> None:
        measured.append(table_id)
        if table_id not in readings:
            raise RuntimeError(f"table {table_id}: its metadata cannot be read")
        health.remember(store, table_id, readings[table_id], cache=health._Cache(lambda: 0.0))

    measure.calls = measured  # type: ignore[attr-defined]
    return measure


def test_undecided_tables_are_measured_within_the_budget_and_planned_in_the_same_run(store: Store) -> None:
    measure = _measure({_id("new1"): SMALL, _id("new2"): COMPACT})
    run = plan_run(store, "fleet", ACTION, budget=3, max_batches=100, measure=measure)
    assert measure.calls == [_id("broken"), _id("new1"), _id("new2")]  # 3 of the 4, in the plan's order
    assert run.measured == [_id("new1"), _id("new2")]
    assert run.unmeasured == {
        _id("broken"): f"RuntimeError: table {_id('broken')}: its metadata cannot be read"
    }
    plan = run.plan
    assert sorted(p.table_id for p in plan.pays) == sorted(
        [*(_id(f"p{i}") for i in range(1, 6)), _id("new1")]
    )
    assert set(plan.idle) == {_id("idle"), _id("new2")}
    assert set(plan.measure) == {_id("broken"), _id("new3")}  # the next run measures them
    assert plan.measure[_id("new3")] == "no health measured"
    assert [t for b in run.batches for t in b] == [p.table_id for p in plan.pays]
    counts = run.to_dict()["counts"]
    assert (counts["pays"], counts["measured"], counts["measure"], counts["batches"]) == (6, 2, 2, 1)


def test_batches_stay_within_max_map_length_worst_first(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_BATCH_SIZE", "2")
    run = plan_run(store, "fleet", ACTION, budget=0, max_batches=2)
    assert len(run.batches) == 2 and [len(b) for b in run.batches] == [2, 2]
    assert run.left_over == 1
    assert [t for b in run.batches for t in b] == [p.table_id for p in run.plan.pays][:4]


def test_tables_beyond_max_map_length_are_first_in_the_next_run_not_starved(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An action without thresholds scores every table 100: a cut by table id alone took the same tables every
    run and never reached the rest. Equal scores go by their newest process of the action, never run first."""
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_BATCH_SIZE", "2")
    enrol = EnrolmentRepository.of(store)
    names = [f"o{i}" for i in range(5)]
    for name in names:
        enrol.enrol(
            TableSpec(catalog="lake", namespace="s", name=name, actions={"delete-orphans": {}}), "fleet", "m"
        )
    taken: list[list[str]] = []
    for run_no in range(3):
        run = plan_run(store, "fleet", "delete-orphans", budget=0, max_batches=1)
        assert run.left_over == 3
        (batch,) = run.batches
        taken.append(batch)
        for table_id in batch:  # what the batch does: a process of the action at the run's instant
            store.processes.open(table_id, "delete-orphans", datetime(2026, 11, 1, run_no, tzinfo=UTC))
    assert taken == [[_id("o0"), _id("o1")], [_id("o2"), _id("o3")], [_id("o4"), _id("o0")]]


def test_a_run_naming_its_tables_runs_those_whatever_their_stored_health(store: Store) -> None:
    named = [_id("idle"), _id("new1"), _id("p2"), _id("off"), _id("declared"), "lake.s.nope", _id("idle")]
    run = plan_run(store, "fleet", ACTION, tables=named, budget=10, max_batches=10, measure=_measure({}))
    assert run.batches == [[_id("idle"), _id("new1"), _id("p2")]]  # a healthy one too: the gate decides
    assert run.measured == []
    assert run.not_found == [
        _id("declared"),
        "lake.s.nope",
    ]  # not this policy's (off: its action is not enabled)


def test_a_run_started_by_events_measures_the_changed_tables_and_plans_only_them(store: Store) -> None:
    # idle's stored figures say compact, but its commit made it small: measured now, it pays. p2 (no event)
    # is not planned although its stored figures say it pays: a scheduled run takes it.
    measure = _measure({_id("idle"): SMALL, _id("new2"): COMPACT, _id("p1"): COMPACT})
    changed = [_id("idle"), _id("p1"), _id("new1"), _id("new2"), _id("off"), "lake.s.nope", _id("idle")]
    run = plan_run(store, "fleet", ACTION, changed=changed, budget=3, max_batches=10, measure=measure)
    assert measure.calls == [_id("idle"), _id("new1"), _id("new2")]  # the budget: 3 of the 4 changed
    # idle pays now, new2 is idle; new1 cannot be read and p1 is beyond the budget: both run, their gate decides
    assert run.batches == [[_id("idle"), _id("new1"), _id("p1")]]
    assert run.changed == sorted({*changed})
    assert run.not_found == ["lake.s.nope"]  # off is the policy's, without the action
    assert run.to_dict()["changed"] == run.changed
    assert _id("p2") not in run.plan.measure and _id("p2") not in run.plan.idle  # not planned at all
    # events, none for this action: nothing read, nothing mapped
    quiet = plan_run(store, "fleet", ACTION, changed=[], budget=3, max_batches=10, measure=measure)
    assert quiet.batches == [] and quiet.changed == []
    # a run naming its tables wins over its events
    named = plan_run(store, "fleet", ACTION, tables=[_id("p2")], changed=[_id("p1")], measure=measure)
    assert named.batches == [[_id("p2")]]


def test_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__TABLEMGMT__PLAN_MEASURE_BUDGET", raising=False)
    assert measure_budget() == 200
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_MEASURE_BUDGET", "0")
    assert measure_budget() == 0
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_MEASURE_BUDGET", "-1")
    with pytest.raises(
        InvalidInput, match=r"plan_measure_budget: '-1' is not allowed; allowed: a whole number >= 0"
    ):
        measure_budget()


def test_run_now_of_an_enrolled_table_is_a_run_of_its_policys_planned_dag_naming_it(store: Store) -> None:
    from datetime import UTC, datetime

    from airflow_tablemgmt.services.run_now import check_runnable, request_run

    assert check_runnable(store, _id("p1"), ACTION) == "tms__plan__fleet__rewrite-files"
    assert check_runnable(store, _id("declared"), ACTION) == "tms__lake.s.declared__rewrite-files"
    asked: list[tuple[str, datetime, Any]] = []

    def trigger(dag_id: str, logical_date: datetime, conf: Any = None) -> str:
        asked.append((dag_id, logical_date, conf))
        return f"tablemgmt__{logical_date.isoformat()}"

    at = datetime(2026, 3, 1, 2, tzinfo=UTC)
    done = request_run(store, _id("p1"), ACTION, at, trigger)
    assert asked == [("tms__plan__fleet__rewrite-files", at, {"tables": [_id("p1")]})]
    p = store.processes.get(done.process.id)
    assert (p.status, p.dag_id, p.run_id) == ("PENDING", "tms__plan__fleet__rewrite-files", done.run_id)
    request_run(store, _id("declared"), ACTION, at, trigger)
    assert asked[-1] == ("tms__lake.s.declared__rewrite-files", at, None)
