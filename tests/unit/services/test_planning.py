"""The planning step's read and wiring (``store/planning.py``, ``services/planning.py``) on a real SQLite store:
the policy's live enrolled tables only, their stored health joined in one indexed query, the settings."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from airflow_tablemgmt.core.tables import Owner, TableSpec
from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.services import health
from airflow_tablemgmt.services.errors import InvalidInput
from airflow_tablemgmt.services.planning import plan_action, plan_settings
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.enrolment import EnrolmentRepository
from airflow_tablemgmt.store.planning import PlanningRepository

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


def _spec(name: str, actions: dict[str, Any] | None = None) -> TableSpec:
    return TableSpec(catalog="lake", namespace="s", name=name, actions=actions or {"rewrite-files": {}})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    enrol = EnrolmentRepository.of(s)
    for name in ("a_pays", "b_compact", "c_unmeasured", "d_retired"):
        enrol.enrol(_spec(name), "lake-all", "matched")
    enrol.enrol(
        _spec("e_strict", {"rewrite-files": {"thresholds": {"min-small-files": 100}}}), "lake-all", "m"
    )
    enrol.enrol(_spec("f_other"), "other", "matched")
    enrol.retire("lake.s.d_retired", "lake-all", "gone from the catalog")
    s.tables.upsert(_spec("g_declared"), Owner.STORE)
    cache = health._Cache(lambda: 0.0)
    for name, stats in (("a_pays", SMALL), ("b_compact", COMPACT), ("d_retired", SMALL), ("e_strict", SMALL)):
        health.remember(s, f"lake.s.{name}", stats, cache=cache)
    health.remember(s, "lake.s.f_other", SMALL, cache=cache)
    health.remember(s, "lake.s.g_declared", SMALL, cache=cache)
    yield s
    s.dispose()


def test_plans_the_policys_live_tables_from_their_stored_health(store: Store) -> None:
    p = plan_action(store, "lake-all", "rewrite-files", batch_size=50, max_age=timedelta(hours=1))
    assert [t.table_id for t in p.pays] == ["lake.s.a_pays"]
    assert set(p.idle) == {"lake.s.b_compact", "lake.s.e_strict"}
    assert "min-small-files 100" in p.idle["lake.s.e_strict"]
    assert p.measure == {"lake.s.c_unmeasured": "no health measured"}
    assert p.batches == [["lake.s.a_pays"]]


def test_the_read_is_one_query_on_the_policy_index(store: Store) -> None:
    repo = PlanningRepository.of(store)
    statements: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        statements.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        rows = list(repo.rows("lake-all"))
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)
    assert [r.table_id for r in rows] == [
        "lake.s.a_pays",
        "lake.s.b_compact",
        "lake.s.c_unmeasured",
        "lake.s.e_strict",
    ]
    assert len(statements) == 1
    with store.engine.connect() as conn:
        statement, parameters = statements[0]
        explained = " ".join(
            str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
        )
    assert "ix_tms_table_policy_table_id" in explained, explained


def test_settings_default_and_refuse_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAN_BATCH_SIZE", "PLAN_HEALTH_MAX_AGE"):
        monkeypatch.delenv(f"AIRFLOW__TABLEMGMT__{name}", raising=False)
    assert plan_settings() == (50, timedelta(days=1))
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_BATCH_SIZE", "0")
    with pytest.raises(
        InvalidInput, match=r"plan_batch_size: '0' is not allowed; allowed: a whole number >= 1"
    ):
        plan_settings()
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_BATCH_SIZE", "20")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_HEALTH_MAX_AGE", "soon")
    with pytest.raises(InvalidInput, match=r"plan_health_max_age: expected .*'soon'"):
        plan_settings()
