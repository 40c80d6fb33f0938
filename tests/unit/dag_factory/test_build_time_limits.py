"""Every task has a time limit (core/time_limits.py): a refresh's defaults to its freshness period, is
overridden by the table's ``timeout`` or ``[tablemgmt] refresh_timeout`` and capped by
``refresh_timeout_max``; a maintenance action's defaults to ``[tablemgmt] maintenance_timeout`` (4h) or
its ``timeout`` option; the DAG's ``dagrun_timeout`` covers every try at that limit. Before issue 35 a
refresh had ``execution_timeout: None`` and its DAG no ``dagrun_timeout``."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_tablemgmt.core.dynamic import DynamicTableSpec
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.core.time_limits import DAGRUN_SLACK, dagrun_timeout, refresh_time_limit
from airflow_tablemgmt.dag_factory.build import build_dags
from airflow_tablemgmt.factories.discovery import load_factories

FACTORIES = load_factories()
H = timedelta(hours=1)
SCHEDULED = {"trigger": "schedule", "interval": "1d"}


@pytest.fixture(autouse=True)
def _settings_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REFRESH_TIMEOUT", "REFRESH_TIMEOUT_MAX", "MAINTENANCE_TIMEOUT"):
        monkeypatch.delenv(f"AIRFLOW__TABLEMGMT__{name}", raising=False)


def dynamic(name: str, freshness: str, **more: object) -> TableSpec:
    return DynamicTableSpec.model_validate(
        {
            "identifier": f"lake.db.{name}",
            "query": "SELECT * FROM lake.db.events",
            "freshness": freshness,
            **more,
        }
    ).table_spec()


def plain(name: str, actions: dict[str, object]) -> TableSpec:
    return TableSpec.model_validate({"catalog": "lake", "namespace": "db", "name": name, "actions": actions})


def task_of(tables: list[TableSpec], dag_id: str) -> tuple[object, object]:
    result = build_dags(tables, FACTORIES)
    assert result.errors == []
    dag = result.dags[dag_id]
    [task] = dag.tasks
    return dag, task


def test_a_refresh_is_limited_to_its_freshness_period_and_the_dag_run_too() -> None:
    dag, task = task_of([dynamic("m5", "5 MINUTE")], "tms__lake.db.m5__refresh")
    assert task.execution_timeout == timedelta(minutes=5)  # was None
    assert task.timeout_source == "its freshness period 5m"
    # every try at its limit, the retry delay between them, one lease wait, the slack
    assert dag.dagrun_timeout == 2 * timedelta(minutes=5) + timedelta(minutes=5) + H + DAGRUN_SLACK
    assert "Time limit per run: 5m (its freshness period 5m)" in dag.doc_md


def test_the_tables_timeout_wins_and_the_cap_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    _, task = task_of([dynamic("own", "1 DAY", timeout="20m")], "tms__lake.db.own__refresh")
    assert (task.execution_timeout, task.timeout_source) == (timedelta(minutes=20), "the table's timeout 20m")
    _, task = task_of([dynamic("day", "1 DAY")], "tms__lake.db.day__refresh")
    assert task.execution_timeout == 6 * H  # a day's freshness, capped by the default 6h
    assert "capped by [tablemgmt] refresh_timeout_max 6h" in task.timeout_source
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__REFRESH_TIMEOUT", "30m")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__REFRESH_TIMEOUT_MAX", "2h")
    _, task = task_of([dynamic("day", "1 DAY")], "tms__lake.db.day__refresh")
    assert (task.execution_timeout, task.timeout_source) == (H / 2, "[tablemgmt] refresh_timeout 30m")
    _, task = task_of([dynamic("big", "1 DAY", timeout="5h")], "tms__lake.db.big__refresh")
    assert task.execution_timeout == 2 * H


def test_a_maintenance_action_has_a_default_a_setting_and_an_override(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t = plain("t", {"rewrite-files": SCHEDULED, "expire-snapshots": {"timeout": "30m", **SCHEDULED}})
    _, task = task_of([t], "tms__lake.db.t__rewrite-files")
    assert (task.execution_timeout, task.timeout_source) == (4 * H, "[tablemgmt] maintenance_timeout 4h")
    _, task = task_of([t], "tms__lake.db.t__expire-snapshots")
    assert (task.execution_timeout, task.timeout_source) == (H / 2, "the action's timeout 30m")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__MAINTENANCE_TIMEOUT", "8h")
    _, task = task_of([t], "tms__lake.db.t__rewrite-files")
    assert task.execution_timeout == 8 * H


def test_an_unreadable_setting_is_reported_and_its_default_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__MAINTENANCE_TIMEOUT", "90")
    result = build_dags([plain("t", {"rewrite-files": SCHEDULED})], FACTORIES)
    assert any(e.startswith("[tablemgmt] maintenance_timeout: '90' has no unit") for e in result.errors), (
        result.errors
    )
    [task] = result.dags["tms__lake.db.t__rewrite-files"].tasks
    assert task.execution_timeout == 4 * H


def test_a_bad_timeout_in_a_definition_names_the_field() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="timeout"):
        dynamic("bad", "1 HOUR", timeout="0s")


def test_the_rules_as_plain_values() -> None:
    assert refresh_time_limit(None).limit == H  # freshness downstream
    assert refresh_time_limit(timedelta(minutes=1)).limit == timedelta(minutes=1)
    assert refresh_time_limit(H, override=timedelta(days=3), cap=12 * H).limit == 12 * H
    limit = refresh_time_limit(H, override=timedelta(minutes=2))
    assert limit.reason("refresh") == (
        "timed out: refresh ran past its time limit of 2m (the table's timeout 2m); its Spark job was stopped"
    )
    assert dagrun_timeout(H, 0, timedelta(minutes=5), timedelta(0)) == H + DAGRUN_SLACK
